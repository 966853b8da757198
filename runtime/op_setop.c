/*
 * op_setop.c: INTERSECT [ALL] and EXCEPT [ALL] of two changelogs.
 *
 * State: one entry per distinct row, key = a 128-bit hash of the row's
 * key encoding (equal values alike: 3 and 3.00, -0 and 0, '1 day' and
 * '24 hours', as GROUP BY and DISTINCT; plans before revision 5 hash the
 * row's bytes) (LMDB keys are at most 511 bytes, so the row itself is in
 * the value), value = its count on the left (8 bytes), its count on the
 * right (8 bytes), then the row shown for all of them: the first left row
 * while the output holds none (PostgreSQL shows the left spelling). The output holds each row m(l, r) times:
 *
 *   INTERSECT      1 if l > 0 and r > 0, else 0
 *   INTERSECT ALL  min(l, r)
 *   EXCEPT         1 if l > 0 and r = 0, else 0
 *   EXCEPT ALL     max(l - r, 0)
 *
 * A change on either side recomputes m for that row and emits the
 * difference (+I or -D copies), so the output stays exact under
 * retractions on both sides. An entry goes when both counts are zero.
 * Nothing bounds the state but the inputs' own sizes: the planner asks for
 * the unbounded-state opt-in when an input is an append-only stream.
 * No watermark leaves this operator (its rows follow no event-time order).
 * With key groups (planner revision 6) the key begins with the row's 2-byte
 * key group, over the whole row as the exchange before it hashes it.
 */
#include "runtime_int.h"
#include "hash_seeds.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct SetOp SetOp;

typedef struct SetPort {
    RtOp op;
    SetOp *s;
    int side;
} SetPort;

struct SetOp {
    RtOp op;
    SetPort port[2];
    Chunk *out;
    Buf kbuf, vbuf, nbuf, ebuf, rbuf;
};

static int64_t multiplicity(AstSetOp op, int64_t l, int64_t r)
{
    switch (op) {
    case SETOP_INTERSECT: return l > 0 && r > 0;
    case SETOP_INTERSECT_ALL: return l < r ? l : r;
    case SETOP_EXCEPT: return l > 0 && r == 0;
    case SETOP_EXCEPT_ALL: return l > r ? l - r : 0;
    default: return 0;
    }
}

static int emit_row(SetOp *s, RowOp op, const Value *vals)
{
    RtCtx *rc = s->op.rc;
    if (s->out && chunk_full(s->out)) {
        Chunk *c = s->out;
        s->out = NULL;
        if (rt_emit(&s->op, c))
            return -1;
    }
    if (!s->out)
        s->out = chunk_new(rc->chunk_arena, s->op.node->out.n, s->op.node->out.types, CHUNK_DEFAULT_CAP);
    chunk_append(s->out, op, vals);
    return 0;
}

