/*
 * engine_int.h: the Engine and the Session, shared by engine.c (engine
 * thread, checkpoints, adding and removing catalog objects), session.c
 * (dispatch), the commands (commands.h) and the other server files. The
 * catalog's objects and their API are in catalog.h. Not for use outside
 * server/.
 */
#ifndef WEIR_SERVER_ENGINE_INT_H
#define WEIR_SERVER_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine.h"
#include "kafka.h"
#include "parser.h"
#include "planner.h"
#include "runtime.h"
#include "storage.h"
#include "weir_limits.h"
#include "catalog.h"

/* One taken checkpoint, for the weir_checkpoints system view. */
typedef struct CkptRecord {
    uint64_t epoch;
    int64_t started_us;       /* wall clock, microseconds since the epoch */
    int64_t duration_us;
    uint64_t bytes;           /* written by the LMDB commit */
    uint64_t rows;
} CkptRecord;

#define CKPT_HISTORY 64

/* A database user (cmd_user.c). The built-in superuser USER_BOOTSTRAP is
 * listed only once it has a password. */
#define USER_BOOTSTRAP "weir"

typedef struct EngineUser {
    uint64_t id;              /* catalog id */
    char *name;
    char *verifier;           /* SCRAM-SHA-256$..., NULL = no password (cannot log in with SCRAM) */
} EngineUser;

struct Engine {
    pthread_mutex_t lock;     /* guards everything below; held by statements and engine steps */
    pthread_cond_t progress;  /* broadcast after every engine step */
    StorEnv *stor;
    RtEnv rt;
    char *data_dir;
    char *kafka_bootstrap;
    Catalog *cat;                  /* every source, table, view and sink (catalog.h) */
    RtKafkaProducer *producer;     /* for INSERT INTO a source; opened on first use */
    char *producer_bootstrap;
    uint64_t epoch;                /* last committed checkpoint */
    int checkpoint_interval_ms;
    int64_t last_checkpoint_ms;
    int64_t work_seen_ms;          /* cluster_work_changed_ms already followed (follow_assignment) */
    bool dirty;                    /* work since the last checkpoint */
    uint64_t checkpoints;          /* taken since start */
    char last_checkpoint_error[512];
    /* The checkpoint in flight: its LMDB transaction is written and
     * fsync'd by ck_thread while the engine thread keeps stepping; the
     * engine thread finishes it (engine_checkpoint_poll). */
    bool ck_busy;
    pthread_t ck_thread;
    StorCheckpoint *ck;
    uint64_t ck_epoch;
    int64_t ck_started_us;
    int ck_rc;
    WError ck_err;
    atomic_bool ck_written;        /* ck_thread is done */
    bool ck_thread_started;        /* ck_thread must be joined */
    CkptRecord history[CKPT_HISTORY]; /* ring of the last checkpoints */
    int n_history;
    pthread_t thread;
    bool thread_started;
    bool stop;
    struct Subscription *subs;     /* changefeeds (subscribe.c), a list */
    int n_subs;
    atomic_int n_sessions;         /* open pgwire sessions */
    /* --state-memory-limit: dirty operator state (bytes) is memory only a
     * checkpoint releases. Over the limit the engine checkpoints at once,
     * and while it stays over (a checkpoint in flight, or failing: disk
     * full) views are not stepped: their input waits in Kafka. */
    uint64_t state_limit;          /* 0 = none */
    uint64_t state_dirty;          /* last measured, bytes */
    bool paused;                   /* views not stepped: over the limit */
    bool ck_failing;               /* the last checkpoint attempt failed */
    uint64_t early_checkpoints;    /* started because of the limit */
    struct Session *sessions;      /* every open session (pg_stat_activity), under lock */
    int n_users, cap_users;        /* cmd_user.c */
    EngineUser *users;
    /* A weir cluster (cluster.c), NULL outside one. catalog_next: the
     * catalog topic offsets this node has applied (the next it will);
     * written into every checkpoint (metadata cluster/catalog_next) with
     * the cluster's name and this node's id. */
    struct Cluster *cluster;
    int64_t catalog_next;
    char *rt_cluster;              /* --cluster from the start (RtEnv.cluster, views planned for it); NULL outside */
    char *cluster_name, *node_id;  /* the identity recorded in the data directory; NULL outside a cluster */
    /* For the one statement running under the lock (cluster_gather.c): the
     * session's weir.read_key_groups (another node reading our key groups),
     * and the gathered rows of the distributed views a SELECT scans. */
    const char *read_key_groups;
    struct ClusterGather *gather;
};

