/*
 * plan_params.c: the types of a prepared statement's parameters ($1..$n),
 * inferred before any value is known, as PostgreSQL's parse analysis does, so
 * that pgwire can describe them in ParameterDescription (drivers such as
 * asyncpg, pgx and pgjdbc encode their arguments by those types).
 *
 * The statement is bound exactly as it will be at Execute, with one change:
 * every placeholder binds as an untyped literal of unknown value (BindCtx
 * param_types, bind.c). coerce_expr records the type each one is first
 * coerced to, which is the type its context gives it; the plan itself is
 * thrown away. The statement's own plan at Execute is untouched (its
 * placeholders carry the client's text, as before). An entry point, like
 * plan_view.c: nothing in planner/ calls it.
 */
#include "planner_int.h"

#include <string.h>

/* A relation's column named name, or -1. */
static int column_of(const CatRelation *r, const char *name)
{
    for (int i = 0; i < r->n_cols; i++)
        if (strcmp(r->col_names[i], name) == 0)
            return i;
    return -1;
}

/* A bare placeholder in an assignment (an INSERT value, an UPDATE SET value)
 * takes the column's type, as in PostgreSQL's assignment context. */
static void assign_param(BindCtx *b, const AstExpr *e, TypeId col_type)
{
    if (e && e->kind == AST_LITERAL && e->lit_kind == LIT_NULL && e->param_no > 0 && e->param_no <= b->n_param_types &&
        b->param_types[e->param_no - 1] == TYPE_NULL)
        b->param_types[e->param_no - 1] = col_type;
}

/* The SELECT sel planned as an ad hoc query, for its placeholders' types;
 * errors are dropped (p's WError is scratch). */
static void infer_select(PlanCtx *p, const AstSelect *sel)
{
    PlanQuery q = {.limit = -1};
    Rel r;
    if (sel)
        (void)p->sub_select(p, sel, &r, &q);
}

/* INSERT INTO t [(cols)] VALUES (...) | SELECT: each VALUES item (or a
 * bare placeholder in the SELECT's list) is assigned to its column. */
static void infer_insert(PlanCtx *p, const AstInsert *ins)
{
    BindCtx *b = &p->b;
    const CatRelation *r = b->cat && b->cat->lookup ? b->cat->lookup(b->cat->ctx, ins->table) : NULL;
    const AstSelect *q = ins->query;
    int n_target = ins->columns ? ast_list_len(ins->columns) : r ? r->n_cols : 0;
    for (int i = 0; r && q && i < n_target; i++) {
        int col = ins->columns ? column_of(r, AST_AT(ins->columns, i)) : i;
        if (col < 0)
            continue;
        for (int k = 0; k < ast_list_len(q->values); k++) {
            AstList *row = AST_AT(q->values, k);
            if (i < ast_list_len(row))
                assign_param(b, AST_AT(row, i), r->col_types[col]);
        }
        if (!q->values && i < ast_list_len(q->targets))
            assign_param(b, ((AstTarget *)AST_AT(q->targets, i))->expr, r->col_types[col]);
    }
    if (q && q->values) {
        /* The other items (expressions over placeholders) bind on their own. */
        Scope empty = {0};
        for (int k = 0; k < ast_list_len(q->values); k++) {
            AstList *row = AST_AT(q->values, k);
            for (int i = 0; i < ast_list_len(row); i++) {
                werr_clear(b->err);
                (void)bind_expr(b, &empty, AST_AT(row, i));
            }
        }
    } else {
        infer_select(p, q);
    }
}

/* UPDATE t SET c = e, ... WHERE w and DELETE FROM t WHERE w: planned as
 * SELECT e, ... FROM t WHERE w, after the bare SET placeholders took their
 * columns' types. */
static void infer_update(PlanCtx *p, const char *table, const AstList *set_cols, AstList *set_exprs, AstExpr *where,
                         int pos)
{
    BindCtx *b = &p->b;
    const CatRelation *r = b->cat && b->cat->lookup ? b->cat->lookup(b->cat->ctx, table) : NULL;
    for (int i = 0; r && i < ast_list_len(set_exprs); i++) {
        int col = column_of(r, AST_AT(set_cols, i));
        if (col >= 0)
            assign_param(b, AST_AT(set_exprs, i), r->col_types[col]);
    }
    AstSelect *s = arena_zalloc(b->a, sizeof *s);
    s->pos = pos;
    AstExpr *one = arena_zalloc(b->a, sizeof *one);
    *one = (AstExpr){.kind = AST_LITERAL, .lit_kind = LIT_INT, .text = "1", .pos = pos};
    AstTarget *t = arena_zalloc(b->a, sizeof *t);
    *t = (AstTarget){.expr = one, .pos = pos};
    s->targets = ast_list_append(b->a, NULL, t);
    for (int i = 0; i < ast_list_len(set_exprs); i++) {
        t = arena_zalloc(b->a, sizeof *t);
        t->expr = AST_AT(set_exprs, i);
        t->pos = t->expr->pos;
        t->alias = arena_printf(b->a, "_set%d", i);
        s->targets = ast_list_append(b->a, s->targets, t);
    }
    AstTableRef *from = arena_zalloc(b->a, sizeof *from);
    *from = (AstTableRef){.kind = TREF_NAME, .pos = pos, .name = table};
    s->from = ast_list_append(b->a, NULL, from);
    s->where = where;
    infer_select(p, s);
}

void plan_param_types(const AstStmt *st, const PlanCatalog *cat, Arena *a, int n, TypeId *types)
{
    WError scratch = {0};
    PlanCtx p;
    init_ctx(&p, cat, a, &scratch, false);
    p.b.param_types = types;
    p.b.n_param_types = n;
    /* EXPLAIN and DECLARE type the statement they carry. */
    while (st && (st->kind == STMT_EXPLAIN || st->kind == STMT_DECLARE))
        st = st->kind == STMT_EXPLAIN ? st->u.explain->stmt : st->u.declare->query;
    if (!st)
        return;
    switch (st->kind) {
    case STMT_SELECT:
        infer_select(&p, st->u.select);
        break;
    case STMT_INSERT:
        infer_insert(&p, st->u.insert);
        break;
    case STMT_UPDATE:
        infer_update(&p, st->u.update->table, st->u.update->set_cols, st->u.update->set_exprs,
                     st->u.update->where, st->pos);
        break;
    case STMT_DELETE:
        infer_update(&p, st->u.delete_->table, NULL, NULL, st->u.delete_->where, st->pos);
        break;
    default:
        break;
    }
}
