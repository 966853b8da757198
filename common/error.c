/* error.c: see error.h. */
#include "error.h"

#include <stdio.h>
#include <string.h>

void werr_clear(WError *e) { memset(e, 0, sizeof *e); }

int werr_v(WError *e, const char *sqlstate, int pos, const char *fmt, va_list ap)
{
    if (!e || e->set)
        return -1;
    e->set = true;
    snprintf(e->sqlstate, sizeof e->sqlstate, "%s", sqlstate);
    e->pos = pos;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    e->detail[0] = 0;
    e->hint[0] = 0;
    return -1;
}

int werr(WError *e, const char *sqlstate, int pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    werr_v(e, sqlstate, pos, fmt, ap);
    va_end(ap);
    return -1;
}

void werr_detail(WError *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    va_end(ap);
}

void werr_hint(WError *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
}
