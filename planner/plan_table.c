/*
 * plan_table.c: CREATE SOURCE and CREATE TABLE: their columns bound
 * (declared, INCLUDE, computed), key and watermark into the CatRelation, and
 * a table's own small stream plan (TableWrite or Source, Watermark,
 * Materialize in upsert mode). Also plan_const_expr, a constant folded for
 * the server. Entry points, like plan_view.c: nothing in planner/ calls them.
 */
#include "planner_int.h"
#include "numeric.h"

#include <string.h>
#include <strings.h>

/* INCLUDE key | partition | offset | timestamp [AS name]: columns n_decl..
 * after the declared ones, filled by the source from each Kafka record
 * (RisingWave's default names when there is no AS). */
static int include_columns(const AstCreateSource *cs, int n_decl, const char **names, TypeId *types, Scope *s,
                           CatRelation *rel, Arena *a, WError *err)
{
    static const struct {
        const char *what, *name;
        CatMeta meta;
        TypeId type;
    } KINDS[] = {{"key", "_rw_kafka_key", CAT_META_KEY, TYPE_BYTEA},
                 {"partition", "_rw_kafka_partition", CAT_META_PARTITION, TYPE_INT4},
                 {"offset", "_rw_kafka_offset", CAT_META_OFFSET, TYPE_INT8},
                 {"timestamp", "_rw_kafka_timestamp", CAT_META_TIMESTAMP, TYPE_TIMESTAMPTZ}};
    int n = n_decl + ast_list_len(cs->includes);
    uint8_t *meta = arena_zalloc(a, (size_t)n);
    for (int i = n_decl; i < n; i++) {
        const AstInclude *inc = AST_AT(cs->includes, i - n_decl);
        int k = -1;
        for (int j = 0; j < 4 && k < 0; j++)
            if (strcasecmp(inc->what, KINDS[j].what) == 0)
                k = j;
        if (k < 0)
            return werr(err, SQLSTATE_SYNTAX_ERROR, inc->pos, "INCLUDE %s: the record has key, partition, offset and "
                        "timestamp", inc->what);
        for (int j = n_decl; j < i; j++)
            if (meta[j] == KINDS[k].meta)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, inc->pos, "INCLUDE %s specified more than once",
                            KINDS[k].what);
        names[i] = arena_strdup(a, inc->alias ? inc->alias : KINDS[k].name);
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], names[i]) == 0)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, inc->pos, "column \"%s\" specified more than once",
                            names[i]);
        types[i] = KINDS[k].type;
        meta[i] = (uint8_t)KINDS[k].meta;
        s->cols[i] = (ScopeCol){.name = names[i], .type = types[i]};
    }
    rel->col_meta = meta;
    return 0;
}

/* The columns, primary key (tables only) and watermark of CREATE SOURCE or
 * CREATE TABLE, bound into rel. */
/* A table's primary key (a table-level PRIMARY KEY (a, b) or one
 * column-level PRIMARY KEY) into rel->pk, its columns made NOT NULL. The
 * key must be read from the records (not computed, not INCLUDE) and of a
 * type that compares exactly. 0, or -1 with err (42P16, 42703, 42701, 0A000, 42804). */
