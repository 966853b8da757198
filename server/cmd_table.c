/*
 * cmd_table.c: tables (CREATE TABLE) and the statements that write them
 * (INSERT, UPDATE, DELETE).
 *
 * A table is a small dataflow (planner: plan_table): its input (the rows
 * DML writes, or a Kafka topic in FORMAT UPSERT/DEBEZIUM/PLAIN), its
 * watermark if it declares one, and an upsert materialize keyed by the
 * primary key. To everything else it reads like a materialized view: ad
 * hoc queries scan its rows, views read its changelog (inserts, updates as
 * -U/+U pairs, deletes), and its rows are checkpointed with all other state.
 *
 * DML runs under the engine lock between two engine steps. It computes
 * the complete set of changes first (rows to write, keys to delete), checks
 * NOT NULL and the primary key, and only then writes them (nothing is
 * applied when a check fails), through rt_dataflow_write, which also
 * carries them into every view reading the table. Durability: the
 * statement then takes a checkpoint synchronously (engine_checkpoint) and
 * answers only once it has committed, so an acknowledged write survives a
 * kill -9. That costs one LMDB commit (an fsync) per statement, like
 * Postgres with synchronous_commit = on; several rows in one statement
 * share it.
 */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric.h"
#include "row.h"
#include "log.h"

/* ---- CREATE TABLE -------------------------------------------------------------------- */

int table_create(Engine *e, CatObj *o, const AstCreateSource *cs, bool replay, WError *err)
{
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, o, replay, false, o->arena);
    o->flow.plan = plan_table(cs, &o->rel, &cat, source_rev(o), o->arena, err);
    if (!o->flow.plan || engine_plan_ids_ok(&pcx, err))
        goto fail;
    if (!replay && stor_next_id(e->stor, &o->id, err))
        goto fail;
    o->rel.id = o->id;
    if (rt_dataflow_open(&e->rt, o->flow.plan, &o->flow.df, err)) {
        if (!replay)
            goto fail;
        /* At start a broker may still be coming up: keep the table, the engine retries. */
        wlog_warn("cmd_table", "table %s cannot start yet: %s", o->name, err->msg);
        snprintf(o->flow.stop_error, sizeof o->flow.stop_error, "%s", err->msg);
        /* Its topic was deleted or shrunk: that waits for RESUME, not the retry. */
        o->flow.failed = strcmp(err->sqlstate, RT_SQLSTATE_SOURCE_LOST) == 0;
        werr_clear(err);
    } else {
        rt_dataflow_set_name(o->flow.df, o->name);
    }
    if (engine_add_object(e, o, !replay, err))
        goto fail;
    e->dirty = true;
    return 0;
fail:
    rt_dataflow_close(o->flow.df);
    o->flow.df = NULL;
    o->flow.plan = NULL;
    if (!replay) {
        WError ignored = {0};
        for (int i = 0; i < o->n_table_ids; i++)
            stor_table_drop(e->stor, o->table_ids[i], &ignored);
        o->n_table_ids = 0;
    }
    return -1;
}

/* ---- shared by the DML statements ---------------------------------------------------- */

/* The changes one statement makes, built completely before any is applied. */
typedef struct Changes {
    Arena *a;
    int n, cap;
    RowOp *ops;
    Value **rows;
} Changes;

static void changes_add(Changes *c, RowOp op, Value *row)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->ops = xrealloc(c->ops, sizeof(RowOp) * (size_t)c->cap);
        c->rows = xrealloc(c->rows, sizeof(Value *) * (size_t)c->cap);
    }
    c->ops[c->n] = op;
    c->rows[c->n++] = row;
}

static void changes_free(Changes *c)
{
    free(c->ops);
    free(c->rows);
}

/* A copy of v whose string lives in a. */
static Value copy_value(Arena *a, const Value *v)
{
    Value out = *v;
    if (!v->null && type_phys(v->type) == PHYS_STR && v->u.s.len) {
        char *p = arena_alloc(a, v->u.s.len);
        memcpy(p, v->u.s.p, v->u.s.len);
        out.u.s.p = p;
    }
    return out;
}

