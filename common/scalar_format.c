/*
 * scalar_format.c: timestamps as text by a pattern -- to_char (Postgres's
 * template patterns) and date_format (Flink's DATE_FORMAT, Java's
 * SimpleDateFormat letters). Both take a timestamp or timestamptz (shown in
 * UTC, weir's only time zone) and return text.
 *
 * Both walk the pattern once, longest field name first; anything that is
 * not a field is copied (to_char: "double-quoted text" literally, \" inside;
 * date_format: 'single-quoted text', '' for a quote). Infinite timestamps
 * give NULL, as Postgres's to_char does.
 */
#include "tz.h"
#include "scalar_int.h"

#include <stdio.h>
#include <string.h>

static const char *MONTHS[12] = {"January", "February", "March",     "April",   "May",      "June",
                                 "July",    "August",   "September", "October", "November", "December"};
static const char *DAYS[7] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};

/* The fields of one instant. */
typedef struct Parts {
    int64_t year;          /* proleptic; 0 = 1 BC */
    unsigned month, day;   /* 1-based */
    int hour, minute, second;
    int usec;
    int dow;               /* 0 = Sunday */
    int doy;               /* 1-based day of the year */
    int64_t iso_week, iso_year;
} Parts;

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static void parts_of(int64_t t, Parts *p)
{
    int64_t days = floor_div(t, USECS_PER_DAY), tod = t - days * USECS_PER_DAY;
    civil_from_days(days, &p->year, &p->month, &p->day);
    p->hour = (int)(tod / (3600 * USECS_PER_SEC));
    p->minute = (int)(tod / (60 * USECS_PER_SEC) % 60);
    p->second = (int)(tod / USECS_PER_SEC % 60);
    p->usec = (int)(tod % USECS_PER_SEC);
    int64_t r = (days + 4) % 7; /* 1970-01-01 was a Thursday */
    p->dow = (int)(r < 0 ? r + 7 : r);
    p->doy = (int)(days - days_from_civil(p->year, 1, 1)) + 1;
    int isodow = p->dow ? p->dow : 7;
    int64_t thursday = days - (isodow - 4), y;
    unsigned m, d;
    civil_from_days(thursday, &y, &m, &d);
    p->iso_year = y;
    p->iso_week = (thursday - days_from_civil(y, 1, 1)) / 7 + 1;
}

/* Appends a name in the case the pattern asked for: 'A' all upper, 'a'
 * initial capital, 'l' all lower; width > 0 pads with blanks. */
static void put_name(Buf *b, const char *name, size_t len, char style, int width)
{
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (style == 'A' && c >= 'a' && c <= 'z')
            c = (char)(c - 32);
        else if (style == 'l' && c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        buf_putc(b, c);
    }
    for (int i = (int)len; i < width; i++)
        buf_putc(b, ' ');
}

static void put_num(Buf *b, int64_t v, int digits, bool fill)
{
    if (fill)
        buf_printf(b, "%0*lld", digits, (long long)v);
    else
        buf_printf(b, "%lld", (long long)v);
}

/* The case style of a name field written as A (all caps), Aa (capital) or aa (lower). */
static char style_of(const char *s) { return s[1] >= 'a' && s[1] <= 'z' ? (s[0] >= 'a' ? 'l' : 'a') : 'A'; }

static bool at_ci(const char *p, const char *end, const char *f)
{
    size_t n = strlen(f);
    if ((size_t)(end - p) < n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 32);
        if (c != f[i])
            return false;
    }
    return true;
}

