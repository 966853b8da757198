/*
 * avro.c: decoding Avro records into a source's rows (ENCODE AVRO), with
 * libavro for the binary encoding and jansson for what libavro's schema
 * objects do not keep (logical types, decimal scales). <avro.h> is included
 * here and in registry.c only.
 *
 * Data flow: the source operator calls rt_avro_prepare for every record of
 * a poll before decoding any (so a registry outage stops the poll before
 * the first record, not in the middle), then rt_avro_decode_row per record.
 * A writer schema, once fetched, becomes a Writer: libavro's generic value
 * for reading records of it, and a FieldMap per column saying which writer
 * field feeds it and with which logical type. Building the FieldMaps is the
 * schema resolution (avro_codec.h): a column type the writer's field cannot
 * resolve to marks the Writer bad, and its records are bad records.
 *
 * Per record the cost is libavro's read into the generic value (reused,
 * reset by the read) and one conversion per column; nothing is allocated
 * outside the chunk arena except the JSON text of nested values.
 */
#include "avro_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <avro.h>
#include <jansson.h>

#include "clock.h"
#include "log.h"
#include "utf8.h"
#include "weir_limits.h"

/* An id the registry did not know is asked again after this long (it may
 * have been registered since); in between its records are bad at once. */
#define MISSING_RETRY_MS 5000
#define MAX_MISSING 64

typedef enum Logical {
    LT_NONE,
    LT_DATE,
    LT_TS_MILLIS, /* timestamp-millis and local-timestamp-millis */
    LT_TS_MICROS, /* timestamp-micros and local-timestamp-micros */
    LT_DECIMAL,
    LT_UUID,
} Logical;

/* Where column i's value comes from in records of one writer schema. */
typedef struct FieldMap {
    int index;    /* field of the writer's record, or -1: the column is NULL */
    Logical lt;   /* of the field's (first non-null union branch's) type */
    int scale;    /* LT_DECIMAL: digits after the point */
} FieldMap;

typedef struct Writer {
    int32_t id;                 /* registry id (0 for an inline schema) */
    avro_schema_t schema;
    avro_value_iface_t *iface;
    avro_value_t value;         /* reused for every record of this schema */
    FieldMap *fields;           /* n_cols */
    char *error;                /* the schema does not resolve: every record is bad with this */
} Writer;

typedef struct Missing {
    int32_t id;
    int64_t since_ms;
} Missing;

struct RtAvroDecoder {
    RtRegistry reg;
    bool framed;                /* Confluent framing and a registry; else raw records of `inline_w` */
    int n_cols;
    const char *const *names;
    const TypeId *types;        /* the relation's column types */
    Writer *writers[WEIR_MAX_AVRO_CACHED_SCHEMAS];
    int n_writers;
    Writer *inline_w;
    Missing missing[MAX_MISSING];
    int n_missing;
    avro_reader_t reader;
};

/* ---- options -------------------------------------------------------------------------- */

static bool is_record_schema(avro_schema_t s)
{
    return s && avro_typeof(s) == AVRO_RECORD;
}

static const char *opt(const CatRelation *r, const char *k)
{
    const char *v = cat_option(r, k);
    return v && *v ? v : NULL;
}

int rt_avro_check_options(const CatRelation *r, WError *err)
{
    const char *url = opt(r, "schema.registry"), *inl = opt(r, "schema.inline");
    const char *user = opt(r, "schema.registry.username"), *pw = opt(r, "schema.registry.password");
    if (r->format && strcasecmp(r->format, "plain") != 0) {
        werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: FORMAT %s ENCODE AVRO", r->format);
        werr_hint(err, "Avro records are read with FORMAT PLAIN ENCODE AVRO; UPSERT and DEBEZIUM read JSON "
                       "(ENCODE JSON).");
        return -1;
    }
    if (!url == !inl)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "ENCODE AVRO needs exactly one of schema.registry = 'http://host:port' and schema.inline = "
                    "'<Avro schema JSON>'");
    if (url && strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "schema.registry must be an http:// or https:// URL, not '%s'",
                    url);
    if ((user || pw) && !url)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "schema.registry.username and schema.registry.password go with schema.registry");
    if (!user != !pw)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "schema.registry.username and schema.registry.password go together");
    if (inl) {
        if (strlen(inl) > WEIR_MAX_AVRO_SCHEMA_BYTES)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "schema.inline is longer than %d bytes",
                        WEIR_MAX_AVRO_SCHEMA_BYTES);
        avro_schema_t s;
        if (avro_schema_from_json_length(inl, strlen(inl), &s))
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "schema.inline is not a valid Avro schema: %s",
                        avro_strerror());
        bool rec = is_record_schema(s);
        avro_schema_decref(s);
        if (!rec)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "schema.inline must be an Avro record schema");
    }
    return 0;
}

