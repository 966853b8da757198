/*
 * op_semijoin.c: left rows against the rows of a subquery (right), the
 * decorrelated form of [NOT] IN (SELECT ...), [NOT] EXISTS (SELECT ...) and
 * scalar subqueries (planner: plan_subq.c).
 *
 * The right rows fall into groups by their correlation keys (one group when
 * the subquery is not correlated). Per group the operator keeps counts only:
 *   G [corr]           -> rows in the group, rows whose IN column is NULL
 *   M [corr] [y]       -> rows whose IN column is y (IN only, y not NULL)
 *   S [corr] [hash]    -> count and row (SCALAR only: the value is needed)
 * and the left rows by [corr] [x] [hash of the row] -> count and row, so
 * the rows a right change can affect are one prefix scan away: the whole
 * group when its emptiness, its NULL count or (SCALAR) its value changes,
 * else only the rows whose x equals the y that changed.
 *
 * Each left row gets SQL's verdict (EXISTS: the group has a row; x IN:
 * true when some y = x, NULL when none does but x or some y is NULL and the
 * group is not empty, false otherwise; a NULL correlation key matches
 * nothing, so its group is empty). SEMI emits the rows whose verdict is
 * true, ANTI those whose verdict is false (NOT IN's NULL rule is exactly
 * this), MARK every row with the verdict as a column, SCALAR every row with
 * the group's one value (the plan's default when the group is empty). When
 * a right change moves a row's verdict or value, the row's old output is
 * retracted and the new one emitted, so the output is an exact changelog.
 *
 * A group of more than one row under SCALAR is an error: in an ad hoc query
 * the statement fails with 21000 at the end of input (rows may still be
 * retracted before then); in a view the planner only admits subqueries
 * that yield one row per group (an aggregation keyed by the correlation),
 * and such a group would count an error and give NULL. Nothing bounds the
 * state but the inputs' sizes: the planner asks for the unbounded-state
 * opt-in when both inputs are append-only streams. The watermark is the
 * minimum of the two inputs', as for a join.
 *
 * With key groups (planner revision 6; correlated subqueries only, the
 * others are single) every key of both tables begins with the correlation
 * key's 2-byte key group (put_kg), before the tag: a group's counts and
 * rows, and the left rows that read them, are one range per key group.
 */
#include "runtime_int.h"
#include "hash_seeds.h"

#include <stdlib.h>
#include <string.h>

enum { TAG_GROUP = 1, TAG_MATCH = 2, TAG_ROW = 3 };
enum { V_FALSE = 0, V_TRUE = 1, V_NULL = 2 };

typedef struct SemiOp SemiOp;

typedef struct SemiPort {
    RtOp op;
    SemiOp *s;
    int side;
} SemiPort;

typedef struct Group {
    int64_t total;            /* rows of the subquery in the group */
    int64_t nulls;            /* of them, rows whose IN column is NULL */
} Group;

struct SemiOp {
    RtOp op;
    SemiPort port[2];
    int n_left, n_right;
    int n_out;
    bool is_in;
    int64_t wm[2];
    int64_t emitted_wm;
    int64_t multi;            /* SCALAR: groups holding more than one row now */
    Chunk *out;
    Buf kbuf, rbuf, vbuf, pbuf, ybuf;
};

static int emit_row(SemiOp *s, RowOp op, const Value *left, const Value *extra)
{
    RtCtx *rc = s->op.rc;
    const TypeId *t = s->op.node->out.types;
    if (s->out && chunk_full(s->out)) {
        Chunk *c = s->out;
        s->out = NULL;
        if (rt_emit(&s->op, c))
            return -1;
    }
    if (!s->out)
        s->out = chunk_new(rc->chunk_arena, s->n_out, t, CHUNK_DEFAULT_CAP);
    Value row[WEIR_ROW_VALUES];
    memcpy(row, left, sizeof(Value) * (size_t)s->n_left);
    if (s->n_out > s->n_left) {
        row[s->n_left] = *extra;
        row[s->n_left].type = t[s->n_left];
    }
    chunk_append(s->out, op, row);
    return 0;
}