static CatObj *writable_table(Engine *e, const char *name, const char *verb, int pos, WError *err)
{
    CatObj *o = cat_find(e->cat, name);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, pos, "relation \"%s\" does not exist", name), NULL;
    if (o->kind != CAT_TABLE || cat_option(&o->rel, "connector")) {
        werr(err, SQLSTATE_WRONG_OBJECT_TYPE, pos, "cannot %s %s \"%s\"", verb,
             o->kind == CAT_TABLE ? "table over a connector" : o->kind == CAT_SOURCE ? "source"
             : o->kind == CAT_VIEW ? "materialized view" : "relation", name);
        if (o->kind == CAT_TABLE)
            werr_hint(err, "Its rows come from its Kafka topic: produce to the topic instead.");
        return NULL;
    }
    if (!o->flow.df)
        return werr(err, SQLSTATE_OBJECT_NOT_IN_STATE, pos, "table \"%s\" is not running", name), NULL;
    return o;
}

/* Key column values of row as "(a, b)=(1, x)" for 23505's detail. */
static void key_text(const CatRelation *r, const Value *row, Buf *out)
{
    buf_putc(out, '(');
    for (int k = 0; k < r->n_pk; k++)
        buf_printf(out, "%s%s", k ? ", " : "", r->col_names[r->pk[k]]);
    buf_puts(out, ")=(");
    for (int k = 0; k < r->n_pk; k++) {
        if (k)
            buf_puts(out, ", ");
        value_to_text(&row[r->pk[k]], out);
    }
    buf_putc(out, ')');
}

static void encode_key(const CatRelation *r, const Value *row, Buf *out)
{
    Value key[WEIR_MAX_COLUMNS + 1];
    for (int k = 0; k < r->n_pk; k++)
        key[k] = row[r->pk[k]];
    buf_reset(out);
    key_encode(out, key, r->n_pk);
}

static int dup_key(const CatRelation *r, const Value *row, int pos, WError *err)
{
    Buf b = BUF_INIT;
    key_text(r, row, &b);
    werr(err, SQLSTATE_UNIQUE_VIOLATION, pos, "duplicate key value violates unique constraint \"%s_pkey\"", r->name);
    werr_detail(err, "Key %s already exists.", b.data);
    buf_free(&b);
    return -1;
}

/* NOT NULL, and NUMERIC(p,s) columns rounded to their scale (22003 when
 * the value does not fit), as Postgres applies a column's typmod. */
static int check_not_null(const CatRelation *r, Value *row, int pos, WError *err)
{
    for (int k = 0; k < r->n_cols && r->col_typmod; k++)
        if (num_apply_typmod(r->col_typmod[k], &row[k], err))
            return err->pos = pos, -1;
    for (int k = 0; k < r->n_cols; k++)
        if (r->col_not_null && r->col_not_null[k] && row[k].null)
            return werr(err, SQLSTATE_NOT_NULL_VIOLATION, pos, "null value in column \"%s\" of relation \"%s\" violates not-null constraint",
                        r->col_names[k], r->name);
    return 0;
}

/* Encoded keys, sorted, to find keys that repeat within one statement. */
typedef struct KeySet {
    int n, cap;
    struct KeyEnt {
        char *p;
        size_t len;
        int row;
    } *items;
} KeySet;

static void keyset_add(KeySet *s, Arena *a, const Buf *k, int row)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->items = xrealloc(s->items, sizeof *s->items * (size_t)s->cap);
    }
    char *p = arena_alloc(a, k->len ? k->len : 1);
    memcpy(p, k->data, k->len);
    s->items[s->n++] = (struct KeyEnt){p, k->len, row};
}

