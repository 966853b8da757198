/*
 * avro_codec.h: Avro records on Kafka sources (ENCODE AVRO), the client of a
 * Confluent-compatible schema registry, and the registry `weir broker`
 * serves.
 *
 * A source with ENCODE AVRO (schema.registry = 'http://...') reads the
 * Confluent wire format: a magic byte 0, the writer schema's id (4 bytes,
 * big-endian), then the Avro binary encoding of one record. The writer
 * schema is fetched from the registry by id once and kept (per source,
 * WEIR_MAX_AVRO_CACHED_SCHEMAS). With ENCODE AVRO (schema.inline = '...')
 * there is no registry and no framing: each record is the raw Avro binary
 * encoding of the one given schema.
 *
 * Columns are resolved against the writer schema by Avro's rules, with the
 * declared columns as the reader schema (every column nullable, default
 * null): a field is matched by name (aliases are not read),
 * a column the writer lacks is NULL, a field the reader lacks is skipped,
 * ints promote to longs, floats and doubles, and a writer type that does not
 * resolve to the column's type makes every record of that writer schema bad
 * (named in the error). See docs/connectors.md for the type mapping.
 *
 * Lifetimes: an RtAvroDecoder belongs to one source operator (one thread).
 * The registry functions may be called from any thread.
 */
#ifndef WEIR_AVRO_CODEC_H
#define WEIR_AVRO_CODEC_H

#include <stdint.h>

#include "buf.h"
#include "chunk.h"
#include "error.h"
#include "planner.h"

/* Return codes besides 0 and -1 (a bad record, or a bad option). */
#define RT_AVRO_UNAVAILABLE (-2) /* the registry cannot be reached: retry later */
#define RT_AVRO_NOT_FOUND (-3)   /* the registry answered 404 (unknown id or subject) */

/* The ENCODE AVRO options of source r (schema.registry,
 * schema.registry.username, schema.registry.password, schema.inline):
 * exactly one of registry and inline, a URL with http:// or https://, user
 * and password together, an inline schema that parses and is a record.
 * Errors: 22023 with the option named; 0A000 for a FORMAT other than PLAIN. */
int rt_avro_check_options(const CatRelation *r, WError *err);

/* The column list of the latest schema of subject `subject` in the
 * registry of r, as SQL text "(\"a\" integer, \"b\" text)" appended to out,
 * for CREATE SOURCE without columns. Errors: 08006 registry unreachable,
 * 42704 no such subject, 22023 the schema is not a record or a field's type
 * has no column type. */
int rt_avro_registry_columns(const CatRelation *r, const char *subject, Buf *out, WError *err);

typedef struct RtAvroDecoder RtAvroDecoder;

/* A decoder for source r's n_cols columns (names[i] NULL: a computed column,
 * never read from the record; types from c's columns at decode time).
 * Returns NULL with err (22023) if the inline schema does not parse.
 * names must outlive the decoder. */
RtAvroDecoder *rt_avro_decoder_new(const CatRelation *r, int n_cols, const char *const *names, WError *err);
void rt_avro_decoder_free(RtAvroDecoder *d);

/* Makes sure the writer schema record [p, p + n) names is known, fetching it
 * from the registry if need be. Returns 0 (known, or the record is bad
 * anyway: decode says why) or RT_AVRO_UNAVAILABLE with errbuf (the registry
 * is down: the caller stops before this record and retries later). */
int rt_avro_prepare(RtAvroDecoder *d, const char *p, size_t n, char *errbuf, size_t errlen);

/* Decodes record [p, p + n) into row `row` of c. Returns 0, or -1 with a
 * message in errbuf (wrong magic byte, unknown schema id, truncated or
 * trailing bytes, a writer schema that does not resolve): a bad record. */
int rt_avro_decode_row(RtAvroDecoder *d, const char *p, size_t n, Chunk *c, int row, char *errbuf, size_t errlen);

/* Registry client (registry_client.c). */
typedef struct RtRegistry {
    const char *url;      /* http(s)://host:port, no trailing path needed */
    const char *user;     /* basic auth, or NULL */
    const char *password;
} RtRegistry;

/* GET url + path into body (NUL-terminated, len without it) and *status.
 * Returns 0 (any HTTP status below 500), RT_AVRO_UNAVAILABLE (no answer, or
 * 5xx), -1 (answer too large); errbuf says why. */
int rt_registry_get(const RtRegistry *reg, const char *path, Buf *body, long *status, char *errbuf, size_t errlen);

/* The embedded registry (registry.c): an HTTP listener on listen
 * ("host:port") serving the REST subset in docs/connectors.md. file (or
 * NULL: memory only) keeps the registered versions across restarts;
 * userpass ("user:password", or NULL) asks every request for basic auth.
 * Returns NULL with err (08006 cannot listen, 58030 the file, XX001 a
 * corrupt file line, 22023 a bad address). */
typedef struct RtSchemaRegistry RtSchemaRegistry;
RtSchemaRegistry *rt_schema_registry_start(const char *listen, const char *file, const char *userpass,
                                           WError *err);
void rt_schema_registry_stop(RtSchemaRegistry *r);

#endif
