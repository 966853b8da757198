/* types.c: type metadata, value text I/O, comparison and hashing. See types.h. */
#include "types.h"
#include "pg_oids.h"
#include "tz.h"
#include "numeric.h"
#include "utf8.h"
#include "hash_seeds.h"
#include "pg_oids.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct TypeInfo {
    const char *name;
    uint32_t oid;
    int16_t len;
} TypeInfo;

static const TypeInfo TYPES[TYPE__COUNT] = {
    [TYPE_NULL] = {"unknown", PG_OID_UNKNOWN, -2},
    [TYPE_BOOL] = {"boolean", PG_OID_BOOL, 1},
    [TYPE_INT2] = {"smallint", PG_OID_INT2, 2},
    [TYPE_INT4] = {"integer", PG_OID_INT4, 4},
    [TYPE_INT8] = {"bigint", PG_OID_INT8, 8},
    [TYPE_FLOAT4] = {"real", PG_OID_FLOAT4, 4},
    [TYPE_FLOAT8] = {"double precision", PG_OID_FLOAT8, 8},
    [TYPE_NUMERIC] = {"numeric", PG_OID_NUMERIC, -1},
    [TYPE_TEXT] = {"character varying", PG_OID_VARCHAR, -1},
    [TYPE_BYTEA] = {"bytea", PG_OID_BYTEA, -1},
    [TYPE_DATE] = {"date", PG_OID_DATE, 4},
    [TYPE_TIMESTAMP] = {"timestamp without time zone", PG_OID_TIMESTAMP, 8},
    [TYPE_TIMESTAMPTZ] = {"timestamp with time zone", PG_OID_TIMESTAMPTZ, 8},
    [TYPE_INTERVAL] = {"interval", PG_OID_INTERVAL, 16},
    [TYPE_JSONB] = {"jsonb", PG_OID_JSONB, -1},
};

const char *type_name(TypeId t) { return TYPES[t].name; }
uint32_t type_oid(TypeId t) { return TYPES[t].oid; }
int16_t type_wire_len(TypeId t) { return TYPES[t].len; }
bool type_is_integer(TypeId t) { return t == TYPE_INT2 || t == TYPE_INT4 || t == TYPE_INT8; }
bool type_is_numeric(TypeId t)
{
    return type_is_integer(t) || t == TYPE_FLOAT4 || t == TYPE_FLOAT8 || t == TYPE_NUMERIC;
}
int type_numeric_mod(const char *name, int *prec, int *scale, WError *err)
{
    if (strncasecmp(name, "numeric(", 8) != 0)
        return 0;
    long p = strtol(name + 8, (char **)&name, 10), s = 0;
    if (*name == ',')
        s = strtol(name + 1, (char **)&name, 10);
    if (p < 1 || p > 1000)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "NUMERIC precision %ld must be between 1 and 1000", p);
    if (p > 38)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                    "feature not supported: NUMERIC precision %ld (weir's numeric holds at most 38 digits)", p);
    if (s < 0 || s > p)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "NUMERIC scale %ld must be between 0 and precision %ld", s, p);
    *prec = (int)p;
    *scale = (int)s;
    return 1;
}

bool type_is_temporal(TypeId t) { return t == TYPE_DATE || t == TYPE_TIMESTAMP || t == TYPE_TIMESTAMPTZ; }

static const struct {
    const char *name;
    TypeId t;
} TYPE_NAMES[] = {
    {"boolean", TYPE_BOOL}, {"bool", TYPE_BOOL},
    {"smallint", TYPE_INT2}, {"int2", TYPE_INT2},
    {"int", TYPE_INT4}, {"integer", TYPE_INT4}, {"int4", TYPE_INT4},
    {"bigint", TYPE_INT8}, {"int8", TYPE_INT8},
    {"real", TYPE_FLOAT4}, {"float4", TYPE_FLOAT4},
    {"double", TYPE_FLOAT8}, {"double precision", TYPE_FLOAT8}, {"float8", TYPE_FLOAT8},
    {"float", TYPE_FLOAT8},
    {"numeric", TYPE_NUMERIC}, {"decimal", TYPE_NUMERIC},
    {"varchar", TYPE_TEXT}, {"text", TYPE_TEXT}, {"string", TYPE_TEXT},
    {"character varying", TYPE_TEXT}, {"char", TYPE_TEXT}, {"character", TYPE_TEXT},
    {"bytea", TYPE_BYTEA}, {"bytes", TYPE_BYTEA},
    {"date", TYPE_DATE},
    {"timestamp", TYPE_TIMESTAMP}, {"timestamp without time zone", TYPE_TIMESTAMP},
    {"timestamptz", TYPE_TIMESTAMPTZ}, {"timestamp with time zone", TYPE_TIMESTAMPTZ},
    {"interval", TYPE_INTERVAL},
    {"jsonb", TYPE_JSONB}, {"json", TYPE_JSONB},
};

