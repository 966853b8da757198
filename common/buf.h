/*
 * buf.h: a growable byte buffer (heap owned), for encoding rows, keys,
 * wire messages and text output.
 */
#ifndef WEIR_COMMON_BUF_H
#define WEIR_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct Buf {
    char *data;   /* always NUL-terminated after any append (not counted in len) */
    size_t len;   /* bytes in use */
    size_t cap;   /* bytes allocated */
} Buf;

#define BUF_INIT {NULL, 0, 0}

void buf_free(Buf *b);
void buf_reset(Buf *b);                      /* len = 0, keeps memory */
/* Grows b to hold at least need bytes (the slow path of buf_reserve). */
void buf_grow(Buf *b, size_t need);

/* The appends are inline: row and key encoding call them once per value
 * (a byte of tag, 8 bytes of integer), and as calls into a memcpy of
 * unknown length they were a tenth of an aggregation's time (Nexmark
 * q5_counts); inlined, a constant-length copy is a move. */
static inline void buf_reserve(Buf *b, size_t extra) /* room for extra more bytes */
{
    size_t need = b->len + extra + 1;
    if (need > b->cap)
        buf_grow(b, need);
}

static inline void buf_append(Buf *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    if (n)
        __builtin_memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

static inline void buf_putc(Buf *b, char c)
{
    buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

static inline void buf_put_u8(Buf *b, uint8_t v) { buf_putc(b, (char)v); }

void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_put_u16be(Buf *b, uint16_t v);
void buf_put_u32be(Buf *b, uint32_t v);
void buf_put_u64be(Buf *b, uint64_t v);
/* Take the bytes: returns data (caller frees) and leaves b empty. */
char *buf_take(Buf *b);

#endif
