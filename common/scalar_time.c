/*
 * scalar_time.c: the date/time functions of scalar_call(): date_trunc,
 * extract/date_part on timestamps, dates and intervals, to_timestamp,
 * make_interval/make_date/make_timestamp, now() and AT TIME ZONE.
 *
 * A timestamptz is worked on as the wall clock of the thread's zone (tz.h;
 * date_trunc's third argument names another), then turned back into an
 * instant where the result is one; a timestamp has no zone.
 * Field names follow Postgres's units table (singular, plural and the
 * usual abbreviations). Years follow Postgres too: internally year 0 is
 * 1 BC (proleptic Gregorian, as civil_from_days), and extract(year) turns
 * it into -1, as Postgres prints BC years.
 */
#include "numeric.h"
#include "scalar_int.h"
#include "tz.h"
#include "clock.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <time.h>


typedef enum Unit {
    U_BAD, U_MICRO, U_MILLI, U_SECOND, U_MINUTE, U_HOUR, U_DAY, U_WEEK, U_MONTH, U_QUARTER,
    U_YEAR, U_DECADE, U_CENTURY, U_MILLENNIUM,
    /* not units of time: only extract takes these */
    U_EPOCH, U_DOW, U_ISODOW, U_DOY, U_ISOYEAR,
} Unit;

static const struct {
    const char *name;
    Unit u;
} UNITS[] = {
    {"microsecond", U_MICRO}, {"microseconds", U_MICRO}, {"us", U_MICRO}, {"usec", U_MICRO},
    {"usecs", U_MICRO}, {"millisecond", U_MILLI}, {"milliseconds", U_MILLI}, {"ms", U_MILLI},
    {"msec", U_MILLI}, {"msecs", U_MILLI}, {"second", U_SECOND}, {"seconds", U_SECOND},
    {"s", U_SECOND}, {"sec", U_SECOND}, {"secs", U_SECOND}, {"minute", U_MINUTE},
    {"minutes", U_MINUTE}, {"m", U_MINUTE}, {"min", U_MINUTE}, {"mins", U_MINUTE},
    {"hour", U_HOUR}, {"hours", U_HOUR}, {"h", U_HOUR}, {"hr", U_HOUR}, {"hrs", U_HOUR},
    {"day", U_DAY}, {"days", U_DAY}, {"d", U_DAY}, {"week", U_WEEK}, {"weeks", U_WEEK},
    {"w", U_WEEK}, {"month", U_MONTH}, {"months", U_MONTH}, {"mon", U_MONTH}, {"mons", U_MONTH},
    {"quarter", U_QUARTER}, {"qtr", U_QUARTER}, {"year", U_YEAR}, {"years", U_YEAR},
    {"y", U_YEAR}, {"yr", U_YEAR}, {"yrs", U_YEAR}, {"decade", U_DECADE}, {"decades", U_DECADE},
    {"dec", U_DECADE}, {"century", U_CENTURY}, {"centuries", U_CENTURY}, {"c", U_CENTURY},
    {"cent", U_CENTURY}, {"millennium", U_MILLENNIUM}, {"millennia", U_MILLENNIUM},
    {"mil", U_MILLENNIUM}, {"mils", U_MILLENNIUM}, {"epoch", U_EPOCH}, {"dow", U_DOW},
    {"isodow", U_ISODOW}, {"doy", U_DOY}, {"isoyear", U_ISOYEAR},
};

/* Lower-cases the field into low (at most 31 bytes) and looks it up. */
static Unit unit_of(const char *s, size_t n, char low[32])
{
    size_t k = n < 31 ? n : 31;
    for (size_t i = 0; i < k; i++)
        low[i] = (char)tolower((unsigned char)s[i]);
    low[k] = 0;
    if (n > 31)
        return U_BAD;
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++)
        if (strcmp(UNITS[i].name, low) == 0)
            return UNITS[i].u;
    return U_BAD;
}

