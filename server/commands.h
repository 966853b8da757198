/*
 * commands.h: the statements' bodies, one file per statement family
 * (PostgreSQL's commands/). session.c's exec_stmt dispatches a parsed
 * statement to one cmd_* function (or one of the older names below); the
 * catalog's replay at start (engine.c) calls the session_create_* forms.
 * Private to server/. Every function here runs with the engine lock held
 * (some release it while they wait, as said); each returns 0, or -1 with
 * err set (a SQLSTATE, a message, the statement's position) and nothing
 * yet sent to the client.
 */
#ifndef WEIR_SERVER_COMMANDS_H
#define WEIR_SERVER_COMMANDS_H

#include "engine_int.h"

/* session.c: result helpers the commands share. */
const char *cmd_kind_word(CatKind k);          /* "source", "table", "materialized view", "sink" */
void cmd_one_text_column(SrvResult *out, const char *name);
void cmd_text_row(SrvResult *out, int n, const char **vals);
/* The session's streaming_allow_unbounded_state (false without a session). */
bool session_allow_unbounded(Session *s);
/* The session's streaming_parallelism (checked by SET), 1 without a session. */
int session_parallelism(Session *s);

/* cmd_source.c: CREATE SOURCE / CREATE TABLE (the existence check, then
 * session_create_source) and ALTER SOURCE|TABLE ... SET. */