/* A client session: settings, and nothing shared. */
typedef struct Session {
    Engine *e;
    char *user;
    int n_settings;
    char **keys;
    char **values;
    bool in_txn;              /* between BEGIN and COMMIT/ROLLBACK (statements still apply at once) */
    const struct WTz *tz;     /* TimeZone (NULL: UTC), current on the thread while a query string runs */
    /* For pg_stat_activity; written under the engine lock (the catalog reads them there). */
    struct Session *next;     /* in Engine.sessions */
    int32_t pid;              /* the connection's BackendKeyData pid, 0 before the first statement */
    char client_addr[64];
    char *startup_app;        /* application_name of the startup packet */
    int64_t started_us, query_start_us;   /* wall clock */
    char *query;              /* the last query string (at most 1024 bytes), NULL before one */
    bool active;              /* a query string is running */
    struct Cursor *cursors;   /* DECLAREd and not yet closed (cursor.c); engine lock held to change */
    int n_cursors;
    /* Applying a record of a cluster's catalog topic (session_apply): its
     * statements run here, and apply_next (the offset after the record)
     * becomes Engine.catalog_next with them. */
    bool applying;
    int64_t apply_next;
} Session;

/* engine.c */
int engine_add_object(Engine *e, CatObj *o, bool persist, WError *err);
int engine_remove_object(Engine *e, CatObj *o, WError *err);
/* Renames o to new_name and persists its catalog entry (the stored CREATE
 * text is kept as written: replay takes the name from the entry). The
 * caller has checked that the name is free and nothing depends on o. */
int engine_rename_object(Engine *e, CatObj *o, const char *new_name, WError *err);
int engine_checkpoint(Engine *e, WError *err);        /* with the lock held */
/* Wait for the checkpoint in flight, if any, and finish it (lock held).
 * Anything that closes a dataflow or drops a table calls this first: the
 * checkpoint holds the tables until it finishes. A failure is recorded
 * (last_checkpoint_error, the log) here. @return its result; err may be NULL. */
int engine_checkpoint_wait(Engine *e, WError *err);
/* The epoch changes applied now belong to: after the last committed one
 * and after the one in flight, if any. */
static inline uint64_t engine_open_epoch(const Engine *e) { return (e->ck_busy ? e->ck_epoch : e->epoch) + 1; }
/* The state of one planning call's view of the catalog (engine_plan_catalog):
 * the caller's, usually on its stack, for as long as the PlanCatalog is used. */
typedef struct PlanCatCtx {
    Engine *e;
    Arena *a;
    CatObj *owner;            /* the object being planned: its state table ids go here */
    bool replay;              /* hand back owner's stored ids in order, allocate none */
    bool dry_run;             /* an ad hoc query or EXPLAIN: made-up ids, nothing stored */
    int next_replay;
    uint64_t fake;
    bool id_failed;           /* an id could not be handed out: the planner got 0 */
    WError id_err;            /* why (the first failure) */
} PlanCatCtx;

/* The planner's view of the catalog, its state in *ctx (see above); system
 * views are built in `a` (the statement arena) when a statement names them.
 * A sink's query view is hidden from lookups. */
PlanCatalog engine_plan_catalog(Engine *e, PlanCatCtx *ctx, CatObj *owner, bool replay, bool dry_run, Arena *a);
/* After a planning call that may allocate state table ids (replay or not
 * dry_run): 0, or -1 with err when the planner was handed id 0 because an
 * id could not be allocated (the storage error: 58030 for an I/O error,
 * 53100 for a full disk) or, at start, the object's catalog entry holds
 * fewer ids than its plan asks for (XX000). The plan must then be
 * discarded: it names state table 0. */
int engine_plan_ids_ok(const PlanCatCtx *ctx, WError *err);
/* Starts a view's dataflow and attaches its sinks (lock held). */
int engine_start_view(Engine *e, CatObj *view, WError *err);
/* Detaches a view's sinks and stops its dataflow. */
void engine_stop_view(Engine *e, CatObj *view);
/* Swaps the names of a and b (in memory; both entries are written by the
 * next checkpoint). */
void engine_swap_names(Engine *e, CatObj *a, CatObj *b);
/* ALTER MATERIALIZED VIEW v RESUME: a view stopped by a bad record skips
 * that record and runs again; a view stopped otherwise is retried now; a
 * running view is left alone. Lock held. */
