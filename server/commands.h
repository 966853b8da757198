/*
 * commands.h: the statements' bodies, one file per statement family
 * (PostgreSQL's commands/), called by session.c's dispatch (exec_stmt)
 * and, for the CREATE statements, by the catalog's replay at start.
 * Private to server/. Every function here runs with the engine lock held.
 */
#ifndef WEIR_SERVER_COMMANDS_H
#define WEIR_SERVER_COMMANDS_H

#include "engine_int.h"

/* session.c: helpers the commands share. */
const char *kind_word(CatKind k);
void one_text_column(SrvResult *out, const char *name);
void text_row(SrvResult *out, int n, const char **vals);

/* cmd_source.c: the source's "properties.*" options as librdkafka settings. */
int source_props(const CatRelation *r, RtKafkaProp *props, int max);

/* cmd_view.c */
bool allow_unbounded(Session *s);
int session_parallelism(Session *s);
int create_view(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err);
void sink_query_stmt(const AstCreateSink *cs, const AstStmt *st, const char *name, AstCreateView *cv, AstStmt *vst);
char *sink_query_name(const char *sink);

/* cmd_sink.c */
int create_sink(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err);

/* cmd_drop.c */
int rename_one(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
int drop_one(Engine *e, const AstDrop *d, const char *name, int pos, SrvResult *out, WError *err);

/* cmd_insert.c */
int insert_into(Engine *e, const AstStmt *st, SrvResult *out, WError *err);

/* cmd_query.c */
int run_select(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
int explain(Engine *e, Session *s, const AstStmt *st, SrvResult *out, WError *err);

/* cmd_flush.c */
int flush(Engine *e, SrvResult *out, WError *err);
void dead_letters_wait(Engine *e, SrvResult *out);

#endif