static int table_key(const AstCreateSource *cs, CatRelation *rel, const char **names, const TypeId *types,
                     bool *not_null, const PlanExpr **gen, int n, Arena *a, WError *err)
{
    int n_decl = ast_list_len(cs->columns);
    /* The key: a table-level PRIMARY KEY (a, b) or one column-level PRIMARY KEY. */
    int npk = ast_list_len(cs->primary_key), *pk = arena_alloc(a, sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n_decl; i++) { /* INCLUDE columns come after the declared ones */
        const AstColumnDef *c = AST_AT(cs->columns, i);
        if (!c->primary_key)
            continue;
        if (npk)
            return werr(err, SQLSTATE_INVALID_TABLE_DEFINITION, c->pos, "multiple primary keys for table \"%s\" are not allowed", cs->name);
        pk[0] = i;
        rel->n_pk = 1;
    }
    for (int k = 0; k < npk; k++) {
        const char *name = AST_AT(cs->primary_key, k);
        int c = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], name) == 0)
                c = i;
        if (c < 0)
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, 0, "column \"%s\" named in key does not exist", name);
        for (int j = 0; j < k; j++)
            if (pk[j] == c)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, 0, "column \"%s\" appears twice in primary key constraint",
                            name);
        pk[k] = c;
        rel->n_pk = npk;
    }
    /* A delete (a tombstone, Debezium's "before") names its row by the
     * key the record carries: key columns must be read from the records. */
    for (int k = 0; k < rel->n_pk; k++)
        if ((gen && gen[pk[k]]) || (rel->col_meta && rel->col_meta[pk[k]]))
            return werr(err, SQLSTATE_NOT_SUPPORTED, 0,
                        "feature not supported: a primary key on %s column \"%s\"",
                        gen && gen[pk[k]] ? "computed" : "INCLUDE", names[pk[k]]),
                   werr_hint(err, "The key must be a column of the records' JSON."), -1;
    if (!rel->n_pk)
        return werr(err, SQLSTATE_INVALID_TABLE_DEFINITION, 0, "table \"%s\" needs a PRIMARY KEY", cs->name),
               werr_hint(err, "weir keeps a table's rows by key: declare PRIMARY KEY (col, ...)."), -1;
    for (int k = 0; k < rel->n_pk; k++) {
        not_null[pk[k]] = true; /* as in Postgres, key columns are NOT NULL */
        if (types[pk[k]] == TYPE_JSONB || types[pk[k]] == TYPE_FLOAT8 || types[pk[k]] == TYPE_FLOAT4)
            return werr(err, SQLSTATE_DATATYPE_MISMATCH, 0, "a primary key column cannot be of type %s",
                        type_name(types[pk[k]]));
    }
    rel->pk = pk;
    return 0;
}

/* The WATERMARK clause of cs bound over the columns s (names, types, n of
 * them) into rel (wm_col, wm_expr, and wm_delay_us for `col - INTERVAL`).
 * 0, or -1 with err. */
static int bind_watermark(BindCtx *b, const AstCreateSource *cs, CatRelation *rel, const char **names,
                          const TypeId *types, int n, const Scope *s, WError *err)
{
    int c = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], cs->wm_column) == 0)
            c = i;
    if (c < 0)
        return werr(err, SQLSTATE_UNDEFINED_COLUMN, cs->wm_pos, "column \"%s\" does not exist", cs->wm_column);
    if (types[c] != TYPE_TIMESTAMP && types[c] != TYPE_TIMESTAMPTZ)
        return werr(err, SQLSTATE_DATATYPE_MISMATCH, cs->wm_pos,
                    "the WATERMARK column must be TIMESTAMP or TIMESTAMPTZ, not %s", type_name(types[c]));
    PlanExpr *e = bind_expr(b, s, cs->wm_expr);
    if (!e)
        return -1;
    if (e->type != types[c] && !(e = coerce_expr(b, e, types[c], cs->wm_expr->pos)))
        return -1;
    rel->wm_col = c;
    rel->wm_expr = e;
    /* Recognise `col - INTERVAL` to show the delay and let the runtime take a fast path. */
    if (e->kind == PE_COL && e->col == c)
        rel->wm_delay_us = 0;
    else if (e->kind == PE_CALL && e->fn == FN_TS_SUB_IV && e->args[0]->kind == PE_COL &&
             e->args[0]->col == c && e->args[1]->kind == PE_CONST &&
             interval_to_usecs(&e->args[1]->value.u.iv, &rel->wm_delay_us) == 0) {
    } else {
        rel->wm_delay_us = -1;
    }
    return 0;
}

