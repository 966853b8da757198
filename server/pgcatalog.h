/*
 * pgcatalog.h: the Postgres system catalogs (pg_catalog, information_schema)
 * as clients see them, answered from an in-memory SQLite database built from
 * weir's catalog (pgcatalog.c), and the translation of Postgres' SQL dialect
 * into SQLite's that makes client catalog queries run there (pgtranslate.c).
 *
 * Private to server/ (see server/README.md, "System catalogs").
 */
#ifndef WEIR_SERVER_PGCATALOG_H
#define WEIR_SERVER_PGCATALOG_H

#include <stdbool.h>

#include "arena.h"
#include "buf.h"
#include "error.h"

#define PGT_MAX_STMTS 256

/* Splits sql at top-level semicolons (outside strings, quoted identifiers,
 * comments, dollar quotes and parentheses). Fills starts[i], ends[i] (byte
 * offsets, end exclusive, without the semicolon) for up to max pieces that
 * contain more than blanks and comments. Returns the number of pieces, or -1
 * when there are more than max. */
int pgt_split(const char *sql, int *starts, int *ends, int max);

/* True when sql[start..end) references the system catalogs: a name
 * qualified by pg_catalog or information_schema, a relation named pg_...
 * where a relation goes (after FROM, JOIN or TABLE, or a comma of a FROM
 * list), a call of a pg_... function or of one of the catalog functions
 * clients call (version(), current_database(), format_type(),
 * has_table_privilege(), ...), a reg* type, or current_user, session_user,
 * current_role, current_catalog, current_schema. A column or an alias
 * spelled pg_... is not a reference: SELECT pg_score FROM t stays with weir.
 * Such a statement, if it is a query (pgt_is_query), is answered by
 * pgcat_query instead of weir's planner. */
bool pgt_names_catalog(const char *sql, int start, int end);

/* True when sql[start..end) is a query (begins with SELECT, WITH, VALUES,
 * TABLE or a parenthesis): only queries are answered from the catalogs;
 * SET search_path = pg_catalog and the like stay with weir. */
bool pgt_is_query(const char *sql, int start, int end);

/* Translates one Postgres statement sql[0..len) into SQLite's dialect
 * (see pgtranslate.c for the rules). *out is NUL-terminated and lives in a.
 * Errors: 42601 (unbalanced parentheses, a cast with no operand),
 * 0A000 (a construct with no translation), with the byte position. */
int pgt_translate(const char *sql, int len, Arena *a, char **out, WError *err);

#endif
