/*
 * catalog.h: the server's catalog: every source, table, materialized view
 * and sink, in creation order, and the format of their catalog entries.
 *
 * The catalog is the one list of named objects. Every other server file
 * finds objects with cat_find and walks them with CAT_FOREACH (optionally
 * filtered by kind); only catalog.c sees the list itself. Adding and
 * removing objects with their side effects (persisting the entry, stopping
 * a dataflow, dropping state tables) is the engine's (engine_add_object,
 * engine_remove_object in engine_int.h), which calls cat_insert/cat_unlink.
 *
 * A catalog entry (storage.h's StorCatalogEntry) holds the object's kind,
 * name and CREATE statement, the state table ids its plan was given, and
 * optional trailing values (streaming_parallelism, time zone, planner
 * revision): cat_entry_encode writes it, cat_entry_decode reads it back at
 * start, so the entry format is in this one file.
 *
 * Threads: everything here runs with the engine lock held (Engine.lock);
 * CatObj pointers are valid until the object is removed (DROP), which also
 * happens under the lock.
 */
#ifndef WEIR_SERVER_CATALOG_H
#define WEIR_SERVER_CATALOG_H

#include <stdbool.h>
#include <stdint.h>

#include "planner.h"
#include "runtime.h"
#include "storage.h"

#define CATALOG_KIND_USER 100      /* StorCatalogEntry.kind of a user (cmd_user.c) */

/* CAT_VIEW, CAT_TABLE: the object's dataflow (a table has one of its own). */
typedef struct CatFlow {
    PlanView *plan;           /* in the object's arena; NULL until planned */
    RtDataflow *df;           /* running; NULL while stopped */
    /* RtStats.rows_out when the last checkpoint committed; equal to the
     * current count means nothing changed since (an SSE resume needs no snapshot). */
    uint64_t changes_at_commit;
    /* Its recent changes, kept from its first subscriber on (SUB_HISTORY
     * changes at most), so a consumer that reconnects can resume after an
     * epoch it has (subscribe.c); NULL before. */
    struct Subscription *history;
    /* Why the dataflow is not running ("" when it runs, or has not failed
     * yet). failed: it stopped at a bad record of a source with on_error =
     * 'fail' (fail says which) or lost its topic, and waits for ALTER
     * MATERIALIZED VIEW ... RESUME (not retried); otherwise a stopped view
     * is retried every 2 s. */
    char stop_error[512];
    bool failed;
    RtFailedRecord fail;
    int n_skips;              /* records RESUME said to skip, handed to every reopened dataflow */
    RtFailedRecord *skips;
} CatFlow;

/* CAT_VIEW: how the view was made, and what it belongs to. */
typedef struct CatView {
    struct CatObj *late_of;   /* a LATE ROWS INTO relation: the view that owns it (not persisted itself) */
    /* The query of a CREATE SINK ... AS query. Its catalog entry holds the
     * CREATE SINK text; it is hidden from the planner's lookups and from
     * SHOW/pg_catalog, and goes with its sink (sink_owner, set once the
     * sink exists; a view left without one at start is dropped). */
    bool sink_query;
    struct CatObj *sink_owner;
    /* The session's streaming_parallelism at CREATE (persisted after the
     * table ids when > 1), so the view is re-planned with the same shape. */
    int parallelism;
    /* The planner revision it was created under (PLAN_REV_CURRENT then;
     * persisted when > 0; 0 in entries from before revisions), so a later
     * weir plans it by the same rules (planner.h). */
    int plan_rev;
} CatView;

/* CAT_SINK: the view it reads and the connector that delivers. */
typedef struct CatSink {
    struct CatObj *from;      /* the view it reads */
    RtSinkSpec spec;          /* in the object's arena */
    int *view_cols;           /* in the object's arena: view column of each sink column */
    RtSink *rt;               /* attached to from->flow.df while that runs */
} CatSink;

/* CAT_SOURCE, CAT_TABLE: changed by ALTER SOURCE. */
typedef struct CatSource {
    /* The statement that gives its on_error/error.topic now (NULL: none
     * set), stored in checkpoint metadata "alter/<id>" and applied after
     * the CREATE at start. altered: to be written by the next checkpoint. */
    char *alter_sql;
    bool altered;
} CatSource;

/* One catalog object, tagged by kind: its definition (what its catalog
 * entry stores), then one part per kind. A part means something only for
 * the kinds it names and is zero for the others (they are not a union, so
 * a test such as `o->flow.df` is safe on any kind). Owned by the Catalog
 * once added; freed by cat_obj_free. */