/* Applies one row of side `side` (sign +1 or -1) and emits the change of its multiplicity. */
static int apply(SetOp *s, int side, const Value *vals, int sign)
{
    RtCtx *rc = s->op.rc;
    const PlanNode *n = s->op.node;
    int ncols = n->out.n;
    buf_reset(&s->vbuf);
    row_encode(&s->vbuf, vals, ncols);
    const Buf *h = &s->vbuf;
    if (n->setop_eq_keys) {
        buf_reset(&s->ebuf);
        key_encode(&s->ebuf, vals, ncols);
        h = &s->ebuf;
    }
    unsigned char hb[16];
    put_be64(hb, hash_bytes(h->data, h->len, WEIR_HASH_SEED_STATE0));
    put_be64(hb + 8, hash_bytes(h->data, h->len, WEIR_HASH_SEED_STATE1));
    buf_reset(&s->kbuf);
    if (n->key_groups) {
        unsigned char pre[WEIR_KG_PREFIX];
        int kg = rt_row_kg(vals, ncols, NULL, n->key_groups);
        if (rt_kg_check(&s->op, kg))
            return -1;
        weir_kg_put(pre, kg);
        buf_append(&s->kbuf, pre, WEIR_KG_PREFIX);
    }
    buf_append(&s->kbuf, hb, 16);
    const void *v;
    size_t vl;
    int f = stor_table_get(s->op.table, s->kbuf.data, s->kbuf.len, &v, &vl, rc->err);
    if (f < 0)
        return -1;
    int64_t cnt[2] = {0, 0};
    bool have = f == 1 && vl >= 16;
    if (have) {
        cnt[0] = (int64_t)get_be64(v);
        cnt[1] = (int64_t)get_be64((const unsigned char *)v + 8);
    }
    int64_t before = multiplicity(n->set_op, cnt[0], cnt[1]);
    /* The row shown: the stored one, unless a left row comes while none is
     * shown (a row already emitted is retracted in the spelling it had). */
    Value rep[WEIR_ROW_VALUES];
    const Value *shown = vals;
    if (n->setop_eq_keys && have && !(side == 0 && sign > 0 && before == 0)) {
        buf_reset(&s->rbuf);
        buf_append(&s->rbuf, (const char *)v + 16, vl - 16);
        if (row_decode(s->rbuf.data, s->rbuf.len, rep, ncols))
            return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt set operation state");
        buf_reset(&s->vbuf);
        buf_append(&s->vbuf, s->rbuf.data, s->rbuf.len);
        shown = rep;
    }
    cnt[side] += sign;
    if (cnt[side] < 0)
        cnt[side] = 0; /* a retraction of a row never inserted: nothing to take away */
    int64_t after = multiplicity(n->set_op, cnt[0], cnt[1]);
    int rcode;
    if (cnt[0] == 0 && cnt[1] == 0) {
        rcode = stor_table_delete(s->op.table, s->kbuf.data, s->kbuf.len, rc->err);
    } else {
        buf_reset(&s->nbuf);
        buf_put_u64be(&s->nbuf, (uint64_t)cnt[0]);
        buf_put_u64be(&s->nbuf, (uint64_t)cnt[1]);
        buf_append(&s->nbuf, s->vbuf.data, s->vbuf.len);
        rcode = stor_table_put(s->op.table, s->kbuf.data, s->kbuf.len, s->nbuf.data, s->nbuf.len, rc->err);
    }
    if (rcode)
        return -1;
    for (int64_t k = before; k < after; k++)
        if (emit_row(s, OP_INSERT, shown))
            return -1;
    for (int64_t k = after; k < before; k++)
        if (emit_row(s, OP_DELETE, shown))
            return -1;
    return 0;
}

static int side_push(SetOp *s, int side, Chunk *c)
{
    Value vals[WEIR_ROW_VALUES];
    assert(c->n_cols <= WEIR_ROW_VALUES); /* the planner refused more (check_limits, 54000) */
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < c->n_cols; i++)
            chunk_get(c, i, r, &vals[i]);
        if (apply(s, side, vals, rowop_is_add(c->ops[r]) ? 1 : -1))
            return -1;
    }
    if (s->out && s->out->n_rows) {
        Chunk *o = s->out;
        s->out = NULL;
        return rt_emit(&s->op, o);
    }
    return 0;
}

static int port_push(RtOp *op, Chunk *c)
{
    SetPort *p = (SetPort *)op;
    p->s->op.counters.rows_in += (uint64_t)c->n_rows; /* rows in count at the operator, not its port */
    return side_push(p->s, p->side, c);
}

static int no_watermark(RtOp *op, int64_t wm) { return 0; }
static int no_finish(RtOp *op) { return 0; }
static void port_close(RtOp *op) { }

static const RtOpVt PORT_VT = {.push = port_push, .watermark = no_watermark, .finish = no_finish, .close = port_close};

static int setop_push(RtOp *op, Chunk *c) { return side_push((SetOp *)op, 0, c); }

static void setop_close(RtOp *op)
{
    SetOp *s = (SetOp *)op;
    stor_table_close(op->table);
    buf_free(&s->kbuf);
    buf_free(&s->vbuf);
    buf_free(&s->nbuf);
    buf_free(&s->ebuf);
    buf_free(&s->rbuf);
    free(s);
}

static RtOp *setop_input(RtOp *op, int k) { return &((SetOp *)op)->port[k ? 1 : 0].op; }

static const RtOpVt SETOP_VT = {.push = setop_push, .watermark = no_watermark, .finish = no_finish,
                                .close = setop_close, .input = setop_input};

RtOp *rt_op_setop_new(RtCtx *rc, const PlanNode *n)
{
    SetOp *s = xcalloc(1, sizeof *s);
    s->op.vt = &SETOP_VT;
    s->op.node = n;
    s->op.rc = rc;
    s->op.wm = TS_MINUS_INF;
    for (int k = 0; k < 2; k++)
        s->port[k] = (SetPort){.op = {.vt = &PORT_VT, .node = n, .rc = rc, .wm = TS_MINUS_INF}, .s = s, .side = k};
    if (rt_op_open_table(&s->op, rc->err)) {
        setop_close(&s->op);
        return NULL;
    }
    return &s->op;
}
