/*
 * sink_util.h: helpers the database sink writers share (sink_pg.c,
 * sink_sqlite.c). Private to runtime/.
 */
#ifndef WEIR_RUNTIME_SINK_UTIL_H
#define WEIR_RUNTIME_SINK_UTIL_H

#include <stdbool.h>

#include "arena.h"
#include "buf.h"
#include "sink.h"

/* Appends name as a "double-quoted" SQL identifier. */
void sink_put_ident(Buf *b, const char *name);

/* Splits "s.t" or "t" (parts may be "double-quoted", "" inside quotes is a
 * quote) into up to two parts allocated in a; unquoted parts are folded to
 * lower case when fold is set (PostgreSQL's rule). Returns the number of
 * parts (1-2), or -1 when the name is malformed. */
int sink_split_name(Arena *a, const char *s, char *parts[2], bool fold);

/* The options every database sink takes, checked at open: the location
 * option loc_key ('url', 'path') and 'table' must be set, create_table
 * must be a boolean (default false), and an upsert sink needs a primary
 * key. Fills *loc, *table and *create. @return 0, or <0 with 22023. */
int sink_db_options(const RtSinkSpec *spec, const char *loc_key, const char **loc, const char **table,
                    bool *create, WError *err);

/* The sink option on_error: 'skip' (default; *skip = true) or 'fail'. What
 * a database target rejects row by row (SQLSTATE class 22 data exception
 * or 23 integrity violation: a value too long, a CHECK, NOT NULL or foreign
 * key) is, under 'skip', written to the target's weir_sink_rejects table in
 * the epoch's own transaction and the rest of the epoch is applied; under
 * 'fail' the epoch fails and is retried, so the sink stops there. */
int sink_on_error(const RtSinkSpec *spec, bool *skip, WError *err);

/* Whether a target's error is about one row (classes 22 and 23). */
bool sink_row_level(const char *sqlstate);

/* A row as a JSON object of its columns' text forms (NULL as null), for
 * weir_sink_rejects.row_data. */
void sink_row_json(Buf *out, int n_cols, const char *const *names, const Value *row);

#endif