TypeId type_from_name(const char *name)
{
    if (strncasecmp(name, "numeric(", 8) == 0)
        return TYPE_NUMERIC;
    for (size_t i = 0; i < sizeof TYPE_NAMES / sizeof TYPE_NAMES[0]; i++)
        if (strcasecmp(name, TYPE_NAMES[i].name) == 0)
            return TYPE_NAMES[i].t;
    return TYPE_NULL;
}

/* ---- dates and times ---------------------------------------------------- */

/* Howard Hinnant's days-from-civil algorithm: exact for the whole range. */
int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

static int days_in_month(int64_t y, unsigned m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dm[m - 1];
}

/* Reads exactly n digits at s[*i]. */
static int read_digits(const char *s, size_t len, size_t *i, int n, int64_t *out)
{
    int64_t v = 0;
    for (int k = 0; k < n; k++) {
        if (*i >= len || !isdigit((unsigned char)s[*i]))
            return -1;
        v = v * 10 + (s[(*i)++] - '0');
    }
    *out = v;
    return 0;
}

static void skip_ws(const char *s, size_t len, size_t *i)
{
    while (*i < len && isspace((unsigned char)s[*i]))
        (*i)++;
}

static int parse_date_at(const char *s, size_t len, size_t *i, int64_t *days)
{
    int64_t y, m, d;
    size_t start = *i;
    while (*i < len && isdigit((unsigned char)s[*i]))
        (*i)++;
    size_t ny = *i - start;
    if (ny < 4 || ny > 6)
        return -1;
    *i = start;
    if (read_digits(s, len, i, (int)ny, &y) || *i >= len || s[(*i)++] != '-' ||
        read_digits(s, len, i, 2, &m) || *i >= len || s[(*i)++] != '-' ||
        read_digits(s, len, i, 2, &d))
        return -1;
    if (y == 0 || m < 1 || m > 12 || d < 1 || d > days_in_month(y, (unsigned)m))
        return -3;   /* well formed, but no such date: 22008 as in Postgres (there is no year 0) */
    *days = days_from_civil(y, (unsigned)m, (unsigned)d);
    return 0;
}

int parse_date(const char *s, size_t len, int64_t *days)
{
    size_t i = 0;
    skip_ws(s, len, &i);
    int r = parse_date_at(s, len, &i, days);
    skip_ws(s, len, &i);
    if (i != len)
        return -1;
    return r;
}

/*
 * The parts of a timestamp's text: *local (the date and time as written),
 * then *zone: 0 none, 1 an offset or Z/UTC (*off, microseconds east), 2 a
 * zone name in s[*zs, *ze) (letters first, then letters, digits, '/', '_',
 * '+', '-'). Returns 0 or -1.
 */
static int parse_ts_parts(const char *s, size_t len, int64_t *local, int *zone, int64_t *off, size_t *zs,
                          size_t *ze)
{
    size_t i = 0;
    int64_t days, hh = 0, mi = 0, ss = 0, frac = 0;
    skip_ws(s, len, &i);
    int range = parse_date_at(s, len, &i, &days);
    if (range == -1)
        return -1;
    if (i < len && (s[i] == ' ' || s[i] == 'T' || s[i] == 't')) {
        size_t j = i + 1;
        skip_ws(s, len, &j);
        if (j < len && isdigit((unsigned char)s[j])) {
            i = j;
            if (read_digits(s, len, &i, 2, &hh) || i >= len || s[i++] != ':' ||
                read_digits(s, len, &i, 2, &mi))
                return -1;
            if (i < len && s[i] == ':') {
                i++;
                if (read_digits(s, len, &i, 2, &ss))
                    return -1;
                if (i < len && s[i] == '.') {
                    i++;
                    int nd = 0;
                    while (i < len && isdigit((unsigned char)s[i])) {
                        if (nd < 6)
                            frac = frac * 10 + (s[i] - '0');
                        nd++;
                        i++;
                    }
                    if (nd == 0)
                        return -1;
                    for (; nd < 6; nd++)
                        frac *= 10;
                }
            }
        }
    }
    if (hh > 24 || mi > 59 || ss > 60 || (hh == 24 && (mi || ss || frac)))
        range = -3;
    *zone = 0;
    *off = 0;
    skip_ws(s, len, &i);
    if (i < len && (s[i] == 'Z' || s[i] == 'z') && (i + 1 == len || isspace((unsigned char)s[i + 1]))) {
        i++;
        *zone = 1;
    } else if (i < len && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i++] == '-' ? -1 : 1;
        int64_t oh = 0, om = 0, os = 0;
        if (read_digits(s, len, &i, 2, &oh))
            return -1;
        if (i < len && s[i] == ':')
            i++;
        if (i < len && isdigit((unsigned char)s[i]) && read_digits(s, len, &i, 2, &om))
            return -1;
        if (i < len && s[i] == ':' && (i++, read_digits(s, len, &i, 2, &os)))
            return -1;
        if (oh > 15 || om > 59 || os > 59)
            return -1;
        *off = sign * (oh * 3600 + om * 60 + os) * USECS_PER_SEC;
        *zone = 1;
    } else if (i + 3 <= len && strncasecmp(s + i, "UTC", 3) == 0 &&
               (i + 3 == len || isspace((unsigned char)s[i + 3]))) {
        i += 3;
        *zone = 1;
    } else if (i < len && isalpha((unsigned char)s[i])) {
        *zs = i;
        while (i < len && (isalnum((unsigned char)s[i]) || strchr("/_+-", s[i])))
            i++;
        *ze = i;
        *zone = 2;
    }
    skip_ws(s, len, &i);
    if (i != len)
        return -1;
    if (range)
        return range;   /* well formed: a field out of range */
    /* A date can be later than a timestamp can hold ('405226-01-01' is a
     * date, not a timestamp): out of range, never an overflow (found by
     * fuzz_json through a source's record). */
    int64_t at;
    if (__builtin_mul_overflow(days, USECS_PER_DAY, &at) ||
        __builtin_add_overflow(at, ((hh * 60 + mi) * 60 + ss) * USECS_PER_SEC + frac, &at))
        return -3;
    *local = at;
    return 0;
}