static int key_cmp(const void *x, const void *y)
{
    const struct KeyEnt *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->p, b->p, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static bool keyset_has(const KeySet *s, const Buf *k)
{
    struct KeyEnt probe = {k->data, k->len, 0};
    return s->n && bsearch(&probe, s->items, (size_t)s->n, sizeof *s->items, key_cmp);
}

/* Sorts s; returns the row of a key that occurs twice, or -1. */
static int keyset_sort_dup(KeySet *s)
{
    if (s->n)
        qsort(s->items, (size_t)s->n, sizeof *s->items, key_cmp);
    for (int i = 1; i < s->n; i++)
        if (key_cmp(&s->items[i - 1], &s->items[i]) == 0)
            return s->items[i].row;
    return -1;
}

/* Applies the changes to the table and makes them durable. */
static int apply(Engine *e, CatObj *o, Changes *ch, WError *err)
{
    if (ch->n && rt_dataflow_write(o->flow.df, ch->n, ch->ops, (const Value *const *)ch->rows, err)) {
        /* The dataflow is broken (as after a failed step): stop it and its readers. */
        wlog_warn("table", "table %s stopped: %s", o->name, err->msg);
        engine_stop_view(e, o);
        return -1;
    }
    if (!ch->n)
        return 0;
    e->dirty = true;
    if (engine_checkpoint(e, err)) {
        werr_hint(err, "The change is applied but not yet durable; it is written with the next checkpoint that "
                       "succeeds.");
        return -1;
    }
    return 0;
}

/* Rows of an ad hoc query, copied. */
typedef struct Collect {
    Arena *a;
    int n, cap;
    int n_cols;
    Value **rows;
} Collect;

static int collect_row(void *arg, int n, const Value *vals)
{
    Collect *c = arg;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->rows = xrealloc(c->rows, sizeof(Value *) * (size_t)c->cap);
    }
    Value *row = arena_alloc(c->a, sizeof(Value) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        row[i] = copy_value(c->a, &vals[i]);
    c->rows[c->n++] = row;
    c->n_cols = n;
    return 0;
}

/* Runs sel (planned against the catalog) and collects its visible rows;
 * *types gets the column types. */
static int run_collect(Engine *e, const AstSelect *sel, Collect *c, const TypeId **types, WError *err)
{
    PlanCatCtx pcx;
    PlanCatalog cat = engine_plan_catalog(e, &pcx, NULL, false, true, c->a);
    PlanQuery *q = plan_query(sel, &cat, c->a, err);
    if (!q)
        return -1;
    TypeId *t = arena_alloc(c->a, sizeof(TypeId) * (size_t)(q->schema.n ? q->schema.n : 1));
    int nv = 0;
    for (int i = 0; i < q->schema.n; i++)
        if (!q->schema.hidden[i])
            t[nv++] = q->schema.types[i];
    c->n_cols = nv;
    *types = t;
    return rt_query_run_values(&e->rt, q, collect_row, c, err) < 0 ? -1 : 0;
}

int table_query_rows(Engine *e, const AstSelect *sel, Arena *a, Value ***rows, int *n_rows, int *n_cols, WError *err)
{
    Collect c = {.a = a};
    const TypeId *types;
    int rc = run_collect(e, sel, &c, &types, err);
    /* The row array moves into the arena: the caller frees nothing. */
    Value **out = arena_alloc(a, sizeof(Value *) * (size_t)(c.n ? c.n : 1));
    if (c.n)
        memcpy(out, c.rows, sizeof(Value *) * (size_t)c.n);
    free(c.rows);
    *rows = out;
    *n_rows = c.n;
    *n_cols = c.n_cols;
    return rc;
}

/* v converted to column type t (assignment: any castable value). */
int table_assign(Arena *a, const Value *v, TypeId t, int pos, Value *out, WError *err)
{
    if (v->null) {
        *out = value_null(t);
        return 0;
    }
    if (v->type == t) {
        *out = *v;
        return 0;
    }
    if (scalar_cast(v, t, a, out, err)) {
        if (!err->pos)
            err->pos = pos;
        return -1;
    }
    return 0;
}

/* ---- INSERT ---------------------------------------------------------------------------- */

int table_insert(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstInsert *ins = st->u.insert;
    CatObj *o = writable_table(e, ins->table, "insert into", st->pos, err);
    if (!o)
        return -1;
    const CatRelation *r = &o->rel;
    int ncols = r->n_cols;
    int n_target = ins->columns ? ast_list_len(ins->columns) : ncols;
    if (n_target > ncols)
        return werr(err, SQLSTATE_SYNTAX_ERROR, st->pos, "INSERT has more target columns than the table has columns");
    int map[WEIR_MAX_COLUMNS + 1];
    for (int i = 0; i < n_target; i++) {
        map[i] = ins->columns ? -1 : i;
        if (!ins->columns)
            continue;
        const char *c = AST_AT(ins->columns, i);
        for (int k = 0; k < ncols; k++)
            if (strcmp(r->col_names[k], c) == 0)
                map[i] = k;
        if (map[i] < 0)
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, st->pos, "column \"%s\" of relation \"%s\" does not exist", c,
                        o->name);
        for (int j = 0; j < i; j++)
            if (map[j] == map[i])
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, st->pos, "column \"%s\" specified more than once", c);
    }
    Arena *a = arena_new(0);
    Changes ch = {.a = a};
    Collect q = {.a = a};
    KeySet keys = {0};
    Buf kb = BUF_INIT;
    int rc = 0;
    int pos = ins->query->pos;
    if (ins->query->values) {
        for (int i = 0; i < ast_list_len(ins->query->values) && !rc; i++) {
            AstList *row = AST_AT(ins->query->values, i);
            if (ast_list_len(row) != n_target) {
                rc = werr(err, SQLSTATE_SYNTAX_ERROR, ((AstExpr *)AST_AT(row, 0))->pos,
                          "INSERT has %s expressions than target columns", ast_list_len(row) > n_target ? "more" : "fewer");
                break;
            }
            Value *vals = arena_alloc(a, sizeof(Value) * (size_t)n_target);
            for (int k = 0; k < n_target && !rc; k++)
                rc = plan_const_expr(AST_AT(row, k), r->col_types[map[k]], a, &vals[k], err);
            if (!rc)
                collect_row(&q, n_target, vals);
        }
    } else {
        const TypeId *types;
        rc = run_collect(e, ins->query, &q, &types, err);
        if (!rc && q.n_cols != n_target)
            rc = werr(err, SQLSTATE_SYNTAX_ERROR, pos, "INSERT has %s expressions than target columns",
                      q.n_cols > n_target ? "more" : "fewer");
    }
    /* Full rows, checked, before anything is written. */
    for (int i = 0; i < q.n && !rc; i++) {
        Value *row = arena_alloc(a, sizeof(Value) * (size_t)ncols);
        for (int k = 0; k < ncols; k++)
            row[k] = value_null(r->col_types[k]);
        for (int k = 0; k < n_target && !rc; k++)
            rc = table_assign(a, &q.rows[i][k], r->col_types[map[k]], pos, &row[map[k]], err);
        if (rc || (rc = check_not_null(r, row, pos, err)))
            break;
        encode_key(r, row, &kb);
        const void *v;
        size_t vl;
        int f = stor_table_get(rt_dataflow_view_table(o->flow.df), kb.data, kb.len, &v, &vl, err);
        if (f < 0 || (f == 1 && dup_key(r, row, pos, err))) {
            rc = -1;
            break;
        }
        keyset_add(&keys, a, &kb, i);
        changes_add(&ch, OP_INSERT, row);
    }
    int d = rc ? -1 : keyset_sort_dup(&keys);
    if (d >= 0)
        rc = dup_key(r, ch.rows[d], pos, err);
    if (!rc)
        rc = apply(e, o, &ch, err);
    if (!rc) {
        char tag[64];
        snprintf(tag, sizeof tag, "INSERT 0 %d", ch.n);
        srv_result_complete(out, tag);
    }
    free(q.rows);
    free(keys.items);
    buf_free(&kb);
    changes_free(&ch);
    arena_free(a);
    return rc;
}

