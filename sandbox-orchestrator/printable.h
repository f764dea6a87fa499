/* printable.h - text someone else chose (a sandbox's host names and
 * branches, its guest agent's output in an error, egressd's denials and
 * answers, an MCP client's arguments) made safe to print: on a terminal,
 * in a log, in an MCP client's text.  Every byte that could act on a
 * terminal or break a line becomes '?': the C0 controls (line breaks and
 * tabs too), DEL, the C1 controls U+0080..U+009F (an 8-bit CSI among
 * them), and every byte that is not part of valid UTF-8 (RFC 3629; the
 * rules jansson checks, so the result is always a valid JSON string).
 * Valid UTF-8 otherwise stays as it is.  In place: the length never
 * changes.  Every printer of sandboxctl and of its MCP server uses these. */
#ifndef SBX_PRINTABLE_H
#define SBX_PRINTABLE_H

#include <jansson.h>
#include <stddef.h>

/* s, one line: every such byte '?'. */
void sbx_printable(char *s);

/* s, several lines: the same, but a line feed stays. */
void sbx_printable_lines(char *s);

/* The JSON string v made printable (json_string_set: the value changes in
 * v itself) and its text; NULL when v is not a string. */
const char *sbx_printable_value(json_t *v);

/* The same for member key of object o. */
const char *sbx_printable_get(json_t *o, const char *key);

/* The length of the valid UTF-8 sequence at p (1 to 4), or 0 when none
 * starts there.  Stops at a NUL, so it never reads past one. */
size_t sbx_utf8_len(const unsigned char *p);

#endif
