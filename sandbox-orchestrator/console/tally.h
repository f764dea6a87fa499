/* tally.h - counting names by group and keeping the most frequent: the
 * traffic page's hosts allowed and denied most, per sandbox.  Pure.
 *
 * The counts are a JSON object {"GROUP": {"KEY": N, ...}, ...} the
 * caller owns. */
#ifndef SBX_CONSOLE_TALLY_H
#define SBX_CONSOLE_TALLY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Count one more of key in group. */
void sbx_tally_add(json_t *counts, const char *group, const char *key);

/* {"GROUP": [{"host": KEY, "count": N}, ...]} with each group's k keys
 * counted most, most first (ties in no particular order; a new
 * reference). */
json_t *sbx_tally_top(json_t *counts, size_t k);

/* A denial's or access-log line's "host:port" (the host alone when it
 * has no port, as a DNS question) into buf; false without a host. */
bool sbx_tally_host_port(json_t *line, char *buf, size_t len);

#endif
