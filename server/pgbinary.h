/*
 * pgbinary.h: PostgreSQL's binary wire encodings of single values (format
 * code 1 in Bind), private to the wire protocol library (pgwire.c).
 *
 * The engine speaks text only: it emits the Postgres text form of every
 * value and takes parameters as text. pgwire translates at the edge, so
 * binary is a property of the connection, not of the engine: a binary
 * parameter is decoded to the text the client would have sent, and a binary
 * result column is encoded from the text the engine emitted. The encodings
 * are Postgres' own send/recv formats: big-endian integers, IEEE floats,
 * date as int32 days and timestamps as int64 microseconds since 2000-01-01,
 * interval as int64 microseconds + int32 days + int32 months, numeric as
 * base-10000 digits (numeric.h: num_to_pgbinary), jsonb as a
 * version byte (1) then the text.
 */
#ifndef WEIR_SERVER_PGBINARY_H
#define WEIR_SERVER_PGBINARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "error.h"

/* True when values of type oid can be sent in binary (pgbin_encode knows
 * the type). Others (arrays, regproc ...) stay text-only. */
bool pgbin_result_supported(uint32_t oid);

/* Appends the binary form of the text value text[0..len) of type oid to out.
 * Returns 0, or -1 with err (22P03) when the text is not a valid value of
 * the type (out is then left with a partial value: the caller truncates). */
int pgbin_encode(uint32_t oid, const char *text, size_t len, Buf *out, WError *err);

/* Decodes binary parameter $idx+1 of type oid, v[0..len), to its text form.
 * Returns a malloc'd NUL-terminated string, or NULL with err: 22P03 wrong
 * length or malformed value, 22021 a NUL byte in text, 0A000 a type with no
 * binary decoder, 54000 a value too large to convert. */
char *pgbin_param_to_text(int idx, uint32_t oid, const unsigned char *v, size_t len, WError *err);

#endif