/* ---- UPDATE, DELETE ---------------------------------------------------------------------- */

/* SELECT <every column>, <extra...> FROM table WHERE where: the rows a
 * statement changes, with the new values computed by the query engine. */
static AstSelect *rows_query(Arena *a, const CatRelation *r, AstList *extra, AstExpr *where, int pos)
{
    AstSelect *s = arena_zalloc(a, sizeof *s);
    s->pos = pos;
    for (int i = 0; i < r->n_cols; i++) {
        AstExpr *c = arena_zalloc(a, sizeof *c);
        c->kind = AST_COLUMN;
        c->pos = pos;
        c->text = r->col_names[i];
        AstTarget *t = arena_zalloc(a, sizeof *t);
        t->expr = c;
        t->pos = pos;
        s->targets = ast_list_append(a, s->targets, t);
    }
    for (int i = 0; i < ast_list_len(extra); i++) {
        AstTarget *t = arena_zalloc(a, sizeof *t);
        t->expr = AST_AT(extra, i);
        t->pos = t->expr->pos;
        t->alias = arena_printf(a, "_set%d", i);
        s->targets = ast_list_append(a, s->targets, t);
    }
    AstTableRef *from = arena_zalloc(a, sizeof *from);
    from->kind = TREF_NAME;
    from->pos = pos;
    from->name = r->name;
    s->from = ast_list_append(a, NULL, from);
    s->where = where;
    return s;
}

static int refuse_append_only(const CatObj *o, const char *verb, int pos, WError *err)
{
    if (!o->rel.append_only)
        return 0;
    werr(err, SQLSTATE_WRONG_OBJECT_TYPE, pos, "cannot %s APPEND ONLY table \"%s\"", verb, o->name);
    werr_hint(err, "Rows of an APPEND ONLY table are only ever inserted; create the table without APPEND ONLY to "
                   "update or delete them.");
    return -1;
}