int parse_timestamp(const char *s, size_t len, int64_t *usecs)
{
    int64_t local, off;
    int zone;
    size_t zs, ze;
    int r = parse_ts_parts(s, len, &local, &zone, &off, &zs, &ze);
    if (r || zone == 2)
        return r ? r : -1;
    return __builtin_sub_overflow(local, off, usecs) ? -3 : 0;
}

/* Text to a timestamptz: an offset or zone name in the text wins, else the
 * local time is in the thread's zone. -1: malformed, -2: unknown zone (err set). */
static int parse_timestamptz(const char *s, size_t len, int64_t *usecs, WError *err)
{
    int64_t local, off;
    int zone;
    size_t zs = 0, ze = 0;
    int r = parse_ts_parts(s, len, &local, &zone, &off, &zs, &ze);
    if (r)
        return r;
    if (zone == 1)
        return __builtin_sub_overflow(local, off, usecs) ? -3 : 0;
    /* A zone moves the time by less than a day either way. */
    if (local > INT64_MAX - 2 * USECS_PER_DAY || local < INT64_MIN + 2 * USECS_PER_DAY)
        return -3;
    const WTz *z = tz_current();
    if (zone == 2) {
        char name[101];
        if (ze - zs >= sizeof name)
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "time zone \"%.100s\" not recognized", s + zs), -2;
        memcpy(name, s + zs, ze - zs);
        name[ze - zs] = 0;
        if (tz_find(name, &z, err))
            return -2;
    }
    *usecs = tz_local_to_utc(z, local);
    return 0;
}

void format_date(int64_t days, Buf *out)
{
    if (days == DATE_MINUS_INF || days == DATE_PLUS_INF) {
        buf_puts(out, days == DATE_PLUS_INF ? "infinity" : "-infinity");
        return;
    }
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    if (y <= 0)
        buf_printf(out, "%04" PRId64 "-%02u-%02u BC", 1 - y, m, d);
    else
        buf_printf(out, "%04" PRId64 "-%02u-%02u", y, m, d);
}

/* The date and time of day of usecs as Postgres prints them (ISO), without
 * the era: returns whether it is BC, which goes last, after the offset
 * ("0001-12-31 21:00:00+00 BC"). */