int scalar_check_field(ScalarFn fn, TypeId t, const char *field, size_t len, WError *err)
{
    char low[32];
    Unit u = unit_of(field, len, low);
    const char *tn = type_name(t);
    if (u == U_BAD || (fn == FN_DATE_TRUNC && u == U_EPOCH))
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "unit \"%s\" not recognized for type %s", low, tn);
    bool unsupported = false;
    if (fn == FN_DATE_TRUNC)
        unsupported = u > U_MILLENNIUM;
    else if (fn == FN_EXTRACT_DATE)
        unsupported = u >= U_MICRO && u <= U_HOUR;
    else if (fn == FN_EXTRACT_IV)
        unsupported = u == U_WEEK || u > U_EPOCH;
    if (unsupported)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "unit \"%s\" not supported for type %s", low, tn);
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Day of week of a day number, 0 = Sunday (1970-01-01 was a Thursday). */
static int dow_of(int64_t days)
{
    int64_t r = (days + 4) % 7;
    return (int)(r < 0 ? r + 7 : r);
}

/* ISO 8601 week number and week-numbering year of a day. */
static void iso_week(int64_t days, int64_t *week, int64_t *isoyear)
{
    int isodow = dow_of(days) ? dow_of(days) : 7;
    int64_t thursday = days - (isodow - 4), y;
    unsigned m, d;
    civil_from_days(thursday, &y, &m, &d);
    *isoyear = y;
    *week = (thursday - days_from_civil(y, 1, 1)) / 7 + 1;
}

/* Postgres's decade/century/millennium of an internal year (0 = 1 BC). */
static int64_t decade_of(int64_t y) { return y >= 0 ? y / 10 : -((8 - (y - 1)) / 10); }
static int64_t century_of(int64_t y) { return y > 0 ? (y + 99) / 100 : -((99 - (y - 1)) / 100); }
static int64_t millennium_of(int64_t y) { return y > 0 ? (y + 999) / 1000 : -((999 - (y - 1)) / 1000); }

/* An extracted field, exactly: c * 10^-scale. date_part gives it as a
 * double, EXTRACT (since Postgres 14) as a numeric with Postgres's scale:
 * 6 for seconds and epoch, 3 for milliseconds, 0 for the rest. */
typedef struct Field {
    __int128 c;
    int scale;
} Field;

/* Writes f as result's type (double precision or numeric). */
static void field_out(Field f, TypeId result, Value *out)
{
    if (result == TYPE_NUMERIC) {
        num_put((Numeric){f.c, f.scale}, out);
        return;
    }
    out->u.f = f.scale == 0 ? (double)f.c : (double)f.c / (f.scale == 3 ? 1e3 : 1e6);
}

/* extract from a timestamp t (microseconds), or from a date when is_date
 * (t is then a day number, which may lie beyond the timestamp range). */
static int extract_ts(Unit u, int64_t t, bool is_date, TypeId result, Value *out, WError *err)
{
    bool inf = is_date ? t == DATE_PLUS_INF || t == DATE_MINUS_INF : t == TS_PLUS_INF || t == TS_MINUS_INF;
    if (inf) {
        /* Postgres: fields that grow with time are +-Infinity, others NULL. */
        if (u == U_EPOCH || u == U_YEAR || u == U_ISOYEAR || u == U_DECADE || u == U_CENTURY || u == U_MILLENNIUM) {
            if (result == TYPE_NUMERIC)
                return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: numeric value \"Infinity\""),
                       werr_hint(err, "date_part() gives it as double precision."), -1;
            out->u.f = t > 0 ? INFINITY : -INFINITY;
        } else {
            out->null = true;
        }
        return 0;
    }
    int64_t days = is_date ? t : floor_div(t, USECS_PER_DAY), tod = is_date ? 0 : t - days * USECS_PER_DAY;
    int64_t y, week, isoyear;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    int64_t in_min = tod % (60 * USECS_PER_SEC);
    Field f = {0, 0};
    switch (u) {
    case U_MICRO: f.c = in_min; break;
    case U_MILLI: f = (Field){in_min, 3}; break;
    case U_SECOND: f = (Field){in_min, 6}; break;
    case U_MINUTE: f.c = tod / (60 * USECS_PER_SEC) % 60; break;
    case U_HOUR: f.c = tod / (3600 * USECS_PER_SEC); break;
    case U_DAY: f.c = d; break;
    case U_WEEK: iso_week(days, &week, &isoyear); f.c = week; break;
    case U_MONTH: f.c = m; break;
    case U_QUARTER: f.c = (m - 1) / 3 + 1; break;
    case U_YEAR: f.c = y > 0 ? y : y - 1; break;
    case U_DECADE: f.c = decade_of(y); break;
    case U_CENTURY: f.c = century_of(y); break;
    case U_MILLENNIUM: f.c = millennium_of(y); break;
    case U_EPOCH: f = is_date ? (Field){(__int128)days * 86400, 0} : (Field){t, 6}; break;
    case U_DOW: f.c = dow_of(days); break;
    case U_ISODOW: f.c = dow_of(days) ? dow_of(days) : 7; break;
    case U_DOY: f.c = days - days_from_civil(y, 1, 1) + 1; break;
    case U_ISOYEAR:
        iso_week(days, &week, &isoyear);
        f.c = isoyear > 0 ? isoyear : isoyear - 1;
        break;
    case U_BAD: break;
    }
    field_out(f, result, out);
    return 0;
}

