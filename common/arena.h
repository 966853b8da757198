/*
 * arena.h: bump allocation by lifespan.
 *
 * Memory with one lifespan (a connection, a statement, a view's plan, a
 * chunk) comes from one arena and is released all at once by arena_reset()
 * or arena_free(). Allocation never fails silently: on out-of-memory the
 * process aborts with a message, because every caller would otherwise have
 * to unwind half-built plans; limits on sizes that come from outside are
 * checked by callers before they allocate.
 */
#ifndef WEIR_COMMON_ARENA_H
#define WEIR_COMMON_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

/* A new empty arena whose blocks are at least block_size bytes (0 = 64 KiB). */
Arena *arena_new(size_t block_size);
/* Release every block. NULL is allowed. */
void arena_free(Arena *a);
/* Forget every allocation but keep the first block for reuse. */
void arena_reset(Arena *a);
/* n bytes aligned to 16, uninitialized; valid until reset/free. */
void *arena_alloc(Arena *a, size_t n);
/* n zeroed bytes. */
void *arena_zalloc(Arena *a, size_t n);
/* Copies of strings and byte ranges (the copy of s[0..n) is NUL-terminated). */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bytes handed out since the last reset (for limits and metrics). */
size_t arena_used(const Arena *a);

/* Aborting wrappers around malloc for objects outside arenas: they never
 * return NULL (out of memory aborts with "weir: out of memory allocating N
 * bytes" in the log). The caller owns the result and frees it with free(). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* A copy of s; of at most the first n bytes of s, NUL-terminated (s need
 * not be NUL-terminated within n bytes, as strndup). */
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

#endif
