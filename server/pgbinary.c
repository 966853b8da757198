/*
 * pgbinary.c: binary send/recv formats of the common types (see pgbinary.h).
 *
 * Both directions go through the text form the engine speaks, using the
 * same parsers and formatters as the engine (common/types.h), so a value
 * reads back identically whichever format the client picks.
 */
#include "pgbinary.h"

#include "pgwire.h"
#include "types.h"
#include "numeric.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Postgres counts dates and timestamps from 2000-01-01; weir from 1970-01-01. */
#define PG_EPOCH_DAYS  INT64_C(10957)
#define PG_EPOCH_USECS (PG_EPOCH_DAYS * USECS_PER_DAY)

enum {
    OID_CHAR = 18,      /* "char": one byte */
    OID_NAME = 19,
    OID_OID = 26,
    OID_JSON = 114,
    OID_BPCHAR = 1042,
    JSONB_VERSION = 1,  /* the first byte of jsonb's binary form */
};

static bool text_like(uint32_t oid)
{
    return oid == SRV_OID_TEXT || oid == SRV_OID_VARCHAR || oid == SRV_OID_UNKNOWN || oid == OID_NAME ||
           oid == OID_BPCHAR || oid == OID_JSON;
}

bool pgbin_result_supported(uint32_t oid)
{
    switch (oid) {
    case SRV_OID_BOOL: case SRV_OID_BYTEA: case SRV_OID_INT8: case SRV_OID_INT2: case SRV_OID_INT4:
    case SRV_OID_FLOAT4: case SRV_OID_FLOAT8: case SRV_OID_DATE: case SRV_OID_TIMESTAMP:
    case SRV_OID_TIMESTAMPTZ: case SRV_OID_INTERVAL: case SRV_OID_JSONB: case OID_CHAR: case OID_OID:
    case SRV_OID_NUMERIC:
        return true;
    default:
        return text_like(oid);
    }
}

