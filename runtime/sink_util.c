/* sink_util.c: see sink_util.h. */
#include "sink_util.h"

#include <ctype.h>

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