/* ---- schema inspection ------------------------------------------------------------------ */

/* The type of a field (a JSON schema node) without its null branch: the
 * first non-"null" branch of a union, else the node itself. */
static json_t *non_null(json_t *t, bool *is_union)
{
    *is_union = json_is_array(t);
    if (!json_is_array(t))
        return t;
    size_t i;
    json_t *b;
    json_array_foreach(t, i, b) {
        if (!(json_is_string(b) && !strcmp(json_string_value(b), "null")))
            return b;
    }
    return NULL;
}

static Logical logical_of(json_t *t, int *scale)
{
    *scale = 0;
    if (!json_is_object(t))
        return LT_NONE;
    const char *lt = json_string_value(json_object_get(t, "logicalType"));
    if (!lt)
        return LT_NONE;
    if (!strcmp(lt, "date"))
        return LT_DATE;
    if (!strcmp(lt, "timestamp-millis") || !strcmp(lt, "local-timestamp-millis"))
        return LT_TS_MILLIS;
    if (!strcmp(lt, "timestamp-micros") || !strcmp(lt, "local-timestamp-micros"))
        return LT_TS_MICROS;
    if (!strcmp(lt, "uuid"))
        return LT_UUID;
    if (!strcmp(lt, "decimal")) {
        json_t *s = json_object_get(t, "scale");
        *scale = json_is_integer(s) ? (int)json_integer_value(s) : 0;
        return LT_DECIMAL;
    }
    return LT_NONE; /* an unknown logical type reads as its underlying type, as the spec says */
}

/* Does a value of Avro type at (with logical type lt) resolve to a column of type t? */
static bool resolves(avro_type_t at, Logical lt, TypeId t)
{
    switch (t) {
    case TYPE_BOOL: return at == AVRO_BOOLEAN;
    case TYPE_INT2:
    case TYPE_INT4: return at == AVRO_INT32 && lt == LT_NONE;
    case TYPE_INT8: return (at == AVRO_INT32 || at == AVRO_INT64) && lt == LT_NONE;
    case TYPE_FLOAT4: return (at == AVRO_INT32 || at == AVRO_INT64 || at == AVRO_FLOAT) && lt == LT_NONE;
    case TYPE_FLOAT8:
        return (at == AVRO_INT32 || at == AVRO_INT64 || at == AVRO_FLOAT || at == AVRO_DOUBLE) && lt == LT_NONE;
    case TYPE_NUMERIC:
        return ((at == AVRO_BYTES || at == AVRO_FIXED) && lt == LT_DECIMAL) ||
               ((at == AVRO_INT32 || at == AVRO_INT64) && lt == LT_NONE);
    case TYPE_TEXT: return at == AVRO_STRING || at == AVRO_ENUM || at == AVRO_BYTES || at == AVRO_RECORD ||
                           at == AVRO_ARRAY || at == AVRO_MAP;
    case TYPE_BYTEA: return (at == AVRO_BYTES || at == AVRO_FIXED || at == AVRO_STRING) && lt != LT_DECIMAL;
    case TYPE_DATE: return at == AVRO_INT32 && lt == LT_DATE;
    case TYPE_TIMESTAMP:
    case TYPE_TIMESTAMPTZ: return at == AVRO_INT64 && (lt == LT_TS_MILLIS || lt == LT_TS_MICROS || lt == LT_NONE);
    case TYPE_INTERVAL: return at == AVRO_STRING;
    case TYPE_JSONB: return true;
    default: return false;
    }
}

static const char *avro_type_label(avro_type_t at, Logical lt)
{
    switch (lt) {
    case LT_DATE: return "int (date)";
    case LT_TS_MILLIS: return "long (timestamp-millis)";
    case LT_TS_MICROS: return "long (timestamp-micros)";
    case LT_DECIMAL: return "decimal";
    case LT_UUID: return "string (uuid)";
    default: break;
    }
    switch (at) {
    case AVRO_STRING: return "string";
    case AVRO_BYTES: return "bytes";
    case AVRO_INT32: return "int";
    case AVRO_INT64: return "long";
    case AVRO_FLOAT: return "float";
    case AVRO_DOUBLE: return "double";
    case AVRO_BOOLEAN: return "boolean";
    case AVRO_NULL: return "null";
    case AVRO_RECORD: return "record";
    case AVRO_ENUM: return "enum";
    case AVRO_FIXED: return "fixed";
    case AVRO_MAP: return "map";
    case AVRO_ARRAY: return "array";
    case AVRO_UNION: return "union";
    default: return "link";
    }
}

