/*
 * sink_util.h: helpers the database sink writers share (sink_pg.c,
 * sink_sqlite.c). Private to runtime/.
 */
#ifndef WEIR_RUNTIME_SINK_UTIL_H
#define WEIR_RUNTIME_SINK_UTIL_H

#include <stdbool.h>

#include "arena.h"
#include "buf.h"

/* Appends name as a "double-quoted" SQL identifier. */
void sink_put_ident(Buf *b, const char *name);

/* Splits "s.t" or "t" (parts may be "double-quoted", "" inside quotes is a
 * quote) into up to two parts allocated in a; unquoted parts are folded to
 * lower case when fold is set (PostgreSQL's rule). Returns the number of
 * parts (1-2), or -1 when the name is malformed. */
int sink_split_name(Arena *a, const char *s, char *parts[2], bool fold);

#endif