static void extract_iv(Unit u, const Interval *iv, TypeId result, Value *out)
{
    int64_t us = iv->usecs, in_min = us % (60 * USECS_PER_SEC);
    int32_t years = iv->months / 12, mon = iv->months % 12;
    Field f = {0, 0};
    switch (u) {
    case U_MICRO: f.c = in_min; break;
    case U_MILLI: f = (Field){in_min, 3}; break;
    case U_SECOND: f = (Field){in_min, 6}; break;
    case U_MINUTE: f.c = us / (60 * USECS_PER_SEC) % 60; break;
    case U_HOUR: f.c = us / (3600 * USECS_PER_SEC); break;
    case U_DAY: f.c = iv->days; break;
    case U_MONTH: f.c = mon; break;
    case U_QUARTER: f.c = mon / 3 + 1; break;
    case U_YEAR: f.c = years; break;
    case U_DECADE: f.c = years / 10; break;
    case U_CENTURY: f.c = years / 100; break;
    case U_MILLENNIUM: f.c = years / 1000; break;
    /* A year is 365.25 days and a month 30 days, as Postgres counts them. */
    case U_EPOCH:
        if (result != TYPE_NUMERIC) {
            out->u.f = 31557600.0 * years + 2592000.0 * mon + 86400.0 * iv->days + (double)us / 1e6;
            return;
        }
        f = (Field){((__int128)years * 31557600 + (__int128)mon * 2592000 + (__int128)iv->days * 86400) * USECS_PER_SEC + us, 6};
        break;
    default: break;   /* rejected by scalar_check_field */
    }
    field_out(f, result, out);
}

static int64_t trunc_ts(Unit u, int64_t t)
{
    if (t == TS_PLUS_INF || t == TS_MINUS_INF)
        return t;
    int64_t days = floor_div(t, USECS_PER_DAY), y;
    unsigned m, d;
    switch (u) {
    case U_MICRO: return t;
    case U_MILLI: return floor_div(t, 1000) * 1000;
    case U_SECOND: return floor_div(t, USECS_PER_SEC) * USECS_PER_SEC;
    case U_MINUTE: return floor_div(t, 60 * USECS_PER_SEC) * 60 * USECS_PER_SEC;
    case U_HOUR: return floor_div(t, 3600 * USECS_PER_SEC) * 3600 * USECS_PER_SEC;
    case U_DAY: return days * USECS_PER_DAY;
    case U_WEEK: {
        int dow = dow_of(days);
        return (days - (dow ? dow - 1 : 6)) * USECS_PER_DAY;   /* back to Monday */
    }
    default: break;
    }
    civil_from_days(days, &y, &m, &d);
    switch (u) {
    case U_MONTH: break;
    case U_QUARTER: m = (m - 1) / 3 * 3 + 1; break;
    case U_YEAR: m = 1; break;
    case U_DECADE: m = 1; y = y > 0 ? y / 10 * 10 : -((8 - (y - 1)) / 10) * 10; break;
    case U_CENTURY: m = 1; y = y > 0 ? (y + 99) / 100 * 100 - 99 : -((99 - (y - 1)) / 100) * 100 + 1; break;
    case U_MILLENNIUM: m = 1; y = y > 0 ? (y + 999) / 1000 * 1000 - 999 : -((999 - (y - 1)) / 1000) * 1000 + 1; break;
    default: break;
    }
    return days_from_civil(y, m, 1) * USECS_PER_DAY;
}

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* Postgres's make_date rules: negative years are BC, there is no year 0. */
static int civil_days(int64_t year, int64_t month, int64_t day, int64_t *out, WError *err)
{
    static const unsigned dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t y = year < 0 ? year + 1 : year;
    if (year == 0 || month < 1 || month > 12 || day < 1 || year > 5874897 || year < -4713 ||
        day > dm[month - 1] + (month == 2 && is_leap(y)))
        return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "date field value out of range: %lld-%02lld-%02lld",
                    (long long)year, (long long)month, (long long)day);
    *out = days_from_civil(y, (unsigned)month, (unsigned)day);
    return 0;
}