static void writer_free(Writer *w)
{
    if (!w)
        return;
    if (w->iface) {
        avro_value_decref(&w->value);
        avro_value_iface_decref(w->iface);
    }
    if (w->schema)
        avro_schema_decref(w->schema);
    free(w->fields);
    free(w->error);
    free(w);
}

static void writer_fail(Writer *w, const char *fmt, const char *a, const char *b, const char *c)
{
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a, b, c);
    free(w->error);
    w->error = xstrdup(msg);
}

/* The index of field `name` of record schema s, or -1. (libavro's own
 * lookup records an error for an absent field, which would then prefix the
 * next real error's message.) */
static int field_index(avro_schema_t s, const char *name)
{
    size_t n = avro_schema_record_size(s);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(avro_schema_record_field_name(s, (int)i), name))
            return (int)i;
    return -1;
}

/* Resolves the writer schema `json` against the columns: a Writer, bad
 * (w->error) when the schema does not parse or a field does not resolve. */
static Writer *writer_new(const RtAvroDecoder *d, int32_t id, const char *json, size_t len)
{
    Writer *w = xcalloc(1, sizeof *w);
    w->id = id;
    w->fields = xcalloc((size_t)(d->n_cols ? d->n_cols : 1), sizeof(FieldMap));
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (avro_schema_from_json_length(json, len, &w->schema) || !root) {
        w->schema = NULL;
        writer_fail(w, "writer schema %s does not parse: %s%s", id ? "" : "(inline)", avro_strerror(), "");
        goto out;
    }
    if (!is_record_schema(w->schema) || !json_is_object(root)) {
        writer_fail(w, "writer schema is %s, not a record%s%s", avro_schema_type_name(w->schema), "", "");
        goto out;
    }
    json_t *jfields = json_object_get(root, "fields");
    for (int i = 0; i < d->n_cols; i++) {
        FieldMap *f = &w->fields[i];
        f->index = d->names[i] ? field_index(w->schema, d->names[i]) : -1;
        if (f->index < 0)
            continue; /* missing in the writer: the reader's default, NULL */
        json_t *jt = json_object_get(json_array_get(jfields, (size_t)f->index), "type");
        bool is_union;
        json_t *nn = non_null(jt, &is_union);
        f->lt = logical_of(nn, &f->scale);
        avro_schema_t fs = avro_schema_record_field_get_by_index(w->schema, f->index);
        if (avro_typeof(fs) == AVRO_UNION) {
            /* Checked per record: the branch written decides. Only a union
             * no branch of which resolves is refused for the whole schema. */
            bool any = false;
            for (size_t b = 0; b < avro_schema_union_size(fs) && !any; b++) {
                avro_schema_t bs = avro_schema_union_branch(fs, (int)b);
                int sc;
                json_t *jb = json_array_get(jt, b);
                any = avro_typeof(bs) != AVRO_NULL && resolves(avro_typeof(bs), logical_of(jb, &sc), d->types[i]);
            }
            if (!any)
                writer_fail(w, "field \"%s\": no branch of the writer's union resolves to column type %s%s",
                            d->names[i], type_name(d->types[i]), "");
        } else if (!resolves(avro_typeof(fs), f->lt, d->types[i])) {
            writer_fail(w, "field \"%s\": writer type %s does not resolve to column type %s", d->names[i],
                        avro_type_label(avro_typeof(fs), f->lt), type_name(d->types[i]));
        }
        if (w->error)
            goto out;
    }
    w->iface = avro_generic_class_from_schema(w->schema);
    if (!w->iface || avro_generic_value_new(w->iface, &w->value)) {
        if (w->iface)
            avro_value_iface_decref(w->iface);
        w->iface = NULL;
        writer_fail(w, "writer schema: %s%s%s", avro_strerror(), "", "");
    }
out:
    if (root)
        json_decref(root);
    return w;
}

/* ---- validation before libavro reads -------------------------------------------------- */

/* Nesting of one record's values (a recursive schema can nest without end). */
#define MAX_VALUE_DEPTH 64
/* Items of an array or map beyond the bytes left (only items that encode to
 * no bytes, null or an empty record, can be that many). */
#define MAX_EMPTY_ITEMS 1024

static int varint(const unsigned char **p, const unsigned char *end, int64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
    }
    return -1;
}

/* Walks one value of schema s in [*p, end) without allocating, checking every
 * length, count and index against what is there. libavro allocates a
 * string's claimed length before reading it and leaks it when the read
 * fails, and recurses as deep as the data goes; this pass makes sure it
 * only ever reads a well-formed record. Returns 0, or -1 with *why. */