int engine_resume_view(Engine *e, CatObj *view, WError *err);


/* subscribe.c: changefeeds over a view (SUBSCRIBE, HTTP Server-Sent Events). */
#define SUB_MAX_COLS WEIR_MAX_COLUMNS
#define SUB_MAX_QUEUE 100000      /* events a consumer may fall behind before it is cut off */
#define SUB_HISTORY 100000        /* recent changes a view keeps for consumers that resume... */
#define SUB_HISTORY_BYTES (8u << 20) /* ...in at most this much memory */

typedef struct Subscription Subscription;

/* The visible columns of a view, as a changefeed shows them. */
typedef struct SubSchema {
    const char *view;
    uint64_t epoch;               /* the snapshot's epoch: the epoch in progress when it was taken */
    int n_cols;
    const char *names[SUB_MAX_COLS];
    TypeId types[SUB_MAX_COLS];
    /* WITH (envelope = 'upsert'): a change is an upsert (diff +1) or a
     * delete (diff -1) of the key in columns key[0..n_key) of the row. */
    bool upsert;
    int n_key;
    int key[SUB_MAX_COLS];
} SubSchema;

/* SUBSCRIBE's WITH options. */
typedef struct SubOpts {
    bool snapshot, progress, upsert;
    int64_t after;                /* resume_after, -1 when not given */
} SubOpts;

typedef enum SubEventKind { SUB_ROW, SUB_PROGRESS } SubEventKind;

/* One queued event: a row of the snapshot, a change (diff +1/-1) of the
 * view's visible columns in text form (NULL = SQL NULL), or "epoch is
 * complete" (SUB_PROGRESS, no values). */
typedef struct SubEvent {
    struct SubEvent *next;
    SubEventKind kind;
    bool snapshot;
    uint64_t epoch;
    int diff;
    int n_vals;
    const char **vals;
    int *lens;
    size_t size;                  /* bytes of the allocation */
} SubEvent;

/* Takes v's snapshot (if asked) and taps its changes, in one critical
 * section: engine lock held. Errors: 42809 not a view, 55000 not running. */
int sub_open(Engine *e, CatObj *v, bool snapshot, Subscription **out, WError *err);
/* A subscription that resumes after epoch `after` (the consumer has every
 * change up to it and its progress event): the view's retained changes of
 * later epochs, then live ones, no snapshot. 55000 when those changes are
 * no longer (or not yet) retained, 22023 for an epoch not committed yet.
 * Engine lock held. */
int sub_open_after(Engine *e, CatObj *v, uint64_t after, Subscription **out, WError *err);
/* Waits up to timeout_ms (no engine lock needed) and takes every queued
 * event (*events, NULL on timeout; free with sub_events_free). Returns -1
 * with err once the subscription has ended (view stopped, consumer too slow)
 * and its queue is empty. */
int sub_take(Subscription *s, int timeout_ms, SubEvent **events, WError *err);
void sub_events_free(SubEvent *ev);
/* A SUB_ROW or SUB_PROGRESS event with copies of vals[0..n) (NULL = SQL NULL,
 * lens[i] their lengths), in one malloc'd block: free with sub_events_free. */
SubEvent *sub_event_new(SubEventKind kind, uint64_t epoch, int diff, int n, const char *const *vals, const int *lens);
/* SUBSCRIBE's WITH options (snapshot, progress) and COPY's (FORMAT text).
 * Returns 0, or -1 with err (42601 unknown option, 22023 bad value, 0A000). */
int sub_options(const AstSubscribe *sb, SubOpts *o, WError *err);
/* A change's second column: 1 / -1, or upsert / delete in the upsert envelope. */
const char *sub_diff_text(const SubSchema *sc, const SubEvent *ev);
/* Does the change show column i (a delete in the upsert envelope shows only its key)? */
bool sub_value_shown(const SubSchema *sc, const SubEvent *ev, int i);
/* A subscription as the options ask: sub_open or sub_open_after, in the
 * upsert envelope or not (42P10 for the upsert envelope of a view without
 * a key). Engine lock held. */
int sub_open_opts(Engine *e, CatObj *v, const SubOpts *o, Subscription **out, WError *err);
/* The view or table a SUBSCRIBE statement names, or NULL with err (42P01, 42809). Lock held. */
CatObj *sub_view(Engine *e, const AstStmt *st, WError *err);
/* Valid until sub_close. */
const SubSchema *sub_schema(const Subscription *s);
/* Detaches and frees s. Engine lock held. NULL is allowed. */
void sub_close(Subscription *s);
/* ALTER MATERIALIZED VIEW a SWAP WITH b, before the names change: every
 * subscription on a gets the difference a -> b (a's rows not in b as -1,
 * b's rows not in a as +1, in the open epoch) and then b's changes, and the
 * other way round. Lock held. */