static int make_interval(int n, const Value *args, Value *out, WError *err)
{
    int64_t f[6] = {0};   /* years, months, weeks, days, hours, mins */
    for (int i = 0; i < n && i < 6; i++)
        f[i] = args[i].u.i;
    double secs = n > 6 ? args[6].u.f : 0;
    int64_t months = f[0] * 12 + f[1], days = f[2] * 7 + f[3];   /* int4 inputs: no overflow */
    double us = (double)f[4] * 3600e6 + (double)f[5] * 60e6 + rint(secs * 1e6);
    if (months < INT32_MIN || months > INT32_MAX || days < INT32_MIN || days > INT32_MAX || !isfinite(us) ||
        us < -9.2233720368547758e18 || us >= 9.2233720368547758e18)
        return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "interval out of range");
    out->u.iv.months = (int32_t)months;
    out->u.iv.days = (int32_t)days;
    out->u.iv.usecs = (int64_t)us;
    return 0;
}

static int make_timestamp(const Value *args, Value *out, WError *err)
{
    int64_t days;
    if (civil_days(args[0].u.i, args[1].u.i, args[2].u.i, &days, err))
        return -1;
    int64_t h = args[3].u.i, mi = args[4].u.i;
    double s = args[5].u.f;
    if (h < 0 || mi < 0 || mi > 59 || !(s >= 0) || s > 60 || h > 24 || (h == 24 && (mi > 0 || s > 0)))
        return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "time field value out of range: %lld:%02lld:%02g",
                    (long long)h, (long long)mi, s);
    out->u.i = days * USECS_PER_DAY + (h * 3600 + mi * 60) * USECS_PER_SEC + (int64_t)rint(s * 1e6);
    return 0;
}

static int to_timestamp(double secs, Value *out, WError *err)
{
    if (isnan(secs))
        return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "timestamp cannot be NaN");
    if (isinf(secs)) {
        out->u.i = secs > 0 ? TS_PLUS_INF : TS_MINUS_INF;
        return 0;
    }
    /* Postgres's range: 4714-11-24 BC to 294277-01-01 (exclusive). */
    if (secs < -210866803200.0 || secs >= 9224318016000.0)
        return werr(err, SQLSTATE_DATETIME_OVERFLOW, 0, "timestamp out of range: \"%g\"", secs);
    out->u.i = (int64_t)rint(secs * 1e6);
    return 0;
}

/* The zone a text argument names (22023 when none). */
static int tz_find_value(const Value *v, const WTz **out, WError *err)
{
    char name[128];
    if (v->u.s.len >= sizeof name)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "time zone \"%.100s\" not recognized", v->u.s.p);
    memcpy(name, v->u.s.p, v->u.s.len);
    name[v->u.s.len] = 0;
    return tz_find(name, out, err);
}

