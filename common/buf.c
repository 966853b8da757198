/* buf.c: see buf.h. */
#include "buf.h"
#include "arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_free(Buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void buf_reset(Buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = 0;
}

void buf_grow(Buf *b, size_t need)
{
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void buf_puts(Buf *b, const char *s) { buf_append(b, s, strlen(s)); }

void buf_put_u16be(Buf *b, uint16_t v)
{
    buf_put_u8(b, (uint8_t)(v >> 8));
    buf_put_u8(b, (uint8_t)v);
}

void buf_put_u32be(Buf *b, uint32_t v)
{
    unsigned char x[4] = {v >> 24, v >> 16, v >> 8, v};
    buf_append(b, x, 4);
}

void buf_put_u64be(Buf *b, uint64_t v)
{
    buf_put_u32be(b, (uint32_t)(v >> 32));
    buf_put_u32be(b, (uint32_t)v);
}

void buf_printf(Buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *buf_take(Buf *b)
{
    if (!b->data)
        buf_reserve(b, 0), b->data[0] = 0;
    char *p = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