static int skim(avro_schema_t s, const unsigned char **p, const unsigned char *end, int depth, const char **why)
{
    int64_t v;
    if (depth > MAX_VALUE_DEPTH)
        return *why = "values nested more than 64 levels deep", -1;
    switch (avro_typeof(s)) {
    case AVRO_NULL: return 0;
    case AVRO_BOOLEAN:
        if (*p >= end)
            break;
        (*p)++;
        return 0;
    case AVRO_INT32:
    case AVRO_INT64: return varint(p, end, &v) ? (*why = "truncated", -1) : 0;
    case AVRO_FLOAT:
    case AVRO_DOUBLE: {
        int64_t w = avro_typeof(s) == AVRO_FLOAT ? 4 : 8;
        if (end - *p < w)
            break;
        *p += w;
        return 0;
    }
    case AVRO_STRING:
    case AVRO_BYTES:
        if (varint(p, end, &v) || v < 0 || v > end - *p)
            break;
        /* Strings anywhere in the record (nested ones go into JSONB, where
         * libavro's JSON writer would cut a string at a NUL) are UTF-8
         * without NUL, as JSON records' are. */
        if (avro_typeof(s) == AVRO_STRING && utf8_invalid_at((const char *)*p, (size_t)v) != (size_t)v)
            return *why = "invalid UTF-8 (or a NUL byte) in a string", -1;
        *p += v;
        return 0;
    case AVRO_FIXED:
        if (end - *p < avro_schema_fixed_size(s))
            break;
        *p += avro_schema_fixed_size(s);
        return 0;
    case AVRO_ENUM:
        if (varint(p, end, &v))
            break;
        if (v < 0 || v >= avro_schema_enum_number_of_symbols(s))
            return *why = "enum index out of range", -1;
        return 0;
    case AVRO_UNION:
        if (varint(p, end, &v))
            break;
        if (v < 0 || (size_t)v >= avro_schema_union_size(s))
            return *why = "union branch out of range", -1;
        return skim(avro_schema_union_branch(s, (int)v), p, end, depth + 1, why);
    case AVRO_RECORD:
        for (size_t i = 0; i < avro_schema_record_size(s); i++)
            if (skim(avro_schema_record_field_get_by_index(s, (int)i), p, end, depth + 1, why))
                return -1;
        return 0;
    case AVRO_ARRAY:
    case AVRO_MAP: {
        bool map = avro_typeof(s) == AVRO_MAP;
        avro_schema_t item = map ? avro_schema_map_values(s) : avro_schema_array_items(s);
        for (;;) {
            if (varint(p, end, &v))
                break;
            if (v == 0)
                return 0;
            if (v < 0) { /* a block with its byte size */
                int64_t size;
                if (v == INT64_MIN || varint(p, end, &size) || size < 0 || size > end - *p)
                    break;
                v = -v;
            }
            if (v > end - *p + MAX_EMPTY_ITEMS)
                return *why = "more array or map items than the record holds", -1;
            for (int64_t k = 0; k < v; k++) {
                int64_t klen;
                if (map) { /* the key: a string */
                    if (varint(p, end, &klen) || klen < 0 || klen > end - *p)
                        return *why = "truncated", -1;
                    *p += klen;
                }
                if (skim(item, p, end, depth + 1, why))
                    return -1;
            }
        }
        break;
    }
    case AVRO_LINK: return skim(avro_schema_link_target(s), p, end, depth + 1, why);
    default: return *why = "unknown Avro type", -1;
    }
    return *why = "truncated", -1;
}

/* ---- the decoder ------------------------------------------------------------------------- */

RtAvroDecoder *rt_avro_decoder_new(const CatRelation *r, int n_cols, const char *const *names, WError *err)
{
    if (rt_avro_check_options(r, err))
        return NULL;
    RtAvroDecoder *d = xcalloc(1, sizeof *d);
    d->reg.url = opt(r, "schema.registry");
    d->reg.user = opt(r, "schema.registry.username");
    d->reg.password = opt(r, "schema.registry.password");
    d->framed = d->reg.url != NULL;
    d->n_cols = n_cols;
    d->names = names;
    d->types = r->col_types;
    d->reader = avro_reader_memory("", 0);
    if (!d->framed) {
        const char *inl = opt(r, "schema.inline");
        d->inline_w = writer_new(d, 0, inl, strlen(inl));
        if (d->inline_w->error) {
            werr(err, SQLSTATE_INVALID_PARAMETER, 0, "schema.inline: %s", d->inline_w->error);
            rt_avro_decoder_free(d);
            return NULL;
        }
    }
    return d;
}

void rt_avro_decoder_free(RtAvroDecoder *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n_writers; i++)
        writer_free(d->writers[i]);
    writer_free(d->inline_w);
    if (d->reader)
        avro_reader_free(d->reader);
    free(d);
}