int scalar_time_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err)
{
    (void)a;
    switch (fn) {
    case FN_DATE_TRUNC:
    case FN_EXTRACT_TS:
    case FN_EXTRACT_DATE:
    case FN_EXTRACT_IV: {
        TypeId t = fn == FN_EXTRACT_DATE ? TYPE_DATE : fn == FN_EXTRACT_IV ? TYPE_INTERVAL : args[1].type;
        if (t != TYPE_TIMESTAMPTZ && t != TYPE_DATE && t != TYPE_INTERVAL)
            t = TYPE_TIMESTAMP;
        if (scalar_check_field(fn, t, args[0].u.s.p, args[0].u.s.len, err))
            return -1;
        char low[32];
        Unit u = unit_of(args[0].u.s.p, args[0].u.s.len, low);
        int64_t ts = fn == FN_EXTRACT_IV ? 0 : args[1].u.i;
        bool inf = ts == TS_PLUS_INF || ts == TS_MINUS_INF;
        if (t == TYPE_TIMESTAMPTZ && !inf) {
            /* On the wall clock of the zone given, or the thread's (Postgres:
             * the session's); the epoch is the instant itself. */
            const WTz *z = tz_current();
            if (n == 3 && tz_find_value(&args[2], &z, err))
                return -1;
            if (fn == FN_DATE_TRUNC) {
                /* Units below a day keep the value's own offset (02:30 in the
                 * second 02:00-03:00 of a fall-back night truncates to the
                 * second 02:00); a day or more is resolved again, as Postgres. */
                int64_t off = (int64_t)tz_offset(z, ts) * USECS_PER_SEC, t0 = trunc_ts(u, ts + off);
                bool small = u == U_MICRO || u == U_MILLI || u == U_SECOND || u == U_MINUTE || u == U_HOUR;
                out->u.i = small ? t0 - off : tz_local_to_utc(z, t0);
                return 0;
            }
            return extract_ts(u, u == U_EPOCH ? ts : tz_utc_to_local(z, ts), false, result, out, err);
        }
        if (fn == FN_DATE_TRUNC)
            out->u.i = trunc_ts(u, ts);
        else if (fn == FN_EXTRACT_IV)
            extract_iv(u, &args[1].u.iv, result, out);
        else
            return extract_ts(u, ts, fn == FN_EXTRACT_DATE, result, out, err);
        return 0;
    }
    case FN_AT_TIME_ZONE: {
        /* timestamptz -> the wall clock there; timestamp -> the instant that
         * wall clock there names (Postgres's timezone(zone, ts)). */
        const WTz *z;
        if (tz_find_value(&args[0], &z, err))
            return -1;
        int64_t ts = args[1].u.i;
        out->u.i = ts == TS_PLUS_INF || ts == TS_MINUS_INF ? ts
                 : result == TYPE_TIMESTAMP ? tz_utc_to_local(z, ts) : tz_local_to_utc(z, ts);
        return 0;
    }
    case FN_TO_TIMESTAMP: return to_timestamp(args[0].u.f, out, err);
    case FN_MAKE_INTERVAL: return make_interval(n, args, out, err);
    case FN_MAKE_DATE: return civil_days(args[0].u.i, args[1].u.i, args[2].u.i, &out->u.i, err);
    case FN_MAKE_TIMESTAMP: {
        if (make_timestamp(args, out, err))
            return -1;
        if (result == TYPE_TIMESTAMPTZ) {
            /* make_timestamptz: the fields are a wall-clock time in the zone
             * given, or the thread's (Postgres: the session's; a view's own). */
            const WTz *z = tz_current();
            if (n == 7 && tz_find_value(&args[6], &z, err))
                return -1;
            out->u.i = tz_local_to_utc(z, out->u.i);
        }
        return 0;
    }
    case FN_TO_CHAR:
    case FN_DATE_FORMAT: return scalar_format_call(fn, args, a, out, err);
    case FN_PROCTIME:
    case FN_NOW:
        if (n == 1) {
            out->u.i = args[0].u.i;
        } else {
            out->u.i = clock_wall_us();
        }
        return 0;
    default:
        return werr(err, SQLSTATE_INTERNAL, 0, "unknown time function id %d", (int)fn);
    }
}
