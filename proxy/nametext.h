/*
 * nametext.h - a host name someone else chose (a sandbox's DNS question,
 * CONNECT target, Host header or SNI) as text that is safe to show and to
 * store: DNS presentation format, RFC 1035 section 5.1.  A byte outside
 * 0x21..0x7e and the backslash itself become a backslash and three decimal
 * digits (ESC is \027, 0xff is \255, '\' is \092, space is \032: in
 * presentation format a space ends the name); every other byte stays.  A
 * name read in wire form also keeps its label structure: a '.' inside a
 * label becomes "\.", so the text names exactly one wire name.  The
 * result is printable ASCII: valid UTF-8 and JSON as it is, no byte a
 * terminal acts on.  Pure: no I/O, no allocation.
 */
#ifndef PX_NAMETEXT_H
#define PX_NAMETEXT_H

#include <stddef.h>
#include <stdint.h>

/* The longest text of a name of at most 255 bytes (every byte as \DDD),
 * without the NUL. */
#define PX_NAMETEXT_MAX (4 * 255)

/* s[0..n) (labels already joined by '.', so a '.' stays one) into out,
 * at most cap - 1 bytes and a NUL (cap >= 1).  An escape that would not
 * fit whole is left out, with everything after it.  Returns the length
 * written. */
size_t px_nametext_from_text(const char *s, size_t n, char *out, size_t cap);

/* The wire-form name wire[0..len) (length-prefixed labels, up to the root
 * label or the end of the bytes; RFC 1035 section 3.1) into out as above,
 * labels joined by '.', a '.' inside a label as "\.".  The root alone is
 * ".".  Returns the length written. */
size_t px_nametext_from_wire(const uint8_t *wire, size_t len, char *out, size_t cap);

#endif
