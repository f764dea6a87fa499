/* bundle.h - what a git bundle from a sandbox says about itself, read
 * before git is let near it: the header's refs and the pack's object count
 * (and, after a scratch fetch, the names in a pack index).
 *
 * A bundle is "# v2 git bundle\n" or "# v3 git bundle\n", v3 capability
 * lines "@...", prerequisite lines "-OID ...", ref lines "OID REFNAME", an
 * empty line, then a pack: "PACK", version (2 or 3), object count, each 4
 * bytes big-endian.
 */
#ifndef SBX_BUNDLE_H
#define SBX_BUNDLE_H

#include <stddef.h>

#include <jansson.h>

/* Check data (len bytes) is a bundle of at most max_refs refs, all under
 * refs/heads/, and a pack of at most max_objects objects.  On 0, *refs is
 * a new array of {ref, commit} and *objects the pack's count.  -1 with err
 * naming the cause ("pull: the bundle holds 120 refs, more than
 * pull-max-refs 100"). */
int sbx_bundle_check(const unsigned char *data, size_t len, int max_refs, long max_objects,
                     json_t **refs, long *objects, char *err, size_t errlen);

/* The object names of a version 2 pack index (idx bytes), one hex name a
 * line, into a new buffer (*outlen bytes).  NULL when it is not one. */
char *sbx_pack_idx_names(const unsigned char *idx, size_t len, size_t *outlen);

#endif
