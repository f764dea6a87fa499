/*
 * utf8.h - UTF-8 sequences as RFC 3629 (section 3) defines them, checked
 * the way jansson checks the strings it reads: no overlong forms, no UTF-16
 * surrogates (U+D800..U+DFFF), nothing past U+10FFFF.  Pure: no I/O, no
 * allocation.  The access log and the metrics page both write text that
 * must be valid UTF-8 from bytes a client or a file may have chosen.
 */
#ifndef PX_UTF8_H
#define PX_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length (1 to 4) of the valid UTF-8 sequence that starts at s, of
 * which at most n bytes may be read; 0 when n is 0, when s[0] cannot start
 * a sequence (0x80..0xC1, 0xF5..0xFF), when a continuation byte is missing
 * or not 10xxxxxx, when the sequence needs more than n bytes, and for an
 * overlong form, a surrogate or a code point over U+10FFFF. */
size_t px_utf8_seq(const unsigned char *s, size_t n);

/* Whether s[0..n) is a whole number of valid sequences (true for n 0). */
bool px_utf8_valid(const unsigned char *s, size_t n);

#endif