static int emit_pending(SemiOp *s)
{
    if (s->out && s->out->n_rows) {
        Chunk *c = s->out;
        s->out = NULL;
        return rt_emit(&s->op, c);
    }
    return 0;
}

/* Is the encoding of x equal to that of y (both one value)? */
static bool value_equal_enc(const Value *x, const Value *y)
{
    if (x->null || y->null)
        return x->null && y->null;
    Buf a = BUF_INIT, b = BUF_INIT;
    row_encode(&a, x, 1);
    row_encode(&b, y, 1);
    bool eq = a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
    buf_free(&a);
    buf_free(&b);
    return eq;
}

/* Appends a 128-bit hash of the encoded row to key (a row of no columns encodes as nothing). */
static void row_hash(const Buf *row, Buf *key)
{
    const void *p = row->len ? row->data : "";
    unsigned char hb[16];
    put_be64(hb, hash_bytes(p, row->len, WEIR_HASH_SEED_STATE0));
    put_be64(hb + 8, hash_bytes(p, row->len, WEIR_HASH_SEED_STATE1));
    buf_append(key, hb, 16);
}

/* The verdict on a left row from its group, whether its x is NULL and how
 * many rows of the group equal x. */
static int verdict(const SemiOp *s, const Group *g, bool x_null, int64_t match)
{
    if (g->total <= 0)
        return V_FALSE;
    if (!s->is_in)
        return V_TRUE;
    if (x_null)
        return V_NULL;
    if (match > 0)
        return V_TRUE;
    return g->nulls > 0 ? V_NULL : V_FALSE;
}

/* A row's output for a verdict or value: present (SEMI/ANTI), the extra
 * column (MARK/SCALAR). */
static bool shown(const SemiOp *s, int v)
{
    PlanSemiKind k = s->op.node->semi_kind;
    return k == SEMI_SEMI ? v == V_TRUE : k == SEMI_ANTI ? v == V_FALSE : true;
}

static Value mark_value(int v)
{
    return v == V_NULL ? value_null(TYPE_BOOL) : value_bool(v == V_TRUE);
}

/* Emits the change of one left row (count copies) from verdict/value `before`
 * to `after`. For SCALAR the values are given, for the rest the verdicts. */
static int emit_change(SemiOp *s, const Value *left, int64_t count, int vb, int va, const Value *xb, const Value *xa)
{
    PlanSemiKind k = s->op.node->semi_kind;
    if (k == SEMI_SEMI || k == SEMI_ANTI) {
        bool b = shown(s, vb), a = shown(s, va);
        for (int64_t c = 0; c < count && b != a; c++)
            if (emit_row(s, a ? OP_INSERT : OP_DELETE, left, NULL))
                return -1;
        return 0;
    }
    Value mb = k == SEMI_MARK ? mark_value(vb) : *xb, ma = k == SEMI_MARK ? mark_value(va) : *xa;
    if (k == SEMI_MARK ? vb == va : value_equal_enc(xb, xa))
        return 0;
    for (int64_t c = 0; c < count; c++)
        if (emit_row(s, OP_UPDATE_BEFORE, left, &mb) || emit_row(s, OP_UPDATE_AFTER, left, &ma))
            return -1;
    return 0;
}

/* Resets out to the key group of correlation key kv, when the view has
 * key groups (see the file comment); else empties it. */
static void put_kg(SemiOp *s, const Value *kv, Buf *out)
{
    const PlanNode *n = s->op.node;
    buf_reset(out);
    if (!n->key_groups)
        return;
    unsigned char pre[WEIR_KG_PREFIX];
    weir_kg_put(pre, rt_row_kg(kv, n->n_join_keys, NULL, n->key_groups));
    buf_append(out, pre, WEIR_KG_PREFIX);
}

/* [kg][tag][corr] (+ more by the caller) into out; false when a correlation key is NULL. */
static bool right_key(SemiOp *s, int tag, const Value *vals, const int *keys, Buf *out)
{
    const PlanNode *n = s->op.node;
    Value kv[WEIR_MAX_KEY_COLUMNS];
    bool null = false;
    for (int k = 0; k < n->n_join_keys; k++) {
        kv[k] = vals[keys[k]];
        null |= kv[k].null;
    }
    put_kg(s, kv, out);
    buf_put_u8(out, (uint8_t)tag);
    key_encode(out, kv, n->n_join_keys);
    return !null;
}