static int bad_text(uint32_t oid, const char *text, size_t len, WError *err)
{
    return werr(err, "22P03", 0, "cannot encode \"%.*s\" as binary type %u", (int)(len > 60 ? 60 : len), text,
                oid);
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Integers and floats: the text is short; copy it so strto* stops at len. */
static int number_of(const char *text, size_t len, char *tmp, size_t n)
{
    if (len == 0 || len >= n)
        return -1;
    memcpy(tmp, text, len);
    tmp[len] = 0;
    return 0;
}

int pgbin_encode(uint32_t oid, const char *text, size_t len, Buf *out, WError *err)
{
    char tmp[64];
    char *end;
    if (text_like(oid)) {
        buf_append(out, text, len);
        return 0;
    }
    switch (oid) {
    case SRV_OID_BOOL:
        if (len == 0)
            return bad_text(oid, text, len, err);
        buf_put_u8(out, text[0] == 't' || text[0] == 'T');
        return 0;
    case OID_CHAR:
        buf_append(out, text, len > 0 ? 1 : 0);
        return 0;
    case SRV_OID_JSONB:
        buf_put_u8(out, JSONB_VERSION);
        buf_append(out, text, len);
        return 0;
    case SRV_OID_NUMERIC: {
        Numeric n;
        WError tmp_err = {0};
        if (num_parse(text, len, &n, &tmp_err))
            return bad_text(oid, text, len, err);
        num_to_pgbinary(n, out);
        return 0;
    }
    case SRV_OID_INT2: case SRV_OID_INT4: case SRV_OID_INT8: case OID_OID: {
        if (number_of(text, len, tmp, sizeof tmp))
            return bad_text(oid, text, len, err);
        errno = 0;
        long long v = strtoll(tmp, &end, 10);
        if (*end || errno)
            return bad_text(oid, text, len, err);
        if (oid == SRV_OID_INT2) {
            buf_put_u8(out, (uint8_t)((uint64_t)v >> 8));
            buf_put_u8(out, (uint8_t)v);
        } else if (oid == SRV_OID_INT8) {
            buf_put_u64be(out, (uint64_t)v);
        } else {
            buf_put_u32be(out, (uint32_t)v);
        }
        return 0;
    }
    case SRV_OID_FLOAT4: case SRV_OID_FLOAT8: {
        if (number_of(text, len, tmp, sizeof tmp))
            return bad_text(oid, text, len, err);
        double d = strtod(tmp, &end);
        if (*end)
            return bad_text(oid, text, len, err);
        if (oid == SRV_OID_FLOAT4) {
            float f = (float)d;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            buf_put_u32be(out, bits);
        } else {
            uint64_t bits;
            memcpy(&bits, &d, 8);
            buf_put_u64be(out, bits);
        }
        return 0;
    }
    case SRV_OID_BYTEA: {
        if (len < 2 || text[0] != '\\' || (text[1] != 'x' && text[1] != 'X') || len % 2)
            return bad_text(oid, text, len, err);
        buf_reserve(out, (len - 2) / 2);
        for (size_t i = 2; i < len; i += 2) {
            int hi = hexval(text[i]), lo = hexval(text[i + 1]);
            if (hi < 0 || lo < 0)
                return bad_text(oid, text, len, err);
            buf_put_u8(out, (uint8_t)(hi << 4 | lo));
        }
        return 0;
    }
    case SRV_OID_DATE: {
        int64_t days;
        if (len == 8 && strncasecmp(text, "infinity", 8) == 0)
            days = INT32_MAX;
        else if (len == 9 && strncasecmp(text, "-infinity", 9) == 0)
            days = INT32_MIN;
        else if (parse_date(text, len, &days) == 0 && days - PG_EPOCH_DAYS > INT32_MIN &&
                 days - PG_EPOCH_DAYS < INT32_MAX)
            days -= PG_EPOCH_DAYS;
        else
            return bad_text(oid, text, len, err);
        buf_put_u32be(out, (uint32_t)(int32_t)days);
        return 0;
    }
    case SRV_OID_TIMESTAMP: case SRV_OID_TIMESTAMPTZ: {
        int64_t us;
        if (len == 8 && strncasecmp(text, "infinity", 8) == 0)
            us = INT64_MAX;
        else if (len == 9 && strncasecmp(text, "-infinity", 9) == 0)
            us = INT64_MIN;
        else if (parse_timestamp(text, len, &us) == 0 && us > INT64_MIN + PG_EPOCH_USECS && us != INT64_MAX)
            us -= PG_EPOCH_USECS;
        else
            return bad_text(oid, text, len, err);
        buf_put_u64be(out, (uint64_t)us);
        return 0;
    }
    case SRV_OID_INTERVAL: {
        Interval iv;
        if (parse_interval(text, len, &iv))
            return bad_text(oid, text, len, err);
        buf_put_u64be(out, (uint64_t)iv.usecs);
        buf_put_u32be(out, (uint32_t)iv.days);
        buf_put_u32be(out, (uint32_t)iv.months);
        return 0;
    }
    default:
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: binary format for type %u", oid);
    }
}

static uint64_t be_u(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Shortest text that reads back as the same double (Postgres 12+ style). */
static void fmt_float8(char *out, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(out, n, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, n, v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, n, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

static void fmt_float4(char *out, size_t n, float v)
{
    if (isnan(v) || isinf(v)) {
        fmt_float8(out, n, v);
        return;
    }
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(out, n, "%.*g", prec, (double)v);
        if (strtof(out, NULL) == v)
            return;
    }
}

static char *copy_text(int idx, const unsigned char *v, size_t len, WError *err)
{
    size_t bad = utf8_invalid_at((const char *)v, len);
    if (bad < len) {
        werr(err, "22021", 0, "invalid byte sequence for encoding \"UTF8\": 0x%02x (parameter $%d)", v[bad], idx + 1);
        return NULL;
    }
    char *s = malloc(len + 1);
    if (!s) {
        werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "out of memory");
        return NULL;
    }
    memcpy(s, v, len);
    s[len] = 0;
    return s;
}

char *pgbin_param_to_text(int idx, uint32_t oid, const unsigned char *v, size_t len, WError *err)
{
    if (text_like(oid))
        return copy_text(idx, v, len, err);
    if (oid == SRV_OID_JSONB) {
        if (len < 1 || v[0] != JSONB_VERSION) {
            werr(err, "22P03", 0, "unsupported jsonb version number in bind parameter %d", idx + 1);
            return NULL;
        }
        return copy_text(idx, v + 1, len - 1, err);
    }
    if (oid == SRV_OID_BYTEA) {
        if (len > (SIZE_MAX - 3) / 2) {
            werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "parameter $%d is too large", idx + 1);
            return NULL;
        }
        static const char hex[] = "0123456789abcdef";
        char *s = malloc(2 * len + 3), *o = s;
        if (!s) {
            werr(err, SQLSTATE_OUT_OF_MEMORY, 0, "out of memory");
            return NULL;
        }
        *o++ = '\\';
        *o++ = 'x';
        for (size_t i = 0; i < len; i++) {
            *o++ = hex[v[i] >> 4];
            *o++ = hex[v[i] & 15];
        }
        *o = 0;
        return s;
    }
    if (oid == SRV_OID_NUMERIC) {
        Numeric n;
        if (num_from_pgbinary(v, len, &n, err)) {
            if (strcmp(err->sqlstate, SQLSTATE_INVALID_TEXT) == 0)
                snprintf(err->sqlstate, sizeof err->sqlstate, "22P03");  /* invalid_binary_representation */
            return NULL;
        }
        Buf nb = BUF_INIT;
        num_format(n, &nb);
        return nb.data;   /* malloc'd and NUL-terminated by Buf */
    }
    size_t want;
    switch (oid) {
    case SRV_OID_BOOL: case OID_CHAR: want = 1; break;
    case SRV_OID_INT2: want = 2; break;
    case SRV_OID_INT4: case SRV_OID_FLOAT4: case SRV_OID_DATE: case OID_OID: want = 4; break;
    case SRV_OID_INT8: case SRV_OID_FLOAT8: case SRV_OID_TIMESTAMP: case SRV_OID_TIMESTAMPTZ: want = 8; break;
    case SRV_OID_INTERVAL: want = 16; break;
    default:
        werr(err, SQLSTATE_NOT_SUPPORTED, 0,
             "feature not supported: binary format for parameter $%d of type %u", idx + 1, oid);
        return NULL;
    }
    if (len != want) {
        werr(err, "22P03", 0, "incorrect binary data format in bind parameter %d", idx + 1);
        return NULL;
    }
    char tmp[64];
    Buf b = {0};
    uint64_t u = be_u(v, (int)(want > 8 ? 8 : want));
    switch (oid) {
    case SRV_OID_BOOL: snprintf(tmp, sizeof tmp, "%s", u ? "t" : "f"); break;
    case OID_CHAR: snprintf(tmp, sizeof tmp, "%c", u ? (char)u : ' '); break;
    case SRV_OID_INT2: snprintf(tmp, sizeof tmp, "%d", (int)(int16_t)u); break;
    case SRV_OID_INT4: snprintf(tmp, sizeof tmp, "%d", (int)(int32_t)u); break;
    case OID_OID: snprintf(tmp, sizeof tmp, "%u", (unsigned)u); break;
    case SRV_OID_INT8: snprintf(tmp, sizeof tmp, "%lld", (long long)(int64_t)u); break;
    case SRV_OID_FLOAT4: {
        uint32_t bits = (uint32_t)u;
        float f;
        memcpy(&f, &bits, 4);
        fmt_float4(tmp, sizeof tmp, f);
        break;
    }
    case SRV_OID_FLOAT8: {
        double d;
        memcpy(&d, &u, 8);
        fmt_float8(tmp, sizeof tmp, d);
        break;
    }
    case SRV_OID_DATE: {
        int32_t d = (int32_t)u;
        if (d == INT32_MAX || d == INT32_MIN)
            snprintf(tmp, sizeof tmp, "%s", d > 0 ? "infinity" : "-infinity");
        else
            format_date(d + PG_EPOCH_DAYS, &b);
        break;
    }
    case SRV_OID_TIMESTAMP: case SRV_OID_TIMESTAMPTZ: {
        int64_t us = (int64_t)u;
        if (us == INT64_MAX || us == INT64_MIN) {
            snprintf(tmp, sizeof tmp, "%s", us > 0 ? "infinity" : "-infinity");
        } else if (us > INT64_MAX - 1 - PG_EPOCH_USECS) {
            werr(err, "22008", 0, "timestamp out of range in bind parameter %d", idx + 1);
            return NULL;
        } else {
            format_timestamp(us + PG_EPOCH_USECS, oid == SRV_OID_TIMESTAMPTZ, &b);
        }
        break;
    }
    default: {
        Interval iv = {.usecs = (int64_t)u, .days = (int32_t)be_u(v + 8, 4), .months = (int32_t)be_u(v + 12, 4)};
        format_interval(&iv, &b);
        break;
    }
    }
    if (b.len)
        return b.data;     /* a Buf's data is a NUL-terminated malloc'd string */
    return strdup(tmp);
}
