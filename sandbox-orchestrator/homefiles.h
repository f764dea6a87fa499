/* homefiles.h - what each agent CLI reads from the guest user's home for
 * the sandbox's secrets (docs/credentials.md), written at create through
 * the guest agent, placeholders only:
 *
 *   a Claude login      ~/.claude/.credentials.json   (egressd's file)
 *   a ChatGPT login     ~/.codex/auth.json            (egressd's file)
 *   a Google login      ~/.gemini/oauth_creds.json    (egressd's file), and
 *                       ~/.gemini/settings.json choosing that login
 *                       (oauth-personal) unless the user has one
 *   an OpenAI API key   ~/.codex/auth.json in API-key mode, unless a
 *                       ChatGPT login is there: codex's built-in provider
 *                       reads its key there or from CODEX_API_KEY
 *
 * Each file is the user's, mode 0600, in directories the user owns.  A
 * sandbox that needs one and has no guest-user fails the create, naming
 * the user and the file. */
#ifndef SBX_HOMEFILES_H
#define SBX_HOMEFILES_H

#include <stdbool.h>
#include <stddef.h>

#include "creds.h"
#include "sbx.h"

#define SBX_HOME_FILES_MAX (SBX_META_MAX_SECRETS + 2)

/* One file for the user's home: dest relative to it, its text, and
 * whether a file already there is kept. */
struct sbx_home_file {
    const char *dest;
    char *text;
    bool keep_existing;
};

/* The files cr's secrets need in the home, in order (a later one for the
 * same dest is dropped); *n their count.  Returns 0, or -1 when a text
 * cannot be made.  sbx_home_files_free() them. */
int sbx_home_files_of(const struct sbx_creds *cr, struct sbx_home_file *f, int *n);
void sbx_home_files_free(struct sbx_home_file *f, int n);

/* Write the files cr's secrets need into guest-user's home in VM vmid on
 * node (none needed: nothing is done).  0, or -1 with err naming the file
 * or the missing user. */
int sbx_home_files_install(struct sbx *s, const char *node, int vmid, const struct sbx_creds *cr,
                           char *err, size_t errlen);

#endif