static int get_i64s(StorTable *t, const Buf *k, int64_t *a, int64_t *b, RtCtx *rc)
{
    const void *v;
    size_t vl;
    *a = 0;
    if (b)
        *b = 0;
    int f = stor_table_get(t, k->data, k->len, &v, &vl, rc->err);
    if (f < 0)
        return -1;
    if (f == 1 && vl >= 8)
        *a = (int64_t)get_be64(v);
    if (f == 1 && b && vl >= 16)
        *b = (int64_t)get_be64((const unsigned char *)v + 8);
    return 0;
}

static int get_group(SemiOp *s, const Value *vals, const int *keys, Group *g)
{
    g->total = g->nulls = 0;
    if (!right_key(s, TAG_GROUP, vals, keys, &s->pbuf))
        return 0;
    return get_i64s(s->op.table2, &s->pbuf, &g->total, &g->nulls, s->op.rc);
}

/* Rows of the group whose IN column equals x (x not NULL). */
static int get_match(SemiOp *s, const Value *vals, const int *keys, const Value *x, int64_t *m)
{
    *m = 0;
    if (!right_key(s, TAG_MATCH, vals, keys, &s->pbuf))
        return 0;
    key_encode(&s->pbuf, x, 1);
    return get_i64s(s->op.table2, &s->pbuf, m, NULL, s->op.rc);
}

/* SCALAR: the group's value: the default when empty, its row's value when
 * it has one, NULL when it has more (an error, see the file comment). The
 * value's strings are copied into the chunk arena. */
static int group_value(SemiOp *s, const Value *vals, const int *keys, const Group *g, Value *out)
{
    const PlanNode *n = s->op.node;
    RtCtx *rc = s->op.rc;
    *out = value_null(n->out.types[s->n_left]);
    if (g->total <= 0) {
        *out = n->scalar_default;
        return 0;
    }
    if (g->total > 1)
        return 0;
    right_key(s, TAG_ROW, vals, keys, &s->pbuf);
    StorIter *it;
    if (stor_iter_open(s->op.table2, s->pbuf.data, s->pbuf.len, &it, rc->err))
        return -1;
    const void *k, *v;
    size_t kl, vl;
    int got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err);
    if (got == 1 && vl > 8) {
        Value rv[WEIR_ROW_VALUES];
        char *copy = arena_strndup(rc->chunk_arena, (const char *)v + 8, vl - 8);
        if (row_decode(copy, vl - 8, rv, s->n_right) == 0)
            *out = rv[n->scalar_col];
    }
    stor_iter_close(it);
    return got < 0 ? -1 : 0;
}

/* Left rows under prefix [corr] or [corr][y] (the prefix in s->ybuf):
 * re-judged after a change of their group from gb to ga. For IN, the rows
 * whose x encodes as y_enc had mb matches before and ma after (other rows'
 * matches are looked up); for SCALAR the value went from xb to xa. */
static int rescan(SemiOp *s, const Group *gb, const Group *ga, const Buf *y_enc, int64_t mb, int64_t ma,
                  const Value *xb, const Value *xa)
{
    const PlanNode *n = s->op.node;
    RtCtx *rc = s->op.rc;
    StorIter *it;
    /* Collected first: emitting does not touch the left table, but the
     * match lookups use the same buffers as the scan's caller. */
    Buf pfx = BUF_INIT;
    buf_append(&pfx, s->ybuf.data, s->ybuf.len);
    if (stor_iter_open(s->op.table, pfx.data, pfx.len, &it, rc->err)) {
        buf_free(&pfx);
        return -1;
    }
    const void *k, *v;
    size_t kl, vl;
    int got, rcode = 0;
    Value left[WEIR_ROW_VALUES];
    while (!rcode && (got = stor_iter_next(it, &k, &kl, &v, &vl, rc->err)) == 1) {
        if (vl < 8)
            continue;
        int64_t count = (int64_t)get_be64(v);
        char *row = arena_strndup(rc->chunk_arena, (const char *)v + 8, vl - 8);
        if (row_decode(row, vl - 8, left, s->n_left))
            continue;
        int vb = V_TRUE, va = V_TRUE;
        if (n->semi_kind != SEMI_SCALAR) {
            int64_t b = 0, a = 0;
            const Value *x = s->is_in ? &left[n->in_left_col] : NULL;
            if (x && !x->null) {
                buf_reset(&s->rbuf);
                key_encode(&s->rbuf, x, 1);
                if (y_enc && s->rbuf.len == y_enc->len && memcmp(s->rbuf.data, y_enc->data, y_enc->len) == 0) {
                    b = mb;
                    a = ma;
                } else if (get_match(s, left, n->left_keys, x, &b)) {
                    rcode = -1;
                    break;
                } else {
                    a = b;
                }
            }
            vb = verdict(s, gb, x && x->null, b);
            va = verdict(s, ga, x && x->null, a);
        }
        rcode = emit_change(s, left, count, vb, va, xb, xa);
    }
    stor_iter_close(it);
    buf_free(&pfx);
    return rcode || got < 0 ? -1 : 0;
}

