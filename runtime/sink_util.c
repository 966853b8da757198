/* sink_util.c: see sink_util.h. */
#include "sink_util.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

void sink_put_ident(Buf *b, const char *name)
{
    buf_putc(b, '"');
    for (const char *p = name; *p; p++) {
        if (*p == '"')
            buf_putc(b, '"');
        buf_putc(b, *p);
    }
    buf_putc(b, '"');
}

int sink_split_name(Arena *a, const char *s, char *parts[2], bool fold)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        if (n == 2)
            return -1;
        Buf b = BUF_INIT;
        if (*p == '"') {
            for (p++;; p++) {
                if (!*p) {
                    buf_free(&b);
                    return -1;
                }
                if (*p == '"') {
                    if (p[1] != '"')
                        break;
                    p++;
                }
                buf_putc(&b, *p);
            }
            p++;
        } else {
            for (; *p && *p != '.'; p++)
                buf_putc(&b, fold ? (char)tolower((unsigned char)*p) : *p);
        }
        if (b.len == 0) {
            buf_free(&b);
            return -1;
        }
        parts[n++] = arena_strndup(a, b.data, b.len);
        buf_free(&b);
        if (!*p)
            return n;
        if (*p != '.')
            return -1;
        p++;
    }
}

int sink_db_options(const RtSinkSpec *spec, const char *loc_key, const char **loc, const char **table,
                    bool *create, WError *err)
{
    *loc = rt_sink_option(spec, loc_key);
    *table = rt_sink_option(spec, "table");
    *create = false;
    if (!*loc || !**loc)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "sink \"%s\": option '%s' is required", spec->name,
                    loc_key);
    if (!*table || !**table)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "sink \"%s\": option 'table' is required", spec->name);
    const char *v = rt_sink_option(spec, "create_table");
    if (v && (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1")))
        *create = true;
    else if (v && strcasecmp(v, "false") && strcasecmp(v, "off") && strcmp(v, "0"))
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "sink \"%s\": option 'create_table' must be 'true' or 'false', not '%s'", spec->name, v);
    if (spec->upsert && spec->n_pk <= 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "sink \"%s\": an upsert sink needs a primary key",
                    spec->name);
    return 0;
}

int sink_on_error(const RtSinkSpec *spec, bool *skip, WError *err)
{
    const char *v = rt_sink_option(spec, "on_error");
    *skip = true;
    if (!v || !strcasecmp(v, "skip"))
        return 0;
    if (!strcasecmp(v, "fail")) {
        *skip = false;
        return 0;
    }
    return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "sink \"%s\": option 'on_error' must be 'skip' or 'fail', not '%s'",
                spec->name, v);
}

bool sink_row_level(const char *sqlstate)
{
    return sqlstate && (!strncmp(sqlstate, "22", 2) || !strncmp(sqlstate, "23", 2));
}

static void json_str(Buf *out, const char *p, size_t n)
{
    buf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            buf_printf(out, "\\%c", c);
        else if (c < 0x20)
            buf_printf(out, "\\u%04x", c);
        else
            buf_putc(out, (char)c);
    }
    buf_putc(out, '"');
}

void sink_row_json(Buf *out, int n_cols, const char *const *names, const Value *row)
{
    Buf t = BUF_INIT;
    buf_putc(out, '{');
    for (int i = 0; i < n_cols; i++) {
        if (i)
            buf_puts(out, ", ");
        json_str(out, names[i], strlen(names[i]));
        buf_puts(out, ": ");
        if (row[i].null) {
            buf_puts(out, "null");
            continue;
        }
        buf_reset(&t);
        value_to_text(&row[i], &t);
        json_str(out, t.data ? t.data : "", t.len);
    }
    buf_putc(out, '}');
    buf_free(&t);
}