static bool format_ts_body(int64_t usecs, Buf *out)
{
    int64_t days = usecs / USECS_PER_DAY, rem = usecs % USECS_PER_DAY;
    if (rem < 0) {
        rem += USECS_PER_DAY;
        days--;
    }
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    buf_printf(out, "%04" PRId64 "-%02u-%02u", y <= 0 ? 1 - y : y, m, d);
    int64_t secs = rem / USECS_PER_SEC, frac = rem % USECS_PER_SEC;
    buf_printf(out, " %02d:%02d:%02d", (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
    if (frac) {
        char f[8];
        snprintf(f, sizeof f, "%06d", (int)frac);
        int n = 6;
        while (n > 0 && f[n - 1] == '0')
            n--;
        f[n] = 0;
        buf_printf(out, ".%s", f);
    }
    return y <= 0;
}

void format_timestamp(int64_t usecs, bool tz, Buf *out)
{
    if (usecs == TS_MINUS_INF) {
        buf_puts(out, "-infinity");
        return;
    }
    if (usecs == TS_PLUS_INF) {
        buf_puts(out, "infinity");
        return;
    }
    bool bc = format_ts_body(usecs, out);
    if (tz)
        buf_puts(out, "+00");
    if (bc)
        buf_puts(out, " BC");
}

/* As Postgres prints a timestamptz (DateStyle ISO): the wall clock of the
 * thread's zone and its offset, "+02", "+05:30", "+00:19:32", then the era. */
static void format_timestamptz(int64_t usecs, Buf *out)
{
    if (usecs == TS_MINUS_INF || usecs == TS_PLUS_INF) {
        format_timestamp(usecs, false, out);
        return;
    }
    int32_t off = tz_offset(tz_current(), usecs);
    bool bc = format_ts_body(usecs + (int64_t)off * USECS_PER_SEC, out);
    int a = off < 0 ? -off : off;
    buf_printf(out, "%c%02d", off < 0 ? '-' : '+', a / 3600);
    if (a % 3600)
        buf_printf(out, ":%02d", a / 60 % 60);
    if (a % 60)
        buf_printf(out, ":%02d", a % 60);
    if (bc)
        buf_puts(out, " BC");
}

static const struct {
    const char *name;
    int kind; /* 0 usecs, 1 days, 2 months */
    int64_t mult;
} IV_UNITS[] = {
    {"microsecond", 0, 1}, {"microseconds", 0, 1}, {"us", 0, 1}, {"usec", 0, 1}, {"usecs", 0, 1},
    {"millisecond", 0, 1000}, {"milliseconds", 0, 1000}, {"ms", 0, 1000}, {"msec", 0, 1000}, {"msecs", 0, 1000},
    {"second", 0, USECS_PER_SEC}, {"seconds", 0, USECS_PER_SEC}, {"s", 0, USECS_PER_SEC},
    {"sec", 0, USECS_PER_SEC}, {"secs", 0, USECS_PER_SEC},
    {"minute", 0, 60 * USECS_PER_SEC}, {"minutes", 0, 60 * USECS_PER_SEC}, {"m", 0, 60 * USECS_PER_SEC},
    {"min", 0, 60 * USECS_PER_SEC}, {"mins", 0, 60 * USECS_PER_SEC},
    {"hour", 0, 3600 * USECS_PER_SEC}, {"hours", 0, 3600 * USECS_PER_SEC}, {"h", 0, 3600 * USECS_PER_SEC},
    {"hr", 0, 3600 * USECS_PER_SEC}, {"hrs", 0, 3600 * USECS_PER_SEC},
    {"day", 1, 1}, {"days", 1, 1}, {"d", 1, 1},
    {"week", 1, 7}, {"weeks", 1, 7}, {"w", 1, 7},
    {"month", 2, 1}, {"months", 2, 1}, {"mon", 2, 1}, {"mons", 2, 1},
    {"year", 2, 12}, {"years", 2, 12}, {"y", 2, 12}, {"yr", 2, 12}, {"yrs", 2, 12},
};

/* Adds n units named u to iv. */
static int interval_add_unit(Interval *iv, double n, const char *u, size_t ulen)
{
    for (size_t k = 0; k < sizeof IV_UNITS / sizeof IV_UNITS[0]; k++) {
        if (strlen(IV_UNITS[k].name) == ulen && strncasecmp(IV_UNITS[k].name, u, ulen) == 0) {
            double v = n * (double)IV_UNITS[k].mult;
            if (!(fabs(v) <= 9.2e18))
                return -1;
            /* Every sum checked: a field past its range is an error, never
             * a wrapped value (out-of-range float-to-int is undefined). */
            if (IV_UNITS[k].kind == 0)
                return __builtin_add_overflow(iv->usecs, (int64_t)llround(v), &iv->usecs) ? -1 : 0;
            double whole = trunc(v);
            if (!(fabs(whole) <= 2147483647.0))
                return -1;
            if (IV_UNITS[k].kind == 1) {
                /* Fractional days spill into the time part, as in Postgres. */
                if (__builtin_add_overflow(iv->days, (int32_t)whole, &iv->days) ||
                    __builtin_add_overflow(iv->usecs, (int64_t)llround((v - whole) * (double)USECS_PER_DAY), &iv->usecs))
                    return -1;
            } else if (__builtin_add_overflow(iv->months, (int32_t)whole, &iv->months) ||
                       __builtin_add_overflow(iv->days, (int32_t)llround((v - whole) * 30), &iv->days)) {
                return -1;
            }
            return 0;
        }
    }
    return -1;
}

static int parse_iso_interval(const char *s, size_t len, Interval *out)
{
    size_t i = 1;
    bool in_time = false;
    while (i < len) {
        if (s[i] == 'T' || s[i] == 't') {
            in_time = true;
            i++;
            continue;
        }
        char *end;
        errno = 0;
        double n = strtod(s + i, &end);
        if (end == s + i || errno || (size_t)(end - s) >= len)
            return -1;
        i = (size_t)(end - s);
        char u = (char)toupper((unsigned char)s[i++]);
        const char *name = NULL;
        switch (u) {
        case 'Y': name = "year"; break;
        case 'M': name = in_time ? "minute" : "month"; break;
        case 'W': name = "week"; break;
        case 'D': name = "day"; break;
        case 'H': name = "hour"; break;
        case 'S': name = "second"; break;
        default: return -1;
        }
        if (interval_add_unit(out, n, name, strlen(name)))
            return -1;
    }
    return 0;
}

int parse_interval(const char *s, size_t len, Interval *out)
{
    memset(out, 0, sizeof *out);
    size_t i = 0;
    skip_ws(s, len, &i);
    if (i < len && (s[i] == 'P' || s[i] == 'p'))
        return parse_iso_interval(s + i, len - i, out);
    bool any = false;
    while (i < len) {
        skip_ws(s, len, &i);
        if (i >= len)
            break;
        if (strncasecmp(s + i, "ago", 3) == 0 && i + 3 == len) {
            if (out->usecs == INT64_MIN || out->days == INT32_MIN || out->months == INT32_MIN)
                return -1;
            out->usecs = -out->usecs;
            out->days = -out->days;
            out->months = -out->months;
            i += 3;
            break;
        }
        size_t start = i;
        int sign = 1;
        if (s[i] == '+' || s[i] == '-')
            sign = s[i++] == '-' ? -1 : 1;
        /* hh:mm[:ss[.f]] time part */
        size_t j = i;
        while (j < len && isdigit((unsigned char)s[j]))
            j++;
        if (j < len && s[j] == ':' && j > i) {
            int64_t parts[3] = {0, 0, 0};
            int np = 0;
            double secs = 0;
            while (np < 3) {
                char *end;
                if (np == 2) {
                    secs = strtod(s + i, &end);
                } else {
                    parts[np] = strtoll(s + i, &end, 10);
                }
                if (end == s + i)
                    return -1;
                i = (size_t)(end - s);
                np++;
                if (i < len && s[i] == ':' && np < 3)
                    i++;
                else
                    break;
            }
            if (np < 2)
                return -1;
            /* Checked: "2700000000000:00" must be an error, not an
             * overflow (found by fuzz_json through a source's record). */
            double fus = secs * 1e6;
            int64_t us, h, m;
            if (!(fabs(fus) < 9.2e18) || __builtin_mul_overflow(parts[0], (int64_t)3600 * USECS_PER_SEC, &h) ||
                __builtin_mul_overflow(parts[1], (int64_t)60 * USECS_PER_SEC, &m) || __builtin_add_overflow(h, m, &us) ||
                __builtin_add_overflow(us, (int64_t)llround(fus), &us) ||
                __builtin_add_overflow(out->usecs, sign * us, &out->usecs))
                return -1;
            any = true;
            continue;
        }
        char *end;
        errno = 0;
        double n = strtod(s + start, &end);
        if (end == s + start || errno)
            return -1;
        i = (size_t)(end - s);
        skip_ws(s, len, &i);
        size_t us = i;
        while (i < len && isalpha((unsigned char)s[i]))
            i++;
        if (i == us) {
            /* A bare number means seconds, as in Postgres. */
            if (interval_add_unit(out, n, "second", 6))
                return -1;
        } else if (interval_add_unit(out, n, s + us, i - us)) {
            return -1;
        }
        any = true;
        skip_ws(s, len, &i);
        if (i < len && s[i] == ',')
            i++;
    }
    return any ? 0 : -1;
}

/* One field of an interval as Postgres's postgres IntervalStyle writes it
 * (AddPostgresIntPart): plural unless 1 ("-1 days"), and a positive field
 * after a negative one signed ("-2 mons +2 days"). */
static void iv_part(Buf *out, int64_t v, const char *unit, bool *any, bool *neg_before)
{
    if (!v)
        return;
    buf_printf(out, "%s%s%" PRId64 " %s%s", *any ? " " : "", *neg_before && v > 0 ? "+" : "", v, unit,
               v != 1 ? "s" : "");
    *neg_before = v < 0;
    *any = true;
}

void format_interval(const Interval *iv, Buf *out)
{
    bool any = false, neg_before = false;
    iv_part(out, iv->months / 12, "year", &any, &neg_before);
    iv_part(out, iv->months % 12, "mon", &any, &neg_before);
    iv_part(out, iv->days, "day", &any, &neg_before);
    if (iv->usecs || !any) {
        int64_t u = iv->usecs;
        bool neg = u < 0;
        uint64_t a = neg ? (uint64_t)(-(u + 1)) + 1 : (uint64_t)u;
        uint64_t secs = a / 1000000, frac = a % 1000000;
        buf_printf(out, "%s%s%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, any ? " " : "", neg ? "-" : neg_before ? "+" : "",
                   secs / 3600, secs / 60 % 60, secs % 60);
        if (frac) {
            char f[8];
            snprintf(f, sizeof f, "%06" PRIu64, frac);
            int n = 6;
            while (n > 0 && f[n - 1] == '0')
                n--;
            f[n] = 0;
            buf_printf(out, ".%s", f);
        }
    }
}

int interval_to_usecs(const Interval *iv, int64_t *out)
{
    if (iv->months)
        return -1;
    *out = iv->usecs + (int64_t)iv->days * USECS_PER_DAY;
    return 0;
}

/* ---- text I/O ------------------------------------------------------------ */

static void format_float(double f, bool is4, Buf *out)
{
    if (isnan(f)) {
        buf_puts(out, "NaN");
        return;
    }
    if (isinf(f)) {
        buf_puts(out, f > 0 ? "Infinity" : "-Infinity");
        return;
    }
    /* Shortest text that round-trips, as Postgres 12+ prints by default. */
    char tmp[64];
    for (int prec = is4 ? 6 : 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, f);
        if (is4 ? (float)strtod(tmp, NULL) == (float)f : strtod(tmp, NULL) == f)
            break;
    }
    buf_puts(out, tmp);
}

void value_to_text(const Value *v, Buf *out)
{
    if (v->null)
        return;
    switch (v->type) {
    case TYPE_BOOL: buf_putc(out, v->u.i ? 't' : 'f'); break;
    case TYPE_INT2:
    case TYPE_INT4:
    case TYPE_INT8: buf_printf(out, "%" PRId64, v->u.i); break;
    case TYPE_FLOAT4: format_float(v->u.f, true, out); break;
    case TYPE_FLOAT8: format_float(v->u.f, false, out); break;
    case TYPE_NUMERIC: num_format(num_get(v), out); break;
    case TYPE_TEXT:
    case TYPE_JSONB: buf_append(out, v->u.s.p, v->u.s.len); break;
    case TYPE_BYTEA:
        buf_puts(out, "\\x");
        for (uint32_t k = 0; k < v->u.s.len; k++)
            buf_printf(out, "%02x", (unsigned char)v->u.s.p[k]);
        break;
    case TYPE_DATE: format_date(v->u.i, out); break;
    case TYPE_TIMESTAMP: format_timestamp(v->u.i, false, out); break;
    case TYPE_TIMESTAMPTZ: format_timestamptz(v->u.i, out); break;
    case TYPE_INTERVAL: format_interval(&v->u.iv, out); break;
    case TYPE_NULL:
    case TYPE__COUNT: break;
    }
}

static int parse_int(const char *s, size_t len, int64_t lo, int64_t hi, TypeId t, int64_t *out, WError *err)
{
    char tmp[64];
    size_t a = 0, b = len;
    while (a < b && isspace((unsigned char)s[a]))
        a++;
    while (b > a && isspace((unsigned char)s[b - 1]))
        b--;
    if (b - a == 0 || b - a >= sizeof tmp)
        return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type %s: \"%.*s\"",
                    type_name(t), (int)(len > 200 ? 200 : len), s);
    memcpy(tmp, s + a, b - a);
    tmp[b - a] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (*end)
        return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type %s: \"%s\"", type_name(t), tmp);
    if (errno == ERANGE || v < lo || v > hi)
        return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "value \"%s\" is out of range for type %s", tmp, type_name(t));
    *out = v;
    return 0;
}