static uint32_t be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static Writer *find_writer(const RtAvroDecoder *d, int32_t id)
{
    for (int i = 0; i < d->n_writers; i++)
        if (d->writers[i]->id == id)
            return d->writers[i];
    return NULL;
}

static Missing *find_missing(RtAvroDecoder *d, int32_t id)
{
    for (int i = 0; i < d->n_missing; i++)
        if (d->missing[i].id == id)
            return &d->missing[i];
    return NULL;
}

/* GET /schemas/ids/{id}: the Writer, or NULL with *rc RT_AVRO_NOT_FOUND,
 * RT_AVRO_UNAVAILABLE or -1. */
static int fetch_writer(RtAvroDecoder *d, int32_t id, char *errbuf, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof path, "/schemas/ids/%" PRId32, id);
    Buf body = BUF_INIT;
    long status = 0;
    int rc = rt_registry_get(&d->reg, path, &body, &status, errbuf, errlen);
    if (rc == 0 && (status == 401 || status == 403)) {
        /* Credentials are the operator's to fix: pause rather than turn every record bad. */
        snprintf(errbuf, errlen, "schema registry %s refused the credentials (HTTP %ld)", d->reg.url, status);
        rc = RT_AVRO_UNAVAILABLE;
    } else if (rc == 0 && status == 404) {
        rc = RT_AVRO_NOT_FOUND;
    } else if (rc == 0 && status != 200) {
        snprintf(errbuf, errlen, "schema registry answered HTTP %ld for schema id %" PRId32, status, id);
        rc = -1;
    }
    if (rc) {
        buf_free(&body);
        return rc;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body.data, body.len, 0, &jerr);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    const char *type = json_string_value(json_object_get(root, "schemaType"));
    Writer *w = xcalloc(1, sizeof *w);
    if (!schema) {
        w->id = id;
        w->fields = xcalloc(1, sizeof(FieldMap));
        w->error = xstrdup("the registry's answer has no \"schema\"");
    } else if (type && strcmp(type, "AVRO") != 0) {
        w->id = id;
        w->fields = xcalloc(1, sizeof(FieldMap));
        char msg[120];
        snprintf(msg, sizeof msg, "schema id %" PRId32 " is a %s schema, not Avro", id, type);
        w->error = xstrdup(msg);
    } else {
        free(w);
        w = writer_new(d, id, schema, strlen(schema));
    }
    if (root)
        json_decref(root);
    buf_free(&body);
    if (d->n_writers == WEIR_MAX_AVRO_CACHED_SCHEMAS) {
        for (int i = 0; i < d->n_writers; i++)
            writer_free(d->writers[i]);
        d->n_writers = 0;
    }
    d->writers[d->n_writers++] = w;
    if (w->error)
        wlog_warn("avro", "schema id %" PRId32 " from %s: %s", id, d->reg.url, w->error);
    return 0;
}

int rt_avro_prepare(RtAvroDecoder *d, const char *p, size_t n, char *errbuf, size_t errlen)
{
    if (!d->framed || !p || n < 5 || p[0] != 0)
        return 0;
    int32_t id = (int32_t)be32(p + 1);
    if (find_writer(d, id))
        return 0;
    Missing *m = find_missing(d, id);
    int64_t now = clock_mono_ms();
    if (m && now - m->since_ms < MISSING_RETRY_MS)
        return 0;
    int rc = fetch_writer(d, id, errbuf, errlen);
    if (rc == RT_AVRO_UNAVAILABLE)
        return rc;
    if (rc == RT_AVRO_NOT_FOUND || rc < 0) {
        if (!m) {
            if (d->n_missing == MAX_MISSING)
                d->n_missing = 0;
            m = &d->missing[d->n_missing++];
        }
        m->id = id;
        m->since_ms = now;
    } else if (m) {
        *m = d->missing[--d->n_missing];
    }
    return 0;
}

/* ---- values -------------------------------------------------------------------------------- */

typedef struct Out {
    Chunk *c;
    int col, row;
    const char *field;
    char *err;
    size_t errlen;
} Out;

static int bad(Out *o, const char *what)
{
    snprintf(o->err, o->errlen, "field \"%s\": %s", o->field, what);
    return -1;
}

static int put(Out *o, Value v)
{
    chunk_set(o->c, o->col, o->row, &v);
    return 0;
}

static int put_text(Out *o, const char *p, size_t n)
{
    Value v;
    WError e = {0};
    /* Text is UTF-8 without NUL (common/utf8.h), as from the JSON decoder:
     * libavro does not check Avro's strings, and a value no reader could
     * decode later must be a bad record now. */
    if (utf8_invalid_at(p, n) != n)
        return bad(o, "invalid UTF-8 (or a NUL byte) in a string");
    if (value_from_text(o->c->cols[o->col].type, p, n, o->c->arena, &v, &e))
        return bad(o, e.msg);
    return put(o, v);
}