static int bind_columns(const AstCreateSource *cs, CatRelation *rel, bool table, int plan_rev, Arena *a, WError *err)
{
    PlanCtx p;
    init_ctx(&p, NULL, a, err, false);
    p.plan_rev = p.b.plan_rev = plan_rev;
    BindCtx *b = &p.b;
    const char *what = table ? "table" : "source";
    int n_decl = ast_list_len(cs->columns), n_inc = ast_list_len(cs->includes), n = n_decl + n_inc;
    if (n_decl == 0)
        return werr(err, SQLSTATE_SYNTAX_ERROR, 0, "a %s needs at least one column", what);
    const char *conn = cat_option(rel, "connector");
    bool kafka_table = table && conn && strcasecmp(conn, "kafka") == 0;
    if (cs->includes) {
        const AstInclude *inc = AST_AT(cs->includes, 0);
        if (table ? !kafka_table : !conn || strcasecmp(conn, "kafka") != 0)
            return werr(err, SQLSTATE_NOT_SUPPORTED, inc->pos, "feature not supported: INCLUDE on a %s",
                        table ? "table without a Kafka connector" : "source that does not read Kafka"),
                   werr_hint(err, "INCLUDE adds the Kafka record's key, partition, offset or timestamp to a source "
                                  "or a table over Kafka."), -1;
    }
    if (n > WEIR_MAX_COLUMNS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "%ss can have at most %d columns", what, WEIR_MAX_COLUMNS);
    int n_props = 0;
    for (int i = 0; i < rel->n_options; i++)
        n_props += !strncasecmp(rel->options[i].key, "properties.", 11) &&
                   strcasecmp(rel->options[i].key + 11, "bootstrap.server") &&
                   strcasecmp(rel->options[i].key + 11, "bootstrap.servers");
    if (n_props > WEIR_MAX_KAFKA_PROPERTIES)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "a %s can have at most %d properties.* options, not %d", what,
                    WEIR_MAX_KAFKA_PROPERTIES, n_props);
    const char **names = arena_alloc(a, sizeof(char *) * (size_t)n);
    TypeId *types = arena_alloc(a, sizeof(TypeId) * (size_t)n);
    bool *not_null = arena_zalloc(a, sizeof(bool) * (size_t)n);
    Scope s;
    alloc_scope(a, &s, n);
    const PlanExpr **gen = NULL;
    int32_t *typmod = NULL;
    for (int i = 0; i < n_decl; i++) {
        const AstColumnDef *c = AST_AT(cs->columns, i);
        for (int j = 0; j < i; j++)
            if (strcmp(names[j], c->name) == 0)
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, c->pos, "column \"%s\" specified more than once", c->name);
        names[i] = arena_strdup(a, c->name);
        if (c->generated) {
            /* A writable table's rows come from DML, which would have to
             * compute them; a table over Kafka computes them as a source does. */
            if (table && !kafka_table)
                return werr(err, SQLSTATE_NOT_SUPPORTED, c->pos,
                            "feature not supported: computed columns in a table without a connector"),
                       werr_hint(err, "Compute the column in a view over the table."), -1;
            if (!gen)
                gen = arena_zalloc(a, sizeof *gen * (size_t)n);
            /* Bound below, once the columns it may read are known; until
             * then no expression can name it (a computed column reads only
             * columns of the records, as in Flink). */
            s.cols[i] = (ScopeCol){.name = "", .type = TYPE_NULL, .hidden = true};
            continue;
        }
        if (c->primary_key && !table)
            return werr(err, SQLSTATE_NOT_SUPPORTED, c->pos, "feature not supported: PRIMARY KEY on a source"),
                   werr_hint(err, "Use CREATE TABLE for a relation keyed by a primary key."), -1;
        TypeId t = type_from_name(c->type_name);
        if (t == TYPE_NULL)
            return werr(err, SQLSTATE_UNDEFINED_OBJECT, c->pos, "type \"%s\" does not exist", c->type_name);
        int prec, scale, mod = type_numeric_mod(c->type_name, &prec, &scale, err);
        if (mod < 0)
            return err->pos = c->pos, -1;
        if (mod) {
            if (!typmod) {
                typmod = arena_alloc(a, sizeof *typmod * (size_t)n);
                for (int k = 0; k < n; k++)
                    typmod[k] = -1;
            }
            typmod[i] = NUM_TYPMOD(prec, scale);
        }
        types[i] = t;
        not_null[i] = c->not_null;
        s.cols[i] = (ScopeCol){.name = names[i], .type = t};
    }
    if (n_inc && include_columns(cs, n_decl, names, types, &s, rel, a, err))
        return -1;
    for (int i = 0; gen && i < n_decl; i++) {
        const AstColumnDef *c = AST_AT(cs->columns, i);
        if (!c->generated)
            continue;
        const AstExpr *g = c->generated;
        if (g->kind == AST_FUNC && strcmp(g->text, "proctime") == 0 && ast_list_len(g->args) == 0) {
            /* A processing-time attribute: the wall clock as the row is read. */
            PlanExpr *e = arena_zalloc(a, sizeof *e);
            *e = (PlanExpr){.kind = PE_CALL, .fn = FN_PROCTIME, .type = TYPE_TIMESTAMPTZ, .pos = g->pos};
            gen[i] = e;
            types[i] = TYPE_TIMESTAMPTZ;
            continue;
        }
        PlanExpr *e = bind_expr(b, &s, g);
        if (!e)
            return -1;
        if (expr_find_fn(e, FN_NOW) || expr_find_fn(e, FN_PROCTIME))
            return werr(err, SQLSTATE_NOT_SUPPORTED, g->pos,
                        "feature not supported: now() in a computed column (it would be the time of CREATE SOURCE)");
        if (e->type == TYPE_NULL && !(e = coerce_expr(b, e, TYPE_TEXT, c->generated->pos)))
            return -1;
        gen[i] = e;
        types[i] = e->type;
    }
    for (int i = 0; gen && i < n; i++)
        if (gen[i])
            s.cols[i] = (ScopeCol){.name = names[i], .type = types[i]};
    rel->col_gen = gen;
    if (cs->primary_key && !table)
        return werr(err, SQLSTATE_NOT_SUPPORTED, 0, "feature not supported: PRIMARY KEY on a %s", what);
    if (table && table_key(cs, rel, names, types, not_null, gen, n, a, err))
        return -1;
    rel->n_cols = n;
    rel->col_names = names;
    rel->col_types = types;
    rel->col_not_null = not_null;
    rel->col_typmod = typmod;
    rel->wm_col = -1;
    rel->wm_delay_us = -1;
    rel->append_only = true;
    if (cs->wm_column && bind_watermark(b, cs, rel, names, types, n, &s, err))
        return -1;
    for (int i = 0; gen && i < n; i++) {
        if (!gen[i] || gen[i]->kind != PE_CALL || gen[i]->fn != FN_PROCTIME)
            continue;
        if (rel->wm_col < 0) {
            /* The processing-time attribute is the time windows run on: its
             * own watermark, as in Flink, where a PROCTIME() column needs none. */
            rel->wm_col = i;
            rel->wm_expr = make_col(b, i, TYPE_TIMESTAMPTZ);
            rel->wm_delay_us = 0;
        }
        rel->proctime_wm |= rel->wm_col == i;
    }
    return 0;
}