/* 1 or 0 for a word Postgres reads as a boolean, else -1. */
static int bool_word(const char *w, size_t n)
{
    static const struct {
        const char *word;
        size_t min;   /* the shortest prefix that is unambiguous */
        int v;
    } words[] = {{"true", 1, 1}, {"false", 1, 0}, {"yes", 1, 1}, {"no", 1, 0}, {"on", 2, 1}, {"off", 2, 0}};
    if (n == 1 && (w[0] == '1' || w[0] == '0'))
        return w[0] == '1';
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (n >= words[k].min && n <= strlen(words[k].word) && strncasecmp(w, words[k].word, n) == 0)
            return words[k].v;
    return -1;
}

int value_from_text(TypeId t, const char *s, size_t len, Arena *a, Value *out, WError *err)
{
    *out = value_null(t);
    out->null = false;
    switch (t) {
    case TYPE_BOOL: {
        /* Postgres's boolin: spaces around are ignored, and any unique
         * prefix of true, false, yes, no, on (two letters), off (two) does. */
        size_t b = 0, e = len;
        while (b < e && isspace((unsigned char)s[b]))
            b++;
        while (e > b && isspace((unsigned char)s[e - 1]))
            e--;
        int v = bool_word(s + b, e - b);
        if (v < 0)
            return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type boolean: \"%.*s\"",
                        (int)(len > 200 ? 200 : len), s);
        out->u.i = v;
        return 0;
    }
    case TYPE_INT2: return parse_int(s, len, INT16_MIN, INT16_MAX, t, &out->u.i, err);
    case TYPE_INT4: return parse_int(s, len, INT32_MIN, INT32_MAX, t, &out->u.i, err);
    case TYPE_INT8: return parse_int(s, len, INT64_MIN, INT64_MAX, t, &out->u.i, err);
    case TYPE_FLOAT4:
    case TYPE_FLOAT8: {
        char tmp[128];
        if (len >= sizeof tmp)
            return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type %s", type_name(t));
        memcpy(tmp, s, len);
        tmp[len] = 0;
        char *end;
        errno = 0;
        double f = strtod(tmp, &end);
        while (*end && isspace((unsigned char)*end))
            end++;
        if (end == tmp || *end)
            return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type %s: \"%s\"", type_name(t), tmp);
        /* Postgres's float4in/float8in: a value that overflows to infinity
         * or underflows to zero is out of range (a subnormal is kept). */
        bool range = errno == ERANGE && (f == 0 || isinf(f));
        if (t == TYPE_FLOAT4)
            range = range || (isfinite(f) && isinf((float)f)) || (f != 0 && (float)f == 0);
        if (range)
            return werr(err, SQLSTATE_NUMERIC_RANGE, 0, "\"%s\" is out of range for type %s", tmp, type_name(t));
        out->u.f = t == TYPE_FLOAT4 ? (double)(float)f : f;
        return 0;
    }
    case TYPE_JSONB: {
        /* As PostgreSQL's json input: the text must be one JSON value. */
        char why[128];
        if (json_text_check(s, len, why, sizeof why))
            return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid input syntax for type json: %s", why);
    }
        /* fall through */
    case TYPE_TEXT:
        out->u.s.p = arena_strndup(a, s, len);
        out->u.s.len = (uint32_t)len;
        return 0;
    case TYPE_BYTEA: {
        if (len >= 2 && s[0] == '\\' && s[1] == 'x') {
            if ((len - 2) % 2)
                return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid hexadecimal data: odd number of digits");
            char *p = arena_alloc(a, (len - 2) / 2 + 1);
            for (size_t k = 0; k < (len - 2) / 2; k++) {
                unsigned x;
                if (sscanf(s + 2 + 2 * k, "%2x", &x) != 1)
                    return werr(err, SQLSTATE_INVALID_TEXT, 0, "invalid hexadecimal digit");
                p[k] = (char)x;
            }
            out->u.s.p = p;
            out->u.s.len = (uint32_t)((len - 2) / 2);
        } else {
            out->u.s.p = arena_strndup(a, s, len);
            out->u.s.len = (uint32_t)len;
        }
        return 0;
    }
    case TYPE_DATE: {
        size_t b = 0, e = len;
        while (b < e && isspace((unsigned char)s[b]))
            b++;
        while (e > b && isspace((unsigned char)s[e - 1]))
            e--;
        if (e - b == 8 && strncasecmp(s + b, "infinity", 8) == 0) {
            out->u.i = DATE_PLUS_INF;
            return 0;
        }
        if (e - b == 9 && strncasecmp(s + b, "-infinity", 9) == 0) {
            out->u.i = DATE_MINUS_INF;
            return 0;
        }
        int r = parse_date(s, len, &out->u.i);
        if (r == -3)
            return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "date/time field value out of range: \"%.*s\"",
                        (int)(len > 200 ? 200 : len), s);
        if (r)
            return werr(err, SQLSTATE_DATETIME_FORMAT, 0, "invalid input syntax for type date: \"%.*s\"",
                        (int)(len > 200 ? 200 : len), s);
        return 0;
    }
    case TYPE_TIMESTAMP:
    case TYPE_TIMESTAMPTZ:
        if (len == 8 && strncasecmp(s, "infinity", 8) == 0) {
            out->u.i = TS_PLUS_INF;
            return 0;
        }
        if (len == 9 && strncasecmp(s, "-infinity", 9) == 0) {
            out->u.i = TS_MINUS_INF;
            return 0;
        }
        int r = t == TYPE_TIMESTAMPTZ ? parse_timestamptz(s, len, &out->u.i, err) : parse_timestamp(s, len, &out->u.i);
        if (r == -3)
            return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "date/time field value out of range: \"%.*s\"",
                        (int)(len > 200 ? 200 : len), s);
        if (r == -1)
            return werr(err, SQLSTATE_DATETIME_FORMAT, 0, "invalid input syntax for type %s: \"%.*s\"",
                        type_name(t), (int)(len > 200 ? 200 : len), s);
        return r ? -1 : 0;
    case TYPE_INTERVAL:
        if (parse_interval(s, len, &out->u.iv))
            return werr(err, SQLSTATE_DATETIME_FORMAT, 0, "invalid input syntax for type interval: \"%.*s\"",
                        (int)(len > 200 ? 200 : len), s);
        return 0;
    case TYPE_NUMERIC: {
        Numeric n;
        if (num_parse(s, len, &n, err))
            return -1;
        num_put(n, out);
        return 0;
    }
    case TYPE_NULL:
    case TYPE__COUNT: break;
    }
    return werr(err, SQLSTATE_INTERNAL, 0, "cannot parse a value of unknown type");
}

