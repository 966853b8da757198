/*
 * pgcatalog_int.h: shared by pgcatalog.c (building the catalog database,
 * running statements) and pgcatalog_fn.c (the SQL functions registered in
 * it). The only header that includes <sqlite3.h> in server/.
 */
#ifndef WEIR_SERVER_PGCATALOG_INT_H
#define WEIR_SERVER_PGCATALOG_INT_H

#include <sqlite3.h>
#include <stdbool.h>

#include "buf.h"
#include "engine_int.h"

#define OID_USER_BASE 16384      /* a weir object's OID: this + its catalog id */
#define NSP_CATALOG 11
#define NSP_PUBLIC 2200
#define NSP_INFO 13000

/* What the SQL functions need of the session; lives as long as the database. */
typedef struct PgCtx {
    Engine *e;
    Session *s;
    SrvResult *out;           /* polled for cancellation and statement_timeout */
} PgCtx;

/* Registers every function psql and drivers call (format_type,
 * pg_get_userbyid, regclass, regexp for ~, ...). Returns 0 or -1. */
int pgcat_register_functions(sqlite3 *db, PgCtx *c);

/* Appends v (NULL = NULL) to a Postgres array literal being built in b. */
void pgcat_array_put(Buf *b, const char *v, bool first);

#endif
