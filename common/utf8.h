/*
 * utf8.h: UTF-8 and JSON text checks, one implementation for every door
 * text comes in by: SQL literals (parser), query strings and parameters
 * (pgwire), JSON records (runtime/json.c) and text cast to jsonb (types.c).
 *
 * weir's only encoding is UTF-8, as a PostgreSQL database created with
 * ENCODING 'UTF8': text that is not valid UTF-8, or holds a NUL byte, is
 * refused where it enters (22021), never stored, because every later
 * reader (a driver decoding a result, the HTTP API's JSON, a sink's target)
 * would fail on it, and they cannot drop it.
 */
#ifndef WEIR_COMMON_UTF8_H
#define WEIR_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length (1..4) of the valid UTF-8 sequence at p (n >= 1 bytes left), or 0
 * if it is not one: a stray continuation byte, an overlong form, a
 * surrogate (U+D800..U+DFFF), past U+10FFFF, cut short, or a NUL byte. */
int utf8_seq_len(const unsigned char *p, size_t n);

/* The offset of the first byte of p[0..n) that does not start a valid
 * sequence (see utf8_seq_len), or n when all of it is valid. ASCII runs are
 * checked eight bytes at a time. */
size_t utf8_invalid_at(const char *p, size_t n);

/* How deeply json_text_check lets arrays and objects nest: the JSON record
 * decoder's limit too (runtime/json.c), so a value one door accepts the
 * other does too. Recursion is bounded by it. */
#define JSON_MAX_DEPTH 64

/* Whether p[0..n) is one JSON value (RFC 8259) with optional white space
 * around it, in valid UTF-8, \u escapes well formed (a lone surrogate
 * escape or \u0000 is refused, as PostgreSQL's jsonb does) and nesting at
 * most JSON_MAX_DEPTH. Returns 0, or -1 with the reason in why (cap bytes,
 * e.g. "unexpected end of input at offset 5"). */
int json_text_check(const char *p, size_t n, char *why, size_t cap);

/* The length of the JSON number (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
 * at the start of p[0..n), or 0 when none starts there. The record decoder
 * uses it too, so "0001", "+1", ".5", "NaN" or "0x1F" are refused by both. */
size_t json_number_len(const char *p, size_t n);

#endif