/* Postgres compares intervals as if a month were 30 days and a day 24 hours. */
static __int128 interval_key(const Interval *iv)
{
    return (__int128)iv->usecs + ((__int128)iv->days + (__int128)iv->months * 30) * USECS_PER_DAY;
}

int value_cmp(const Value *a, const Value *b)
{
    switch (type_phys(a->type)) {
    case PHYS_I64: return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
    case PHYS_F64:
        /* NaN sorts after everything and equals itself, as in Postgres. */
        if (isnan(a->u.f) || isnan(b->u.f))
            return isnan(a->u.f) - isnan(b->u.f);
        return a->u.f < b->u.f ? -1 : a->u.f > b->u.f;
    case PHYS_STR: {
        uint32_t n = a->u.s.len < b->u.s.len ? a->u.s.len : b->u.s.len;
        int c = n ? memcmp(a->u.s.p, b->u.s.p, n) : 0;
        if (c)
            return c < 0 ? -1 : 1;
        return a->u.s.len < b->u.s.len ? -1 : a->u.s.len > b->u.s.len;
    }
    case PHYS_IV: {
        __int128 x = interval_key(&a->u.iv), y = interval_key(&b->u.iv);
        return x < y ? -1 : x > y;
    }
    case PHYS_NUM: return num_cmp(num_get(a), num_get(b));
    }
    return 0;
}

