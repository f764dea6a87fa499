/*
 * asked.h - a request as the policy judges it (asked.c): its method as
 * sent and its path as http_path_normalize() gives it.  egressd's judge
 * and both explains make it here, so they judge the same thing.
 */
#ifndef PX_ASKED_H
#define PX_ASKED_H

#include "http.h"
#include "policy.h"

/* The longest normalized path judged; a longer one is judged as a path
 * that did not normalize (no `paths` glob admits it). */
#define PX_ASKED_PATH_MAX 2048

struct px_asked {
    struct policy_request rq; /* what policy_decide_request takes */
    enum http_path_result path_result;
    /* The normalized path drops segments of the one sent ("/a/../b",
     * "/a//b"): an origin could read the sent one otherwise, so it is
     * judged as a path that did not normalize (rq.path NULL). */
    bool reshaped;
    char path[PX_ASKED_PATH_MAX];
};

/* The request method[0..mlen) for target path[0..plen) (origin form, or
 * an absolute target's path and query; NULL for none: a tunnel whose
 * requests are not read) into *a, which then points into itself and into
 * method.  The path is judged only when it is sent in its normal form but
 * for escapes: one that does not normalize, or is reshaped, is judged as
 * none (rq.path NULL: no `paths` glob admits it).  Pure. */
void px_asked_make(struct px_asked *a, const char *method, size_t mlen, const char *path,
                   size_t plen);

#endif