typedef struct CatObj {
    uint64_t id;
    CatKind kind;
    char *name;
    char *sql;                /* the CREATE statement as the user wrote it */
    Arena *arena;             /* the object's lifespan: relation, plan, sink spec */
    CatRelation rel;          /* what the planner sees (not for sinks) */
    int n_table_ids;          /* state tables, in the order the planner asked for them */
    uint64_t *table_ids;
    /* Names this object had before ALTER ... RENAME: kept until the object
     * is freed, since running operators and changefeeds borrow o->name. */
    int n_old_names;
    char **old_names;
    /* The catalog entry changed in memory and goes into the next
     * checkpoint's transaction (ALTER MATERIALIZED VIEW ... SWAP WITH: the
     * names commit together with the sinks' switch-over); cat_in_ck: it is
     * in the checkpoint in flight (dirty again if that one fails). */
    bool cat_dirty;
    bool cat_in_ck;
    /* The session TimeZone it was created in (NULL: UTC): its statement is
     * planned again in it at start (a view's expressions run in it), kept
     * in the catalog entry after the state table ids. */
    const struct WTz *tz;
    CatFlow flow;             /* CAT_VIEW, CAT_TABLE */
    CatView view;             /* CAT_VIEW */
    CatSink sink;             /* CAT_SINK */
    CatSource source;         /* CAT_SOURCE, CAT_TABLE */
} CatObj;

typedef struct Catalog Catalog;

/* An empty catalog; never NULL (allocation failure aborts, as xmalloc). */
Catalog *cat_new(void);
/* Frees the list and every object still in it (cat_obj_free, sinks first:
 * after a SWAP a sink may hang off a view created after it). NULL is allowed. */
void cat_free(Catalog *c);
/* Frees one object (not in a catalog any more), detaching its sink first. */
void cat_obj_free(CatObj *o);

/* The number of objects. */
int cat_count(const Catalog *c);
/* The object named name (any kind, sink queries included), or NULL. */
CatObj *cat_find(const Catalog *c, const char *name);
/* Appends o (takes ownership). The caller has checked the name is free. */
void cat_insert(Catalog *c, CatObj *o);
/* Removes o from the list without freeing it (the caller frees it). */
void cat_unlink(Catalog *c, CatObj *o);

/* Kind filters for iteration: CAT_KINDS(CAT_VIEW) | CAT_KINDS(CAT_TABLE), or CAT_ANY. */
#define CAT_KINDS(k) (1u << (unsigned)(k))
#define CAT_ANY 0xffffffffu
#define CAT_FLOWS (CAT_KINDS(CAT_VIEW) | CAT_KINDS(CAT_TABLE))   /* the objects with a dataflow */

/* An iteration in creation order over the objects of the kinds asked. The
 * loop may remove the object it is on (and objects created after it: a
 * view's late-rows relation), nothing before it. */
typedef struct CatIter {
    const Catalog *cat;
    unsigned kinds;
    int next;                 /* index of the next object to look at */
    CatObj *cur;              /* the object returned last */
    bool more;                /* for CAT_FOREACH's outer loop */
} CatIter;

CatIter cat_iter(const Catalog *c, unsigned kinds);
/* The next object, or NULL at the end. */
CatObj *cat_iter_next(CatIter *it);

/* for each object o (a CatObj *, declared by the macro) of the kinds:
 *     CAT_FOREACH(e->cat, CAT_ANY, o) { ... }
 * break and continue work as in a plain for loop. */
#define CAT_FOREACH(c, kinds, o)                                                                  \
    for (CatIter o##_it = cat_iter((c), (kinds)); o##_it.more; o##_it.more = false)               \
        for (CatObj *o; (o = cat_iter_next(&o##_it)) != NULL;)

/* ---- catalog entries ---- */

/* Appends o's entry body (kind, name, statement, state table ids, optional
 * values) to b: what cat_entry_put and a checkpoint's catalog writes store. */
void cat_entry_body(const CatObj *o, Buf *b);
/* Writes o's entry (kind, name, statement, table ids, optional values) in
 * its own durable transaction. Errors: storage.h's stor_catalog_put. */
int cat_entry_put(StorEnv *stor, const CatObj *o, WError *err);

/* A decoded entry: an object to re-create from its statement, or a user. */
typedef struct CatEntry {
    CatObj *obj;              /* NULL for a user entry; else the caller owns it */
    char *user_name;          /* CATALOG_KIND_USER: malloc'd, the caller frees */
    char *user_verifier;      /* CATALOG_KIND_USER: malloc'd or NULL (no password) */
} CatEntry;

/* Decodes a stored entry body (from stor_catalog_scan): the object gets its
 * id, kind, name, statement, table ids, streaming_parallelism, planner
 * revision and time zone (an unknown zone is logged and replaced by UTC).
 * Returns 0, or -1 with err XX000 for a corrupt entry. */
int cat_entry_decode(uint64_t id, const void *body, size_t len, CatEntry *out, WError *err);

#endif