bool value_eq(const Value *a, const Value *b) { return value_cmp(a, b) == 0; }

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
    /* A simple, fast 8-bytes-at-a-time mix; good enough for hash tables and
     * exchange routing, not for adversarial keys. */
    const unsigned char *s = p;
    uint64_t h = seed ^ (n * UINT64_C(0x9e3779b97f4a7c15));
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = hash_u64(h ^ w) * UINT64_C(0x9e3779b97f4a7c15);
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return hash_u64(h ^ w ^ ((uint64_t)n << 56));
}

void hash_bytes2(const void *p, size_t n, uint64_t seed0, uint64_t seed1, uint64_t out[2])
{
    const unsigned char *s = p;
    uint64_t h0 = seed0 ^ (n * UINT64_C(0x9e3779b97f4a7c15)), h1 = seed1 ^ (n * UINT64_C(0x9e3779b97f4a7c15));
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h0 = hash_u64(h0 ^ w) * UINT64_C(0x9e3779b97f4a7c15);
        h1 = hash_u64(h1 ^ w) * UINT64_C(0x9e3779b97f4a7c15);
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    out[0] = hash_u64(h0 ^ w ^ ((uint64_t)n << 56));
    out[1] = hash_u64(h1 ^ w ^ ((uint64_t)n << 56));
}

uint64_t value_hash(const Value *v, uint64_t seed)
{
    if (v->null)
        return hash_u64(seed ^ WEIR_HASH_NULL);
    switch (type_phys(v->type)) {
    case PHYS_I64: return hash_u64(seed ^ (uint64_t)v->u.i);
    case PHYS_F64: {
        double f = v->u.f == 0 ? 0 : isnan(v->u.f) ? NAN : v->u.f; /* -0 == 0, NaN == NaN */
        uint64_t w;
        memcpy(&w, &f, 8);
        return hash_u64(seed ^ w);
    }
    case PHYS_STR: return hash_bytes(v->u.s.p, v->u.s.len, seed);
    case PHYS_IV: {
        __int128 k = interval_key(&v->u.iv);
        return hash_u64(seed ^ (uint64_t)k ^ hash_u64((uint64_t)(k >> 64)));
    }
    case PHYS_NUM: return num_hash(num_get(v), seed);
    }
    return seed;
}