/* An Avro decimal (big-endian two's complement of the unscaled value) as text. */
static int put_decimal(Out *o, const unsigned char *b, size_t n, int scale)
{
    if (n > 16)
        return bad(o, "decimal wider than 16 bytes");
    if (scale < 0 || scale > 38)
        return bad(o, "decimal scale out of range");
    __int128 x = n && (b[0] & 0x80) ? -1 : 0;
    for (size_t i = 0; i < n; i++)
        x = (__int128)((unsigned __int128)x << 8 | b[i]);
    bool neg = x < 0;
    unsigned __int128 u = neg ? (unsigned __int128)0 - (unsigned __int128)x : (unsigned __int128)x;
    char digits[64], out[80];
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    while (nd <= scale)
        digits[nd++] = '0';
    int k = 0;
    if (neg)
        out[k++] = '-';
    for (int i = nd - 1; i >= 0; i--) {
        out[k++] = digits[i];
        if (i == scale && scale > 0)
            out[k++] = '.';
    }
    return put_text(o, out, (size_t)k);
}

static int put_json(Out *o, avro_value_t *v)
{
    char *j = NULL;
    if (avro_value_to_json(v, 1, &j) || !j)
        return bad(o, "value cannot be written as JSON");
    size_t n = strlen(j);
    int rc;
    char why[120];
    if (o->c->cols[o->col].type == TYPE_JSONB && json_text_check(j, n, why, sizeof why)) {
        free(j); /* a \u0000 from a NUL in a string, say: what jsonb input refuses */
        return bad(o, why);
    }
    if (o->c->cols[o->col].type == TYPE_JSONB) {
        char *copy = arena_alloc(o->c->arena, n + 1);
        memcpy(copy, j, n + 1);
        rc = put(o, value_str(TYPE_JSONB, copy, n));
    } else {
        rc = put_text(o, j, n);
    }
    free(j);
    return rc;
}

static int put_int(Out *o, int64_t x, Logical lt)
{
    TypeId t = o->c->cols[o->col].type;
    switch (t) {
    case TYPE_INT2:
        if (x < INT16_MIN || x > INT16_MAX)
            return bad(o, "value out of range for type smallint");
        return put(o, value_int(t, x));
    case TYPE_INT4:
    case TYPE_INT8: return put(o, value_int(t, x));
    case TYPE_FLOAT4:
    case TYPE_FLOAT8: return put(o, value_float(t, (double)x));
    case TYPE_DATE:
        if (x < DATE_MIN_DAYS || x >= DATE_END_DAYS)
            return bad(o, "date out of range");
        return put(o, value_int(t, x));
    case TYPE_TIMESTAMP:
    case TYPE_TIMESTAMPTZ:
        if (lt != LT_TS_MICROS) { /* millis, as a plain long is read too (as JSON numbers are) */
            if (x > INT64_MAX / 1000 || x < INT64_MIN / 1000)
                return bad(o, "timestamp out of range");
            x *= 1000;
        }
        return put(o, value_int(t, x));
    default: {
        char tmp[32];
        int k = snprintf(tmp, sizeof tmp, "%" PRId64, x);
        return put_text(o, tmp, (size_t)k);
    }
    }
}