int cmd_create_source(Engine *e, const AstStmt *st, const char *sql, SrvResult *out, WError *err);
int cmd_alter_source(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
/* Creates a source, view or sink from its statement. replay: at start, from the
 * catalog (no persistence, stored table ids). Lock held. */
int session_create_source(Engine *e, const AstStmt *st, const char *sql, CatObj *replay_obj, WError *err);
int session_create_view(Engine *e, const AstStmt *st, const char *sql, CatObj *replay_obj, WError *err);
int session_create_sink(Engine *e, const AstStmt *st, const char *sql, CatObj *replay_obj, WError *err);
/* ALTER SOURCE|TABLE name SET (on_error = ..., error.topic = ...). replay:
 * applying the stored statement at start (no checkpoint, no view restarts).
 * Otherwise views stopped at a bad record of the source restart under the
 * new policy, and a checkpoint stores the change. Lock held. */
int session_alter_source(Engine *e, const AstStmt *st, bool replay, WError *err);

/* cmd_view.c: CREATE MATERIALIZED VIEW, the statement (the name check,
 * the tag) and its body, cmd_view_build: plan the view, start its dataflow
 * and add it to the catalog (s: the session whose settings apply, NULL at
 * replay; replay: the stored object, else NULL), also used by replay and
 * by CREATE SINK ... AS query. And ALTER MATERIALIZED VIEW ... RESUME. */
int cmd_create_view(Engine *e, Session *s, const AstStmt *st, const char *sql, SrvResult *out, WError *err);
int cmd_view_build(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err);
int cmd_resume_view(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
/* The CREATE MATERIALIZED VIEW a CREATE SINK ... AS query runs, built in
 * *cv and *vst (which borrow cs), and its name (the caller frees it). */
void cmd_sink_query_stmt(const AstCreateSink *cs, const AstStmt *st, const char *name, AstCreateView *cv,
                         AstStmt *vst);
char *cmd_sink_query_name(const char *sink);

/* cmd_sink.c: CREATE SINK (FROM a view, or AS a query), the statement and
 * its body cmd_sink_build (also used by replay), as for views above. */
int cmd_create_sink(Engine *e, Session *s, const AstStmt *st, const char *sql, SrvResult *out, WError *err);
int cmd_sink_build(Engine *e, Session *s, const AstStmt *st, const char *sql, CatObj *replay, WError *err);

/* cmd_drop.c: DROP (each name of the statement) and ALTER ... RENAME TO. */
int cmd_drop(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
int cmd_drop_one(Engine *e, const AstDrop *d, const char *name, int pos, SrvResult *out, WError *err);
int cmd_rename(Engine *e, const AstStmt *st, SrvResult *out, WError *err);

/* cmd_insert.c: INSERT INTO a Kafka source (INSERT INTO a table goes to table_insert). */
int cmd_insert(Engine *e, const AstStmt *st, SrvResult *out, WError *err);

/* cmd_query.c: SELECT and EXPLAIN. */
int cmd_select(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
int cmd_explain(Engine *e, Session *s, const AstStmt *st, SrvResult *out, WError *err);
/* cmd_explain_analyze.c: EXPLAIN [ANALYZE] MATERIALIZED VIEW name: the plan
 * the view runs, with analyze each operator's live figures, as text lines
 * or one JSON document appended to out (also GET /api/views/<v>/analyze).
 * pos: the statement's, for errors. 42P01 no such object, 42809 not a
 * materialized view, 55000 (ANALYZE) the view is not running. */
int srv_explain_view(Engine *e, const char *name, int pos, bool analyze, bool json, Buf *out, WError *err);

/* cmd_flush.c: FLUSH (waits with the lock released) and CHECKPOINT
 * (synchronous; with a directory, a savepoint copy of the data directory). */
int cmd_flush(Engine *e, SrvResult *out, WError *err);
int cmd_checkpoint(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
void cmd_dead_letters_wait(Engine *e, SrvResult *out);

/* cmd_swap.c: ALTER MATERIALIZED VIEW a SWAP WITH b (lock held). */
int session_swap_view(Engine *e, const AstStmt *st, SrvResult *out, WError *err);

/* cmd_analyze.c: ANALYZE LATENESS (engine lock held; released while the log is read).
 * describe_only: check the statement and describe its first result set only. */
int srv_analyze_lateness(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
/* cmd_verify.c: VERIFY MATERIALIZED VIEW (engine lock held); describe_only as above. */
int srv_verify_view(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
/* The weir_verifications system view: the last VERIFY result per existing view. */
const CatRelation *verify_sysview(Engine *e, Arena *a);

/* cmd_user.c */
/* CREATE/ALTER/DROP USER (lock held). Errors: 42710, 42704, 55006, 0A000. */
int users_exec(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
/* SrvEngine.user_verifier: takes the lock. */
int users_verifier(void *ctx, const char *user, char *out, size_t n);
/* At start: a user entry of the catalog (lock held). */
void users_load(Engine *e, uint64_t id, const char *name, const char *verifier);
void users_free(Engine *e);

/* cmd_table.c: CREATE TABLE (o prepared by session_create_source: name, sql,
 * options; on failure the caller frees o) and the DML statements on
 * writable tables. Lock held. */
int table_create(Engine *e, CatObj *o, const AstCreateSource *cs, bool replay, WError *err);
int table_insert(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
/* Runs the ad hoc query sel and copies its visible rows into a (INSERT ...
 * SELECT): *rows[i] has *n_cols values, valid for a's lifespan. */
int table_query_rows(Engine *e, const AstSelect *sel, Arena *a, Value ***rows, int *n_rows, int *n_cols, WError *err);
/* v converted to column type t as INSERT assigns it (any castable value);
 * a cast error gets position pos. Strings are allocated in a. */
int table_assign(Arena *a, const Value *v, TypeId t, int pos, Value *out, WError *err);
int table_update(Engine *e, const AstStmt *st, SrvResult *out, WError *err);
int table_delete(Engine *e, const AstStmt *st, SrvResult *out, WError *err);

/* The planner revision a source's or table's columns are bound by (cmd_source.c). */
int source_rev(const CatObj *o);

/* ---- reads of distributed views (cluster_gather.c) ---- */

/* The rows of every distributed view a SELECT scans, gathered from their
 * owners before the query runs (see cluster_gather.c). */
typedef struct ClusterGather ClusterGather;

/* Called WITHOUT the engine lock (it takes it twice, briefly, and waits on
 * other nodes in between). For a SELECT in a cluster that scans distributed
 * views, *out gets their whole rows (NULL when there is nothing to gather:
 * no cluster, not a SELECT, no distributed view, or a query that does not
 * plan, which the normal path then reports). user is the session's, used to
 * connect to the other nodes. Errors: 57P03 a key group without a live
 * owner, 08006 an owner unreachable, 40001 a rebalance under the read,
 * 54000 more than 1 GiB to gather. */
int cluster_gather_prepare(Engine *e, const AstStmt *st, const char *user, ClusterGather **out, WError *err);
/* Whether df (of plan) holds every key group of its view on this node: a
 * view not distributed always; a distributed one only while this node owns
 * all of its key groups. Lock held. */
bool cluster_view_whole_here(RtDataflow *df, const PlanView *plan);
/* The gathered rows of the view whose rows are table_id, or NULL. Lock held. */
StorTable *cluster_gather_table(ClusterGather *g, uint64_t table_id);
/* Lock held. NULL is allowed. */
void cluster_gather_free(Engine *e, ClusterGather *g);

/* The remote side: checks a weir.read_key_groups request ("<view table
 * id>:<kg>,...") against what this node owns (lock held): 22023 malformed,
 * 42P01 no such view, 55000 not running, 40001 a group not (any more) here. */
int cluster_gather_check_request(Engine *e, const char *setting, WError *err);
int cluster_gather_parse_request(const char *s, uint64_t *table_id, uint16_t *kgs, int max, int *n, WError *err);
/* The system relation weir_key_group_rows (kg, key, value): the stored
 * entries of the requested key groups (e->read_key_groups), empty without
 * a request. */
const CatRelation *cluster_key_group_rows(Engine *e, Arena *a);

#endif