/* A row of the subquery (sign +1 or -1). */
static int apply_right(SemiOp *s, const Value *vals, int sign)
{
    const PlanNode *n = s->op.node;
    RtCtx *rc = s->op.rc;
    StorTable *t = s->op.table2;
    const int *keys = n->right_keys;
    Group gb, ga;
    if (!right_key(s, TAG_GROUP, vals, keys, &s->kbuf))
        return 0; /* a NULL correlation key equals no left row */
    if (n->key_groups && rt_kg_check(&s->op, weir_kg_get(s->kbuf.data)))
        return -1;
    if (get_group(s, vals, keys, &gb))
        return -1;
    if (sign < 0 && gb.total <= 0) {
        rt_row_error(rc, "subquery: a retraction of a row that is not there");
        rc->stats.eval_errors++;
        return 0;
    }
    const Value *y = s->is_in ? &vals[n->in_right_col] : NULL;
    ga = gb;
    ga.total += sign;
    if (y && y->null)
        ga.nulls += sign;
    Value xb = {0}, xa = {0};
    if (n->semi_kind == SEMI_SCALAR && group_value(s, vals, keys, &gb, &xb))
        return -1;
    /* The group's counts. */
    int rcode;
    if (ga.total <= 0) {
        rcode = stor_table_delete(t, s->kbuf.data, s->kbuf.len, rc->err);
    } else {
        buf_reset(&s->vbuf);
        buf_put_u64be(&s->vbuf, (uint64_t)ga.total);
        buf_put_u64be(&s->vbuf, (uint64_t)ga.nulls);
        rcode = stor_table_put(t, s->kbuf.data, s->kbuf.len, s->vbuf.data, s->vbuf.len, rc->err);
    }
    if (rcode)
        return -1;
    /* IN: the count of rows equal to y. */
    int64_t mb = 0, ma = 0;
    Buf y_enc = BUF_INIT;
    if (y && !y->null) {
        key_encode(&y_enc, y, 1);
        right_key(s, TAG_MATCH, vals, keys, &s->kbuf);
        buf_append(&s->kbuf, y_enc.data, y_enc.len);
        if (get_i64s(t, &s->kbuf, &mb, NULL, rc))
            goto fail;
        ma = mb + sign;
        buf_reset(&s->vbuf);
        buf_put_u64be(&s->vbuf, (uint64_t)ma);
        if (ma <= 0 ? stor_table_delete(t, s->kbuf.data, s->kbuf.len, rc->err)
                    : stor_table_put(t, s->kbuf.data, s->kbuf.len, s->vbuf.data, s->vbuf.len, rc->err))
            goto fail;
    }
    /* SCALAR: the row itself, then the group's new value. */
    if (n->semi_kind == SEMI_SCALAR) {
        right_key(s, TAG_ROW, vals, keys, &s->kbuf);
        buf_reset(&s->rbuf);
        row_encode(&s->rbuf, vals, s->n_right);
        row_hash(&s->rbuf, &s->kbuf);
        int64_t c;
        if (get_i64s(t, &s->kbuf, &c, NULL, rc))
            goto fail;
        c += sign;
        buf_reset(&s->vbuf);
        buf_put_u64be(&s->vbuf, (uint64_t)c);
        buf_append(&s->vbuf, s->rbuf.data, s->rbuf.len);
        if (c <= 0 ? stor_table_delete(t, s->kbuf.data, s->kbuf.len, rc->err)
                   : stor_table_put(t, s->kbuf.data, s->kbuf.len, s->vbuf.data, s->vbuf.len, rc->err))
            goto fail;
        s->multi += (ga.total > 1) - (gb.total > 1);
        if (ga.total > 1 && gb.total <= 1 && !rc->batch) {
            rt_row_error(rc, "more than one row returned by a subquery used as an expression");
            rc->stats.eval_errors++;
        }
        if (group_value(s, vals, keys, &ga, &xa))
            goto fail;
    }
    /* Which left rows can see a difference: the group's when its emptiness,
     * NULL count or value changes, else those whose x is y. */
    bool group_wide = (gb.total > 0) != (ga.total > 0) || (s->is_in && (gb.nulls > 0) != (ga.nulls > 0)) ||
                      (n->semi_kind == SEMI_SCALAR && !value_equal_enc(&xb, &xa));
    bool some = s->is_in && y && !y->null && (mb > 0) != (ma > 0);
    if (group_wide || some) {
        Value kv[WEIR_MAX_KEY_COLUMNS];
        for (int k = 0; k < n->n_join_keys; k++)
            kv[k] = vals[keys[k]];
        put_kg(s, kv, &s->ybuf);
        key_encode(&s->ybuf, kv, n->n_join_keys);
        if (!group_wide)
            buf_append(&s->ybuf, y_enc.data, y_enc.len);
        if (rescan(s, &gb, &ga, y && !y->null ? &y_enc : NULL, mb, ma, &xb, &xa))
            goto fail;
    }
    buf_free(&y_enc);
    return 0;
fail:
    buf_free(&y_enc);
    return -1;
}