static int put_value(Out *o, avro_value_t *v, const FieldMap *f)
{
    TypeId t = o->c->cols[o->col].type;
    avro_type_t at = avro_value_get_type(v);
    if (at == AVRO_UNION) {
        avro_value_t br;
        if (avro_value_get_current_branch(v, &br))
            return bad(o, "bad union");
        return put_value(o, &br, f);
    }
    if (at == AVRO_NULL)
        return put(o, value_null(t));
    /* In a union, f->lt describes the first non-null branch; another branch is plain. */
    Logical lt = f->lt;
    if ((lt == LT_DATE && at != AVRO_INT32) || ((lt == LT_TS_MILLIS || lt == LT_TS_MICROS) && at != AVRO_INT64) ||
        (lt == LT_DECIMAL && at != AVRO_BYTES && at != AVRO_FIXED) || (lt == LT_UUID && at != AVRO_STRING))
        lt = LT_NONE;
    if (!resolves(at, lt, t)) {
        char msg[160];
        snprintf(msg, sizeof msg, "writer type %s does not resolve to column type %s", avro_type_label(at, lt),
                 type_name(t));
        return bad(o, msg);
    }
    if (t == TYPE_JSONB && at != AVRO_BYTES && at != AVRO_FIXED)
        return put_json(o, v);
    switch (at) {
    case AVRO_BOOLEAN: {
        int b = 0;
        if (avro_value_get_boolean(v, &b))
            return bad(o, "unreadable boolean");
        return put(o, value_bool(b != 0));
    }
    case AVRO_INT32: {
        int32_t x = 0;
        if (avro_value_get_int(v, &x))
            return bad(o, "unreadable int");
        return put_int(o, x, lt);
    }
    case AVRO_INT64: {
        int64_t x = 0;
        if (avro_value_get_long(v, &x))
            return bad(o, "unreadable long");
        return put_int(o, x, lt);
    }
    case AVRO_FLOAT: {
        float x = 0;
        if (avro_value_get_float(v, &x))
            return bad(o, "unreadable float");
        return put(o, value_float(t, (double)x));
    }
    case AVRO_DOUBLE: {
        double x = 0;
        if (avro_value_get_double(v, &x))
            return bad(o, "unreadable double");
        return put(o, value_float(t, x));
    }
    case AVRO_STRING: {
        const char *s = NULL;
        size_t n = 0;
        if (avro_value_get_string(v, &s, &n) || !s) /* n counts the NUL */
            return bad(o, "unreadable string");
        n = n ? n - 1 : 0;
        if (t == TYPE_BYTEA) {
            char *copy = arena_alloc(o->c->arena, n + 1);
            memcpy(copy, s, n);
            return put(o, value_str(t, copy, n));
        }
        return put_text(o, s, n);
    }
    case AVRO_BYTES:
    case AVRO_FIXED: {
        const void *b = NULL;
        size_t n = 0;
        if ((at == AVRO_BYTES ? avro_value_get_bytes(v, &b, &n) : avro_value_get_fixed(v, &b, &n)) || (!b && n))
            return bad(o, "unreadable bytes");
        if (lt == LT_DECIMAL)
            return put_decimal(o, b, n, f->scale);
        char *copy = arena_alloc(o->c->arena, n + 1);
        memcpy(copy, b, n);
        if (t == TYPE_BYTEA)
            return put(o, value_str(t, copy, n));
        if (t == TYPE_JSONB)
            return put_json(o, v);
        return put_text(o, copy, n);
    }
    case AVRO_ENUM: {
        int k = -1;
        if (avro_value_get_enum(v, &k))
            return bad(o, "unreadable enum");
        const char *sym = avro_schema_enum_get(avro_value_get_schema(v), k);
        if (!sym)
            return bad(o, "enum symbol out of range");
        return put_text(o, sym, strlen(sym));
    }
    default: return put_json(o, v); /* record, array, map: JSON text */
    }
}

int rt_avro_decode_row(RtAvroDecoder *d, const char *p, size_t n, Chunk *c, int row, char *errbuf, size_t errlen)
{
    Writer *w = d->inline_w;
    if (!p)
        return snprintf(errbuf, errlen, "empty record"), -1;
    if (d->framed) {
        if (n < 5)
            return snprintf(errbuf, errlen, "Avro record of %zu bytes is shorter than its 5-byte header", n), -1;
        if (p[0] != 0)
            return snprintf(errbuf, errlen, "wrong magic byte %d (Confluent's wire format starts with 0)",
                            (unsigned char)p[0]),
                   -1;
        int32_t id = (int32_t)be32(p + 1);
        w = find_writer(d, id);
        if (!w)
            return snprintf(errbuf, errlen, "unknown schema id %" PRId32 " (not in the schema registry)", id), -1;
        p += 5;
        n -= 5;
    }
    if (w->error)
        return snprintf(errbuf, errlen, "schema id %" PRId32 ": %s", w->id, w->error), -1;
    const unsigned char *q = (const unsigned char *)p, *qend = q + n;
    const char *why = NULL;
    if (skim(w->schema, &q, qend, 0, &why))
        return (!strcmp(why, "truncated")
                    ? snprintf(errbuf, errlen, "truncated Avro record (schema id %" PRId32 ")", w->id)
                    : snprintf(errbuf, errlen, "malformed Avro record (schema id %" PRId32 "): %s", w->id, why)),
               -1;
    if (q != qend)
        return snprintf(errbuf, errlen, "Avro record (schema id %" PRId32 ") has bytes after its end", w->id), -1;
    avro_reader_memory_set_source(d->reader, p, (int64_t)n);
    avro_value_reset(&w->value);
    if (avro_value_read(d->reader, &w->value))
        return snprintf(errbuf, errlen, "malformed Avro record (schema id %" PRId32 "): %s", w->id, avro_strerror()),
               -1;
    for (int i = 0; i < d->n_cols; i++) {
        const FieldMap *f = &w->fields[i];
        if (!d->names[i] || f->index < 0) { /* computed, or the reader's default */
            Value nv = value_null(c->cols[i].type);
            chunk_set(c, i, row, &nv);
            continue;
        }
        avro_value_t fv;
        if (avro_value_get_by_index(&w->value, (size_t)f->index, &fv, NULL))
            return snprintf(errbuf, errlen, "field \"%s\": %s", d->names[i], avro_strerror()), -1;
        Out o = {c, i, row, d->names[i], errbuf, errlen};
        if (put_value(&o, &fv, f))
            return -1;
    }
    return 0;
}

