/*
 * engine_int.h: shared by engine.c (catalog, engine thread, checkpoints)
 * and session.c (statement execution). Not for use outside server/.
 */
#ifndef WEIR_SERVER_ENGINE_INT_H
#define WEIR_SERVER_ENGINE_INT_H

#include <pthread.h>

#include "engine.h"
#include "kafka.h"
#include "parser.h"
#include "planner.h"
#include "runtime.h"
#include "storage.h"

/* One catalog object: its definition, and for views the running dataflow. */
typedef struct CatObj {
    uint64_t id;
    CatKind kind;
    char *name;
    char *sql;                /* the CREATE statement as the user wrote it */
    Arena *arena;             /* the object's lifespan: relation, plan */
    CatRelation rel;
    PlanView *plan;           /* CAT_VIEW */
    RtDataflow *df;           /* CAT_VIEW: running */
    int n_table_ids;          /* state tables, in the order the planner asked for them */
    uint64_t *table_ids;
} CatObj;

struct Engine {
    pthread_mutex_t lock;     /* guards everything below; held by statements and engine steps */
    pthread_cond_t progress;  /* broadcast after every engine step */
    StorEnv *stor;
    RtEnv rt;
    char *data_dir;
    char *kafka_bootstrap;
    int n_objs, cap_objs;
    CatObj **objs;
    RtKafkaProducer *producer;     /* for INSERT INTO a source; opened on first use */
    char *producer_bootstrap;
    uint64_t epoch;                /* last committed checkpoint */
    int checkpoint_interval_ms;
    int64_t last_checkpoint_ms;
    bool dirty;                    /* work since the last checkpoint */
    uint64_t checkpoints;          /* taken since start */
    char last_checkpoint_error[512];
    pthread_t thread;
    bool thread_started;
    bool stop;
};

/* A client session: settings, and nothing shared. */
typedef struct Session {
    Engine *e;
    char *user;
    int n_settings;
    char **keys;
    char **values;
} Session;

/* engine.c */
CatObj *engine_find(Engine *e, const char *name);
int engine_add_object(Engine *e, CatObj *o, bool persist, WError *err);
int engine_remove_object(Engine *e, CatObj *o, WError *err);
void cat_obj_free(CatObj *o);
int engine_checkpoint(Engine *e, WError *err);        /* with the lock held */
PlanCatalog engine_plan_catalog(Engine *e, CatObj *owner, bool replay, bool dry_run);
int engine_producer(Engine *e, const char *bootstrap, RtKafkaProducer **out, WError *err);
int64_t now_ms(void);

/* session.c */
/* Creates a source or view from its statement. replay: at start, from the
 * catalog (no persistence, stored table ids). Lock held. */
int session_create_source(Engine *e, const AstStmt *st, const char *sql, CatObj *replay_obj, WError *err);
int session_create_view(Engine *e, const AstStmt *st, const char *sql, CatObj *replay_obj, WError *err);
void session_query(void *ctx, void *sess, const char *sql, SrvResult *out);
void session_execute(void *ctx, void *sess, const char *sql, int n_params, const char *const *params,
                     bool describe_only, long max_rows, SrvResult *out);
void *session_open(void *ctx, const char *user, const char *database, WError *err);
void session_close(void *ctx, void *sess);

#endif