/* Postgres to_char for timestamps. */
static void to_char(const Parts *t, const char *p, const char *end, Buf *b)
{
    while (p < end) {
        bool fm = false;
        if (at_ci(p, end, "FM")) {
            fm = true;
            p += 2;
            if (p >= end)
                break;
        }
        int64_t y = t->year > 0 ? t->year : 1 - t->year; /* BC years count up */
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < end)
                    p++;
                buf_putc(b, *p);
            }
            if (p < end)
                p++;
        } else if (at_ci(p, end, "YYYY")) {
            put_num(b, y, 4, !fm);
            p += 4;
        } else if (at_ci(p, end, "YYY")) {
            put_num(b, y % 1000, 3, !fm);
            p += 3;
        } else if (at_ci(p, end, "YY")) {
            put_num(b, y % 100, 2, !fm);
            p += 2;
        } else if (at_ci(p, end, "IYYY")) {
            put_num(b, t->iso_year, 4, !fm);
            p += 4;
        } else if (at_ci(p, end, "IW")) {
            put_num(b, t->iso_week, 2, !fm);
            p += 2;
        } else if (at_ci(p, end, "ID")) {
            put_num(b, t->dow ? t->dow : 7, 1, false);
            p += 2;
        } else if (at_ci(p, end, "HH24")) {
            put_num(b, t->hour, 2, !fm);
            p += 4;
        } else if (at_ci(p, end, "HH12") || at_ci(p, end, "HH")) {
            put_num(b, t->hour % 12 ? t->hour % 12 : 12, 2, !fm);
            p += at_ci(p, end, "HH12") ? 4 : 2;
        } else if (at_ci(p, end, "MI")) {
            put_num(b, t->minute, 2, !fm);
            p += 2;
        } else if (at_ci(p, end, "SS")) {
            put_num(b, t->second, 2, !fm);
            p += 2;
        } else if (at_ci(p, end, "MS")) {
            put_num(b, t->usec / 1000, 3, !fm);
            p += 2;
        } else if (at_ci(p, end, "US")) {
            put_num(b, t->usec, 6, !fm);
            p += 2;
        } else if (at_ci(p, end, "AM") || at_ci(p, end, "PM")) {
            put_name(b, t->hour < 12 ? "am" : "pm", 2, *p >= 'a' ? 'l' : 'A', 0);
            p += 2;
        } else if (at_ci(p, end, "A.M.") || at_ci(p, end, "P.M.")) {
            put_name(b, t->hour < 12 ? "a.m." : "p.m.", 4, *p >= 'a' ? 'l' : 'A', 0);
            p += 4;
        } else if (at_ci(p, end, "MONTH")) {
            const char *m = MONTHS[t->month - 1];
            put_name(b, m, strlen(m), style_of(p), fm ? 0 : 9);
            p += 5;
        } else if (at_ci(p, end, "MON")) {
            put_name(b, MONTHS[t->month - 1], 3, style_of(p), 0);
            p += 3;
        } else if (at_ci(p, end, "MM")) {
            put_num(b, t->month, 2, !fm);
            p += 2;
        } else if (at_ci(p, end, "DAY")) {
            const char *d = DAYS[t->dow];
            put_name(b, d, strlen(d), style_of(p), fm ? 0 : 9);
            p += 3;
        } else if (at_ci(p, end, "DY")) {
            put_name(b, DAYS[t->dow], 3, style_of(p), 0);
            p += 2;
        } else if (at_ci(p, end, "DDD")) {
            put_num(b, t->doy, 3, !fm);
            p += 3;
        } else if (at_ci(p, end, "DD")) {
            put_num(b, t->day, 2, !fm);
            p += 2;
        } else if (at_ci(p, end, "D")) {
            put_num(b, t->dow + 1, 1, false);
            p += 1;
        } else if (at_ci(p, end, "Q")) {
            put_num(b, (t->month - 1) / 3 + 1, 1, false);
            p += 1;
        } else if (at_ci(p, end, "BC") || at_ci(p, end, "AD")) {
            put_name(b, t->year > 0 ? "ad" : "bc", 2, *p >= 'a' ? 'l' : 'A', 0);
            p += 2;
        } else {
            buf_putc(b, *p++);
        }
    }
}