int table_update(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstUpdate *u = st->u.update;
    CatObj *o = writable_table(e, u->table, "update", st->pos, err);
    if (!o || refuse_append_only(o, "update", st->pos, err))
        return -1;
    const CatRelation *r = &o->rel;
    int ncols = r->n_cols, nset = ast_list_len(u->set_cols);
    int set_col[WEIR_MAX_COLUMNS + 1];
    if (nset > WEIR_MAX_COLUMNS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, st->pos, "too many SET columns");
    for (int i = 0; i < nset; i++) {
        const char *c = AST_AT(u->set_cols, i);
        set_col[i] = -1;
        for (int k = 0; k < ncols; k++)
            if (strcmp(r->col_names[k], c) == 0)
                set_col[i] = k;
        if (set_col[i] < 0)
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, ((AstExpr *)AST_AT(u->set_exprs, i))->pos,
                        "column \"%s\" of relation \"%s\" does not exist", c, o->name);
        for (int j = 0; j < i; j++)
            if (set_col[j] == set_col[i])
                return werr(err, SQLSTATE_SYNTAX_ERROR, st->pos, "multiple assignments to same column \"%s\"", c);
    }
    Arena *a = arena_new(0);
    Changes dels = {.a = a}, adds = {.a = a};
    Collect q = {.a = a};
    KeySet old_keys = {0}, new_keys = {0};
    Buf kb = BUF_INIT;
    const TypeId *types;
    int rc = run_collect(e, rows_query(a, r, u->set_exprs, u->where, st->pos), &q, &types, err);
    for (int i = 0; i < q.n && !rc; i++) {
        encode_key(r, q.rows[i], &kb);
        keyset_add(&old_keys, a, &kb, i);
    }
    if (!rc)
        keyset_sort_dup(&old_keys);
    for (int i = 0; i < q.n && !rc; i++) {
        Value *old = q.rows[i];
        Value *row = arena_alloc(a, sizeof(Value) * (size_t)ncols);
        memcpy(row, old, sizeof(Value) * (size_t)ncols);
        for (int k = 0; k < nset && !rc; k++)
            rc = table_assign(a, &old[ncols + k], r->col_types[set_col[k]], ((AstExpr *)AST_AT(u->set_exprs, k))->pos,
                        &row[set_col[k]], err);
        if (rc || (rc = check_not_null(r, row, st->pos, err)))
            break;
        Buf ok = BUF_INIT;
        encode_key(r, old, &ok);
        encode_key(r, row, &kb);
        bool moved = ok.len != kb.len || memcmp(ok.data, kb.data, kb.len) != 0;
        buf_free(&ok);
        if (moved) {
            /* A new key must be free: not in the table, unless one of the
             * updated rows leaves it in this statement. */
            const void *v;
            size_t vl;
            int f = stor_table_get(rt_dataflow_view_table(o->flow.df), kb.data, kb.len, &v, &vl, err);
            if (f < 0 || (f == 1 && !keyset_has(&old_keys, &kb) && dup_key(r, row, st->pos, err))) {
                rc = -1;
                break;
            }
            changes_add(&dels, OP_DELETE, old);
        }
        keyset_add(&new_keys, a, &kb, i);
        changes_add(&adds, OP_INSERT, row);
    }
    int d = rc ? -1 : keyset_sort_dup(&new_keys);
    if (d >= 0)
        rc = dup_key(r, adds.rows[d], st->pos, err);
    /* Keys that move are deleted first, so rows may trade keys. */
    for (int i = 0; i < adds.n && !rc; i++)
        changes_add(&dels, adds.ops[i], adds.rows[i]);
    if (!rc)
        rc = apply(e, o, &dels, err);
    if (!rc) {
        char tag[64];
        snprintf(tag, sizeof tag, "UPDATE %d", q.n);
        srv_result_complete(out, tag);
    }
    free(q.rows);
    free(old_keys.items);
    free(new_keys.items);
    buf_free(&kb);
    changes_free(&dels);
    changes_free(&adds);
    arena_free(a);
    return rc;
}

int table_delete(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstDelete *dl = st->u.delete_;
    CatObj *o = writable_table(e, dl->table, "delete from", st->pos, err);
    if (!o || refuse_append_only(o, "delete from", st->pos, err))
        return -1;
    Arena *a = arena_new(0);
    Changes ch = {.a = a};
    Collect q = {.a = a};
    const TypeId *types;
    int rc = run_collect(e, rows_query(a, &o->rel, NULL, dl->where, st->pos), &q, &types, err);
    for (int i = 0; i < q.n && !rc; i++)
        changes_add(&ch, OP_DELETE, q.rows[i]);
    if (!rc)
        rc = apply(e, o, &ch, err);
    if (!rc) {
        char tag[64];
        snprintf(tag, sizeof tag, "DELETE %d", ch.n);
        srv_result_complete(out, tag);
    }
    free(q.rows);
    changes_free(&ch);
    arena_free(a);
    return rc;
}
