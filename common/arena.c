/* arena.c: see arena.h. A singly linked list of blocks; the newest first. */
#include "arena.h"
#include "fault.h"
#include "log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Block {
    struct Block *next;
    size_t size;    /* usable bytes in data */
    size_t used;    /* bytes handed out from data */
    _Alignas(16) unsigned char data[];
} Block;

struct Arena {
    Block *head;        /* current block */
    size_t block_size;  /* default size of new blocks */
    size_t total_used;  /* bytes handed out since reset */
};

static void oom(size_t n)
{
    wlog_error("arena", "out of memory allocating %zu bytes", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = FAULT("alloc") ? NULL : malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = FAULT("alloc") ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = FAULT("alloc") ? NULL : realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

static Block *block_new(size_t size)
{
    Block *b = xmalloc(sizeof(Block) + size);
    b->next = NULL;
    b->size = size;
    b->used = 0;
    return b;
}

Arena *arena_new(size_t block_size)
{
    Arena *a = xcalloc(1, sizeof *a);
    a->block_size = block_size ? block_size : 64 * 1024;
    return a;
}

void arena_free(Arena *a)
{
    if (!a)
        return;
    Block *b = a->head;
    while (b) {
        Block *n = b->next;
        free(b);
        b = n;
    }
    free(a);
}

void arena_reset(Arena *a)
{
    /* Keep the oldest block (the default-sized one) so a per-chunk arena
     * settles into zero mallocs per cycle. */
    Block *b = a->head, *keep = NULL;
    while (b) {
        Block *n = b->next;
        if (!n && b->size == a->block_size)
            keep = b;
        else
            free(b);
        b = n;
    }
    if (keep)
        keep->used = 0;
    a->head = keep;
    a->total_used = 0;
}

void *arena_alloc(Arena *a, size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n)
        oom(n);
    Block *b = a->head;
    if (!b || b->size - b->used < need) {
        size_t size = need > a->block_size ? need : a->block_size;
        Block *nb = block_new(size);
        if (b && need > a->block_size) {
            /* An oversized request gets its own block behind the current
             * one, so the current block's free space is not wasted. */
            nb->next = b->next;
            b->next = nb;
            nb->used = need;
            a->total_used += need;
            return nb->data;
        }
        nb->next = b;
        a->head = b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->total_used += need;
    return p;
}

void *arena_zalloc(Arena *a, size_t n)
{
    void *p = arena_alloc(a, n);
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = arena_alloc(a, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

size_t arena_used(const Arena *a) { return a->total_used; }