/* Flink's DATE_FORMAT: Java SimpleDateFormat letters, runs of one letter. */
static void date_format(const Parts *t, const char *p, const char *end, Buf *b)
{
    while (p < end) {
        char c = *p;
        if (c == '\'') {
            if (p + 1 < end && p[1] == '\'') {
                buf_putc(b, '\'');
                p += 2;
                continue;
            }
            for (p++; p < end; p++) {
                if (*p == '\'') {
                    if (p + 1 < end && p[1] == '\'') {
                        buf_putc(b, '\'');
                        p++;
                        continue;
                    }
                    break;
                }
                buf_putc(b, *p);
            }
            if (p < end)
                p++;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            buf_putc(b, c);
            p++;
            continue;
        }
        int n = 1;
        while (p + n < end && p[n] == c)
            n++;
        p += n;
        int64_t y = t->year > 0 ? t->year : 1 - t->year;
        switch (c) {
        case 'y': put_num(b, n == 2 ? y % 100 : y, n == 2 ? 2 : n, true); break;
        case 'M':
            if (n >= 4)
                put_name(b, MONTHS[t->month - 1], strlen(MONTHS[t->month - 1]), 'a', 0);
            else if (n == 3)
                put_name(b, MONTHS[t->month - 1], 3, 'a', 0);
            else
                put_num(b, t->month, n, true);
            break;
        case 'd': put_num(b, t->day, n, true); break;
        case 'D': put_num(b, t->doy, n, true); break;
        case 'H': put_num(b, t->hour, n, true); break;
        case 'h': put_num(b, t->hour % 12 ? t->hour % 12 : 12, n, true); break;
        case 'k': put_num(b, t->hour ? t->hour : 24, n, true); break;
        case 'K': put_num(b, t->hour % 12, n, true); break;
        case 'm': put_num(b, t->minute, n, true); break;
        case 's': put_num(b, t->second, n, true); break;
        case 'S': {
            /* Fraction digits: S = tenths... SSS = milliseconds, SSSSSS = microseconds. */
            char digits[7];
            snprintf(digits, sizeof digits, "%06d", t->usec);
            for (int i = 0; i < n; i++)
                buf_putc(b, i < 6 ? digits[i] : '0');
            break;
        }
        case 'E':
            put_name(b, DAYS[t->dow], n >= 4 ? strlen(DAYS[t->dow]) : 3, 'a', 0);
            break;
        case 'a': put_name(b, t->hour < 12 ? "AM" : "PM", 2, 'A', 0); break;
        case 'u': put_num(b, t->dow ? t->dow : 7, n, true); break;
        case 'w': put_num(b, t->iso_week, n, true); break;
        case 'G': put_name(b, t->year > 0 ? "AD" : "BC", 2, 'A', 0); break;
        case 'z':
        case 'Z':
        case 'X': put_name(b, c == 'z' ? "UTC" : c == 'X' ? "Z" : "+0000", c == 'z' ? 3 : c == 'X' ? 1 : 5, 'A', 0); break;
        default:
            for (int i = 0; i < n; i++) /* not a field letter: as written */
                buf_putc(b, c);
            break;
        }
    }
}

int scalar_format_call(ScalarFn fn, const Value *args, Arena *a, Value *out, WError *err)
{
    int64_t t = args[0].u.i;
    if (t == TS_PLUS_INF || t == TS_MINUS_INF) {
        out->null = true;
        return 0;
    }
    if (args[1].u.s.len > 4096)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "%s: the pattern is longer than 4096 bytes",
                    fn == FN_TO_CHAR ? "to_char" : "date_format");
    if (fn == FN_TO_CHAR && args[0].type == TYPE_TIMESTAMPTZ)
        t = tz_utc_to_local(tz_current(), t); /* Postgres formats a timestamptz in the session's zone */
    Parts parts;
    parts_of(t, &parts);
    Buf b = BUF_INIT;
    const char *p = args[1].u.s.p, *end = p + args[1].u.s.len;
    if (fn == FN_TO_CHAR)
        to_char(&parts, p, end, &b);
    else
        date_format(&parts, p, end, &b);
    char *s = arena_alloc(a, b.len + 1);
    if (b.len)
        memcpy(s, b.data, b.len);
    s[b.len] = 0;
    scalar_set_str(out, s, b.len);
    buf_free(&b);
    return 0;
}