/* ---- columns from the registry ----------------------------------------------------------- */

/* The SQL type of a field's JSON type node, or NULL if it has none. */
static const char *sql_type_of(json_t *t, char *tmp, size_t tmplen)
{
    bool is_union;
    json_t *nn = non_null(t, &is_union);
    if (!nn)
        return NULL;
    if (is_union && json_array_size(t) > 2)
        return "jsonb"; /* a union of several types: its JSON encoding */
    int scale;
    Logical lt = logical_of(nn, &scale);
    const char *name = json_is_string(nn) ? json_string_value(nn) : json_string_value(json_object_get(nn, "type"));
    if (!name)
        return NULL;
    switch (lt) {
    case LT_DATE: return "date";
    case LT_TS_MILLIS:
    case LT_TS_MICROS: {
        const char *l = json_string_value(json_object_get(nn, "logicalType"));
        return l && !strncmp(l, "local-", 6) ? "timestamp" : "timestamptz";
    }
    case LT_UUID: return "text";
    case LT_DECIMAL: {
        json_t *pr = json_object_get(nn, "precision");
        snprintf(tmp, tmplen, "numeric(%d,%d)", json_is_integer(pr) ? (int)json_integer_value(pr) : 38, scale);
        return tmp;
    }
    default: break;
    }
    static const struct { const char *avro, *sql; } map[] = {
        {"boolean", "boolean"}, {"int", "integer"}, {"long", "bigint"}, {"float", "real"},
        {"double", "double precision"}, {"string", "text"}, {"bytes", "bytea"}, {"fixed", "bytea"},
        {"enum", "text"}, {"record", "jsonb"}, {"array", "jsonb"}, {"map", "jsonb"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(name, map[i].avro))
            return map[i].sql;
    return NULL; /* a named type defined elsewhere in the schema */
}

int rt_avro_registry_columns(const CatRelation *r, const char *subject, Buf *out, WError *err)
{
    RtRegistry reg = {opt(r, "schema.registry"), opt(r, "schema.registry.username"),
                      opt(r, "schema.registry.password")};
    if (!reg.url)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "a source without a column list takes its columns from schema.registry");
    Buf path = BUF_INIT, body = BUF_INIT;
    buf_puts(&path, "/subjects/");
    for (const unsigned char *q = (const unsigned char *)subject; *q; q++) {
        if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || strchr("-._~", *q))
            buf_putc(&path, (char)*q);
        else
            buf_printf(&path, "%%%02X", *q);
    }
    buf_puts(&path, "/versions/latest");
    char eb[300];
    long status = 0;
    int rc = rt_registry_get(&reg, path.data, &body, &status, eb, sizeof eb);
    json_t *root = NULL;
    if (rc) {
        werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "%s", eb);
        goto out;
    }
    if (status == 404) {
        rc = werr(err, SQLSTATE_UNDEFINED_OBJECT, 0, "subject \"%s\" is not in the schema registry %s", subject,
                  reg.url);
        werr_hint(err, "Register the topic's value schema under <topic>-value, or declare the columns.");
        goto out;
    }
    json_error_t jerr;
    root = status == 200 ? json_loadb(body.data, body.len, 0, &jerr) : NULL;
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!schema) {
        rc = werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "schema registry %s answered HTTP %ld without a schema for %s",
                  reg.url, status, subject);
        goto out;
    }
    json_t *s = json_loads(schema, 0, &jerr);
    json_t *fields = json_object_get(s, "fields");
    if (!json_is_array(fields) || !json_array_size(fields)) {
        rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "the latest schema of \"%s\" is not a record with fields",
                  subject);
        json_decref(s);
        goto out;
    }
    buf_putc(out, '(');
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f) {
        const char *name = json_string_value(json_object_get(f, "name"));
        char tmp[40];
        const char *ty = name ? sql_type_of(json_object_get(f, "type"), tmp, sizeof tmp) : NULL;
        if (!ty)
            ty = "jsonb"; /* a reference to a named type (a record or enum declared earlier) */
        buf_printf(out, "%s\"%s\" %s", i ? ", " : "", name ? name : "?", ty);
    }
    buf_putc(out, ')');
    json_decref(s);
out:
    if (root)
        json_decref(root);
    buf_free(&path);
    buf_free(&body);
    return rc;
}