/* A left row (sign +1 or -1): judged now, kept for later changes of its group. */
static int apply_left(SemiOp *s, const Value *vals, int sign)
{
    const PlanNode *n = s->op.node;
    RtCtx *rc = s->op.rc;
    Value kv[WEIR_MAX_KEY_COLUMNS + 1];
    int nk = n->n_join_keys;
    for (int k = 0; k < nk; k++)
        kv[k] = vals[n->left_keys[k]];
    if (s->is_in)
        kv[nk++] = vals[n->in_left_col];
    put_kg(s, kv, &s->kbuf);
    if (n->key_groups && rt_kg_check(&s->op, weir_kg_get(s->kbuf.data)))
        return -1;
    key_encode(&s->kbuf, kv, nk);
    buf_reset(&s->rbuf);
    row_encode(&s->rbuf, vals, s->n_left);
    row_hash(&s->rbuf, &s->kbuf);
    int64_t count;
    if (get_i64s(s->op.table, &s->kbuf, &count, NULL, rc))
        return -1;
    if (sign < 0 && count <= 0) {
        rt_row_error(rc, "subquery: a retraction of a row that is not there");
        rc->stats.eval_errors++;
        return 0;
    }
    Group g;
    if (get_group(s, vals, n->left_keys, &g))
        return -1;
    int v = V_TRUE;
    Value x = {0};
    if (n->semi_kind == SEMI_SCALAR) {
        if (group_value(s, vals, n->left_keys, &g, &x))
            return -1;
    } else {
        const Value *xin = s->is_in ? &vals[n->in_left_col] : NULL;
        int64_t m = 0;
        if (xin && !xin->null && g.total > 0 && get_match(s, vals, n->left_keys, xin, &m))
            return -1;
        v = verdict(s, &g, xin && xin->null, m);
        x = mark_value(v);
    }
    if (shown(s, v) && emit_row(s, sign > 0 ? OP_INSERT : OP_DELETE, vals, &x))
        return -1;
    count += sign;
    if (count <= 0)
        return stor_table_delete(s->op.table, s->kbuf.data, s->kbuf.len, rc->err);
    buf_reset(&s->vbuf);
    buf_put_u64be(&s->vbuf, (uint64_t)count);
    buf_append(&s->vbuf, s->rbuf.data, s->rbuf.len);
    return stor_table_put(s->op.table, s->kbuf.data, s->kbuf.len, s->vbuf.data, s->vbuf.len, rc->err);
}