int plan_source(const AstCreateSource *cs, CatRelation *rel, int plan_rev, Arena *a, WError *err)
{
    return bind_columns(cs, rel, false, plan_rev, a, err);
}

PlanView *plan_table(const AstCreateSource *cs, CatRelation *rel, const PlanCatalog *cat, int plan_rev, Arena *a,
                     WError *err)
{
    if (bind_columns(cs, rel, true, plan_rev, a, err))
        return NULL;
    bool writable = !cat_option(rel, "connector");
    rel->kind = CAT_TABLE;
    rel->materialized = true;
    /* Only a writable APPEND ONLY table is append-only: the server refuses
     * its UPDATE/DELETE and duplicate keys, so its changelog has only +I. */
    rel->append_only = writable && cs->append_only;
    PlanCtx p;
    init_ctx(&p, cat, a, err, true);
    p.plan_rev = p.b.plan_rev = plan_rev;
    PlanNode *in = new_node(&p, writable ? PN_TABLE_WRITE : PN_SOURCE, NULL);
    in->source = rel;
    in->append_only = rel->append_only; /* DML and upsert topics carry deletes */
    if (!writable)
        in->table_id = new_table(&p); /* the topic's offsets */
    alloc_schema(a, &in->out, rel->n_cols);
    for (int i = 0; i < rel->n_cols; i++) {
        in->out.names[i] = rel->col_names[i];
        in->out.types[i] = rel->col_types[i];
    }
    if (rel->col_gen) {
        /* Computed columns, as on a source: after the decoding, before the
         * watermark. A delete's row has only its key; its computed columns
         * come out NULL and the materialize reads the key alone. */
        PlanNode *pr = new_node(&p, PN_PROJECT, in);
        pr->out = in->out;
        pr->append_only = in->append_only;
        pr->n_exprs = rel->n_cols;
        pr->exprs = arena_alloc(a, sizeof(PlanExpr *) * (size_t)rel->n_cols);
        for (int i = 0; i < rel->n_cols; i++)
            pr->exprs[i] = rel->col_gen[i] ? (PlanExpr *)rel->col_gen[i] : make_col(&p.b, i, rel->col_types[i]);
        in = pr;
    }
    if (rel->wm_col >= 0) {
        PlanNode *w = new_node(&p, PN_WATERMARK, in);
        w->out = in->out;
        w->wm_col = rel->wm_col;
        w->wm_expr = (PlanExpr *)rel->wm_expr;
        w->wm_delay_us = rel->wm_delay_us;
        w->table_id = new_table(&p);
        in = w;
    }
    PlanNode *m = new_node(&p, PN_MATERIALIZE, in);
    m->view_name = rel->name;
    m->upsert = true;
    m->table_id = new_table(&p);
    m->append_only = rel->append_only;
    m->wm_col = rel->wm_col;
    m->out = in->out;
    m->n_keys = rel->n_pk;
    m->keys = (int *)rel->pk;
    /* Readers see the rows and the watermark through the table's changelog:
     * they must not generate the watermark again. */
    rel->topic_wm_expr = writable ? NULL : rel->wm_expr;
    rel->wm_expr = NULL;
    rel->table_id = m->table_id;
    PlanView *v = view_of(a, &p, m);
    v->emit = PLAN_EMIT_CHANGES;
    return v;
}

int plan_const_expr(const AstExpr *e, TypeId want, Arena *a, Value *out, WError *err)
{
    PlanCtx p;
    init_ctx(&p, NULL, a, err, false);
    Scope empty = {0};
    PlanExpr *x = bind_expr(&p.b, &empty, e);
    if (!x)
        return -1;
    /* Assignment context (INSERT values): like Postgres, any castable value
     * is accepted and checked when cast (e.g. 3 into a SMALLINT, 2.5 into a REAL).
     * A decimal literal into a NUMERIC takes its own digits (coerce_expr). */
    bool literal = x->kind == PE_CONST && (x->unknown || x->value.null || (x->decimal_text && want == TYPE_NUMERIC));
    if (x->type != want && !literal) {
        Value v;
        if (eval_const(&p.b, x, &v))
            return -1;
        if (scalar_cast(&v, want, a, out, err)) {
            if (err->pos == 0)
                err->pos = e->pos;
            return -1;
        }
        return 0;
    }
    if (!(x = coerce_expr(&p.b, x, want, e->pos)))
        return -1;
    return eval_const(&p.b, x, out);
}