int subs_view_swap(Engine *e, CatObj *a, CatObj *b, WError *err);
/* v's dataflow is about to stop: end every subscription on it (lock held). */
void subs_view_stopped(Engine *e, CatObj *v);
/* The visible columns of v (names borrowed from v); vis gets their indexes if not NULL. */
void sub_schema_init(CatObj *v, SubSchema *out, int *vis);
/* Runs SELECT * FROM v, handing each row to fn. Lock held. */
int view_snapshot(Engine *e, CatObj *v, RtRowFn fn, void *arg, WError *err);
/* The SUBSCRIBE statement: streams COPY rows until the client cancels.
 * Called with the engine lock held; releases it while streaming. */
int session_subscribe(Engine *e, const AstStmt *st, SrvResult *out, WError *err);

/* cursor.c: DECLARE ... CURSOR FOR {SELECT | SUBSCRIBE}, FETCH, CLOSE. Lock
 * held; FETCH releases it while it waits for a subscription's changes.
 * describe_only: emit FETCH's columns only. */
int cursor_declare(Engine *e, Session *s, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
int cursor_fetch(Engine *e, Session *s, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
int cursor_close(Engine *e, Session *s, const AstStmt *st, bool describe_only, SrvResult *out, WError *err);
/* COMMIT, ROLLBACK and the end of the session close every cursor. Lock held. */
void cursors_close_all(Session *s);

/* sysviews.c: weir_* system relations, NULL if name is not one. */
const CatRelation *sysview_lookup(Engine *e, const char *name, Arena *a);
/* The i-th system view's name (0, 1, ...), NULL past the last. */
const char *sysview_name(int i);
int engine_producer(Engine *e, const char *bootstrap, const RtKafkaProp *props, int n_props, RtKafkaProducer **out,
                    WError *err);


/* session.c */
/* A weir cluster's catalog record, applied on this node (cluster.c): runs
 * sql as user with the given settings (as a session would, the engine lock
 * taken per statement: NOT held by the caller), recording the outcome in
 * cap (pgwire.h; the caller frees cap->notices), and sets
 * Engine.catalog_next to catalog_next with it. Returns 0, or -1 when the
 * statement failed (cap->err). */
struct SrvCapture;
int session_apply(Engine *e, const char *user, const char *sql, int n_settings, const char *const *keys,
                  const char *const *vals, int64_t catalog_next, struct SrvCapture *cap);
/* Session settings (SET/SHOW): the value in s (the default when unset), NULL
 * for an unknown name; and the list of known names with their defaults. */
const char *session_setting(Session *s, const char *name);
bool session_setting_is_set(Session *s, const char *name);   /* changed by SET */
int session_setting_count(void);
/* SrvEngine.idle_timeout_ms: the session's idle_session_timeout. */
long session_idle_timeout(void *ctx, void *sess);
/* SrvEngine.in_transaction. */
bool session_in_transaction(void *ctx, void *sess);
const char *session_setting_name(int i);
const char *session_setting_default(int i);

/* pgcatalog.c: one statement over pg_catalog / information_schema (see
 * pgcatalog.h), sql[0..len). Takes the engine lock while it copies the
 * catalog; emits through out. Returns 0, or -1 with err (not yet sent). */
int pgcat_query(Engine *e, Session *s, const char *sql, int len, int n_params, const char *const *params,
                bool describe_only, long max_rows, SrvResult *out, WError *err);
/* The Postgres type OID a column declared type of pgcatalog.sql stands for (25 if unknown). */
uint32_t pgcat_decltype_oid(const char *decl);

void session_query(void *ctx, void *sess, const char *sql, SrvResult *out);
void session_execute(void *ctx, void *sess, const char *sql, int n_params, const char *const *params,
                     bool describe_only, long max_rows, SrvResult *out);
/* SrvEngine.param_types: the planner's inference (plan_param_types) for a
 * prepared statement; statements over the system catalogs are left alone. */
void session_param_types(void *ctx, void *sess, const char *sql, int n_params, uint32_t *oids);
void *session_open(void *ctx, const char *user, const char *database, WError *err);
void session_close(void *ctx, void *sess);

#endif