static int side_push(SemiOp *s, int side, Chunk *c)
{
    Value vals[WEIR_ROW_VALUES];
    int n = side ? s->n_right : s->n_left;
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < n; i++)
            chunk_get(c, i, r, &vals[i]);
        int sign = rowop_is_add(c->ops[r]) ? 1 : -1;
        if (side ? apply_right(s, vals, sign) : apply_left(s, vals, sign))
            return -1;
    }
    return emit_pending(s);
}

static int side_watermark(SemiOp *s, int side, int64_t wm)
{
    if (wm <= s->wm[side])
        return 0;
    s->wm[side] = wm;
    int64_t m = s->wm[0] < s->wm[1] ? s->wm[0] : s->wm[1];
    if (m > s->emitted_wm) {
        s->emitted_wm = m;
        return rt_emit_watermark(&s->op, m);
    }
    return 0;
}

static int port_push(RtOp *op, Chunk *c)
{
    SemiPort *p = (SemiPort *)op;
    p->s->op.counters.rows_in += (uint64_t)c->n_rows; /* rows in count at the operator, not its port */
    return side_push(p->s, p->side, c);
}

static int port_watermark(RtOp *op, int64_t wm)
{
    SemiPort *p = (SemiPort *)op;
    return side_watermark(p->s, p->side, wm);
}

static const RtOpVt PORT_VT = {.push = port_push, .watermark = port_watermark};

static int semi_push(RtOp *op, Chunk *c) { return side_push((SemiOp *)op, 0, c); }
static int semi_watermark(RtOp *op, int64_t wm) { return side_watermark((SemiOp *)op, 0, wm); }

/* End of an ad hoc query's input: a scalar subquery must have had at most one row. */
static int semi_finish(RtOp *op)
{
    SemiOp *s = (SemiOp *)op;
    if (s->multi > 0)
        return werr(op->rc->err, SQLSTATE_CARDINALITY_VIOLATION, 0, "more than one row returned by a subquery used as an expression");
    return emit_pending(s);
}

static RtOp *semi_input(RtOp *op, int k) { return &((SemiOp *)op)->port[k ? 1 : 0].op; }

static void semi_close(RtOp *op)
{
    SemiOp *s = (SemiOp *)op;
    stor_table_close(op->table);
    stor_table_close(op->table2);
    buf_free(&s->kbuf);
    buf_free(&s->rbuf);
    buf_free(&s->vbuf);
    buf_free(&s->pbuf);
    buf_free(&s->ybuf);
    free(s);
}

static const RtOpVt SEMI_VT = {.push = semi_push, .watermark = semi_watermark, .finish = semi_finish,
                               .close = semi_close, .input = semi_input};

RtOp *rt_op_semijoin_new(RtCtx *rc, const PlanNode *n)
{
    /* The planner's check_limits: the key and row arrays below are sized by these. */
    assert(n->n_join_keys <= WEIR_MAX_KEY_COLUMNS && n->out.n <= WEIR_MAX_COLUMNS);
    SemiOp *s = xcalloc(1, sizeof *s);
    s->op.vt = &SEMI_VT;
    s->op.node = n;
    s->op.rc = rc;
    s->op.wm = TS_MINUS_INF;
    s->wm[0] = s->wm[1] = s->emitted_wm = TS_MINUS_INF;
    s->n_left = n->inputs[0]->out.n;
    s->n_right = n->inputs[1]->out.n;
    s->n_out = n->out.n;
    s->is_in = n->in_left_col >= 0 && n->semi_kind != SEMI_SCALAR;
    for (int k = 0; k < 2; k++)
        s->port[k] = (SemiPort){.op = {.vt = &PORT_VT, .node = n, .rc = rc, .wm = TS_MINUS_INF}, .s = s, .side = k};
    if (rt_open_state(rc, n->table_id, &s->op.table, rc->err) ||
        rt_open_state(rc, n->table_id2, &s->op.table2, rc->err)) {
        semi_close(&s->op);
        return NULL;
    }
    return &s->op;
}
