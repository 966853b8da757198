/*
 * plan_values.c: the VALUES kind, in queries and views (a view emits the
 * rows once: runtime/op_values.c). Each row's
 * expressions are bound and folded to constants; a column's type is the
 * common type of its rows (bare NULLs and string literals take it), with
 * planner revision 4's number rule. The result is one PN_VALUES leaf.
 */
#include "planner_int.h"

#include <stdio.h>

int plan_values(PlanCtx *p, const AstSelect *sel, Rel *out)
{
    BindCtx *b = &p->b;
    if (sel->order_by || sel->limit || sel->offset)
        return werr(b->err, SQLSTATE_NOT_SUPPORTED, sel->pos,
                    "feature not supported: ORDER BY or LIMIT directly on VALUES (select from it instead)");
    int nr = ast_list_len(sel->values);
    AstList *first = AST_AT(sel->values, 0);
    int nc = ast_list_len(first);
    PlanNode *v = new_node(p, PN_VALUES, NULL);
    v->append_only = true;
    /* In a view, a bounded input: its rows are emitted once, and the state
     * table records that they were (runtime/op_values.c). */
    if (p->streaming)
        v->table_id = new_table(p);
    v->n_rows = nr;
    v->rows = arena_alloc(b->a, sizeof(Value *) * (size_t)nr);
    alloc_schema(b->a, &v->out, nc);
    Scope empty = {0};
    PlanExpr ***bound = arena_alloc(b->a, sizeof(PlanExpr **) * (size_t)nr);
    for (int r = 0; r < nr; r++) {
        AstList *row = AST_AT(sel->values, r);
        if (ast_list_len(row) != nc)
            return werr(b->err, SQLSTATE_SYNTAX_ERROR, ((AstExpr *)AST_AT(row, 0))->pos,
                        "VALUES lists must all be the same length");
        bound[r] = arena_alloc(b->a, sizeof(PlanExpr *) * (size_t)(nc ? nc : 1));
        for (int c = 0; c < nc; c++)
            if (!(bound[r][c] = bind_expr(b, &empty, AST_AT(row, c))))
                return -1;
    }
    for (int c = 0; c < nc; c++) {
        TypeId t = TYPE_NULL;
        for (int r = 0; r < nr; r++) {
            PlanExpr *e = bound[r][c];
            if (e->kind == PE_CONST && (e->unknown || e->value.null))
                continue;
            /* Mixed number types: Postgres's common type (int and bigint
             * are bigint, an integer and a numeric numeric) since planner
             * revision 4; before, always double precision. */
            if (t == TYPE_NULL)
                t = e->type;
            else if (type_is_numeric(t) && type_is_numeric(e->type) && t != e->type)
                t = b->plan_rev >= 4 ? bind_common_type(t, e->type) : TYPE_FLOAT8;
        }
        if (t == TYPE_NULL)
            t = TYPE_TEXT;
        v->out.types[c] = t;
        v->out.names[c] = arena_printf(b->a, "column%d", c + 1);
    }
    for (int r = 0; r < nr; r++) {
        v->rows[r] = arena_alloc(b->a, sizeof(Value) * (size_t)(nc ? nc : 1));
        for (int c = 0; c < nc; c++) {
            PlanExpr *e = coerce_expr(b, bound[r][c], v->out.types[c], bound[r][c]->pos);
            if (!e || eval_const(b, e, &v->rows[r][c]))
                return -1;
        }
    }
    out->node = v;
    alloc_scope(b->a, &out->scope, nc);
    for (int c = 0; c < nc; c++)
        out->scope.cols[c] = (ScopeCol){.name = v->out.names[c], .type = v->out.types[c]};
    return 0;
}
