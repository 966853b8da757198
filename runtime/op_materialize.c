/*
 * op_materialize.c: keeps a view's rows in its state table.
 *
 * Each change is applied by primary key: +I/+U put the row, -D/-U delete
 * it; a -U followed by its +U for the same key therefore nets to a put.
 * Rows of a keyless append-only stream get a hidden, increasing _row_id as
 * their key; the next id is state too (key 0xFF 0xFF, which no encoded key
 * can equal since those start with 0x00 or 0x01), so ids are never reused
 * after a restart. Ad hoc queries read the table in key order.
 *
 * A parallel view's materialize may be split (plan_dist.c): instance s of
 * P writes its own table, for the keys hashed to it (or, keyless, the rows
 * that reach it, numbered s, s + P, s + 2P, ... from its own saved counter
 * so ids stay unique across instances); readers merge the tables
 * (rt_dataflow_view_table).
 *
 * A keyed materialize of a view with key groups (planner revision 6,
 * plan_dist.c) begins each key with the row's 2-byte key group (over its
 * key columns, or the whole row of a counted view), so a key group is one
 * key range; readers see the keys without it (rt_dataflow_view_table).
 *
 * A table's materialize (upsert) turns whatever feeds the table into its
 * true changelog by looking up the stored row of each key (mat_upsert).
 */
#include "runtime_int.h"
#include "hash_seeds.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char ROW_ID_KEY[2] = {0xff, 0xff};

typedef struct MatOp {
    RtOp op;
    int64_t next_row_id;
    int64_t row_id_step;      /* the instances of a split materialize: ids of instance s are s mod step */
    bool row_id_dirty;
    Buf kbuf, vbuf, pbuf;
    Buf pend;                 /* key of a -U whose delete waits for the next row (its +U) */
    bool pending;
} MatOp;

/* Appends a row to *out (a fresh chunk when it is full, the full one
 * emitted first), with the input row's watermark. */
static int out_row(RtOp *op, Chunk **out, const Chunk *in, int r, RowOp rop, const Value *vals)
{
    if (chunk_full(*out)) {
        if (rt_emit(op, *out))
            return -1;
        *out = chunk_new(op->rc->chunk_arena, op->node->out.n, op->node->out.types, (*out)->cap);
        if (in->wm)
            chunk_enable_wm(*out);
    }
    int d = chunk_append(*out, rop, vals);
    if (in->wm)
        (*out)->wm[d] = in->wm[r];
    return 0;
}

/* A table's rows (n->upsert): an add is the new row of its key, a delete
 * names a key. The input need not know what the table holds (a Kafka
 * upsert topic, a Debezium feed, DML): the output is the exact changelog,
 * an insert, an update pair with the stored old row, or a delete of the
 * stored row; an add equal to the stored row and a delete of a missing key
 * change nothing and are dropped, so readers never see a no-op. */
static int mat_upsert(MatOp *m, Chunk *c)
{
    RtOp *op = &m->op;
    const PlanNode *n = op->node;
    RtCtx *rc = op->rc;
    int ncols = n->out.n;
    Value vals[WEIR_ROW_VALUES], old[WEIR_ROW_VALUES], key[WEIR_ROW_VALUES];
    Chunk *out = chunk_new(rc->chunk_arena, ncols, n->out.types, c->n_rows * 2 > 16 ? c->n_rows * 2 : 16);
    if (c->wm)
        chunk_enable_wm(out);
    for (int r = 0; r < c->n_rows; r++) {
        for (int i = 0; i < ncols; i++)
            chunk_get(c, i, r, &vals[i]);
        for (int k = 0; k < n->n_keys; k++)
            key[k] = vals[n->keys[k]];
        buf_reset(&m->kbuf);
        key_encode(&m->kbuf, key, n->n_keys);
        const void *v;
        size_t vl;
        int f = stor_table_get(op->table, m->kbuf.data, m->kbuf.len, &v, &vl, rc->err);
        if (f < 0)
            return -1;
        if (f == 1 && row_decode(v, vl, old, ncols))
            return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt row in table %s", n->view_name);
        bool add = rowop_is_add(c->ops[r]);
        if (add) {
            buf_reset(&m->vbuf);
            row_encode(&m->vbuf, vals, ncols);
            if (f == 1 && vl == m->vbuf.len && memcmp(v, m->vbuf.data, vl) == 0)
                continue;
            /* The old row is copied into the output before the put replaces it. */
            if (f == 1 && (out_row(op, &out, c, r, OP_UPDATE_BEFORE, old) ||
                           out_row(op, &out, c, r, OP_UPDATE_AFTER, vals)))
                return -1;
            if (f == 0 && out_row(op, &out, c, r, OP_INSERT, vals))
                return -1;
            if (stor_table_put(op->table, m->kbuf.data, m->kbuf.len, m->vbuf.data, m->vbuf.len, rc->err))
                return -1;
        } else {
            if (f == 0)
                continue;
            if (out_row(op, &out, c, r, OP_DELETE, old) ||
                stor_table_delete(op->table, m->kbuf.data, m->kbuf.len, rc->err))
                return -1;
        }
        rc->stats.rows_out++;
    }
    return rt_emit(op, out);
}

/* A keyless append-only view stores each row under the next row id: a new
 * key, whose empty slot in a map of millions of rows is a cache miss (Nexmark
 * q0). The id of the row a few rows on is known, so its slot is loaded while
 * the rows before it are stored. */
#define PREFETCH_AHEAD 8

static void prefetch_row_id(MatOp *m, int64_t id)
{
    Value v = value_int(TYPE_INT8, id);
    buf_reset(&m->pbuf);
    key_encode(&m->pbuf, &v, 1);
    stor_table_prefetch(m->op.table, m->pbuf.data, m->pbuf.len);
}

/* The rows of c (ncols - 1 columns, all adds) as the view has them: a new
 * header over c's columns plus the _row_id column, ids first, first + step,
 * ... (readers of the view's changes index its columns by the view's
 * schema, where _row_id is last). */
static Chunk *with_row_ids(const Chunk *c, int ncols, int64_t first, int64_t step)
{
    Chunk *out = arena_alloc(c->arena, sizeof *out);
    *out = *c;
    out->n_cols = ncols;
    out->cols = arena_alloc(c->arena, sizeof(Column) * (size_t)ncols);
    memcpy(out->cols, c->cols, sizeof(Column) * (size_t)(ncols - 1));
    Column *id = &out->cols[ncols - 1];
    id->type = TYPE_INT8;
    id->nulls = arena_zalloc(c->arena, (size_t)(c->n_rows ? c->n_rows : 1));
    id->v.i = arena_alloc(c->arena, sizeof(int64_t) * (size_t)(c->n_rows ? c->n_rows : 1));
    for (int r = 0; r < c->n_rows; r++)
        id->v.i[r] = first + r * step;
    return out;
}

static int mat_push(RtOp *op, Chunk *c)
{
    MatOp *m = (MatOp *)op;
    if (op->node->upsert)
        return mat_upsert(m, c);
    const PlanNode *n = op->node;
    RtCtx *rc = op->rc;
    int ncols = n->out.n;
    int64_t first_row_id = m->next_row_id;
    Value vals[WEIR_ROW_VALUES], key[WEIR_ROW_VALUES];
    assert(ncols <= WEIR_ROW_VALUES && n->n_keys <= WEIR_ROW_VALUES); /* the planner refused more (check_limits, 54000) */
    /* The key is the row id alone (n->counted keys hash the row instead). */
    bool ahead = n->row_id_key && !n->counted && n->n_keys == 1 && n->keys[0] == ncols - 1;
    if (ahead)
        for (int r = 0; r < PREFETCH_AHEAD && r < c->n_rows; r++)
            prefetch_row_id(m, m->next_row_id + r * m->row_id_step);
    for (int r = 0; r < c->n_rows; r++) {
        if (ahead && r + PREFETCH_AHEAD < c->n_rows)
            prefetch_row_id(m, m->next_row_id + PREFETCH_AHEAD * m->row_id_step);
        int nin = n->row_id_key ? ncols - 1 : ncols;
        for (int i = 0; i < nin; i++)
            chunk_get(c, i, r, &vals[i]);
        if (n->row_id_key) {
            if (!rowop_is_add(c->ops[r]))
                return werr(rc->err, SQLSTATE_INTERNAL, 0, "a retraction reached a keyless view");
            vals[ncols - 1] = value_int(TYPE_INT8, m->next_row_id);
            m->next_row_id += m->row_id_step;
            m->row_id_dirty = true;
        }
        for (int k = 0; k < n->n_keys; k++)
            key[k] = vals[n->keys[k]];
        buf_reset(&m->kbuf);
        key_encode(&m->kbuf, key, n->n_keys);
        if (m->kbuf.len == 0)
            buf_put_u8(&m->kbuf, 0); /* the one row of a keyless (global) aggregation */
        if (n->counted) {
            /* The key is the whole row: a 128-bit hash of it keeps it short (LMDB
             * keys are at most 511 bytes); the row is in the value anyway. */
            unsigned char hb[16];
            put_be64(hb, hash_bytes(m->kbuf.data, m->kbuf.len, WEIR_HASH_SEED_STATE0));
            put_be64(hb + 8, hash_bytes(m->kbuf.data, m->kbuf.len, WEIR_HASH_SEED_STATE1));
            buf_reset(&m->kbuf);
            buf_put_u8(&m->kbuf, 0x01);
            buf_append(&m->kbuf, hb, 16);
        }
        if (n->key_groups) {
            int kg = rt_row_kg(vals, n->n_kg_cols[0], n->kg_cols[0], n->key_groups);
            if (rt_kg_check(op, kg))
                return -1;
            rt_kg_prepend(&m->kbuf, kg);
        }
        if (m->pending) {
            m->pending = false;
            if ((m->kbuf.len != m->pend.len || memcmp(m->kbuf.data, m->pend.data, m->pend.len)) &&
                stor_table_delete(op->table, m->pend.data, m->pend.len, rc->err))
                return -1;
        }
        int rcode;
        if (n->counted) {
            /* Rows that may repeat: the value ends with the row's multiplicity. */
            const void *v;
            size_t vl;
            int64_t count = 0;
            int f = stor_table_get(op->table, m->kbuf.data, m->kbuf.len, &v, &vl, rc->err);
            if (f < 0)
                return -1;
            if (f == 1) {
                Value old[WEIR_ROW_VALUES];
                if (row_decode(v, vl, old, ncols + 1))
                    return werr(rc->err, SQLSTATE_INTERNAL, 0, "corrupt counted row in view %s", n->view_name);
                count = old[ncols].u.i;
            }
            count += rowop_is_add(c->ops[r]) ? 1 : -1;
            if (count <= 0) {
                rcode = stor_table_delete(op->table, m->kbuf.data, m->kbuf.len, rc->err);
            } else {
                vals[ncols] = value_int(TYPE_INT8, count);
                buf_reset(&m->vbuf);
                row_encode(&m->vbuf, vals, ncols + 1);
                rcode = stor_table_put(op->table, m->kbuf.data, m->kbuf.len, m->vbuf.data, m->vbuf.len, rc->err);
            }
        } else if (rowop_is_add(c->ops[r])) {
            buf_reset(&m->vbuf);
            row_encode(&m->vbuf, vals, ncols);
            rcode = stor_table_put(op->table, m->kbuf.data, m->kbuf.len, m->vbuf.data, m->vbuf.len, rc->err);
        } else if (c->ops[r] == OP_UPDATE_BEFORE && r + 1 < c->n_rows && c->ops[r + 1] == OP_UPDATE_AFTER) {
            /* An aggregation updating a group sends -U and +U for every input
             * row: when the +U has the same key it overwrites the row, so the
             * delete waits for it (one write of the entry instead of two). */
            buf_reset(&m->pend);
            buf_append(&m->pend, m->kbuf.data, m->kbuf.len);
            m->pending = true;
            rc->stats.rows_out++;
            continue;
        } else {
            rcode = stor_table_delete(op->table, m->kbuf.data, m->kbuf.len, rc->err);
        }
        if (rcode)
            return -1;
        rc->stats.rows_out++;
    }
    /* To the sinks, subscribers and views over this view, if any. */
    if (n->row_id_key && c->n_cols == ncols - 1 && (op->down || op->n_fan))
        c = with_row_ids(c, ncols, first_row_id, m->row_id_step);
    return rt_emit(op, c);
}

/* Kept (op->wm) so a view created later over this one starts from it. */
static int mat_watermark(RtOp *op, int64_t wm)
{
    if (wm > op->wm)
        op->wm = wm;
    return rt_emit_watermark(op, wm);
}

static int mat_flush_state(RtOp *op, uint64_t epoch)
{
    MatOp *m = (MatOp *)op;
    if (!m->row_id_dirty)
        return 0;
    unsigned char v[8];
    put_be64(v, (uint64_t)m->next_row_id);
    m->row_id_dirty = false;
    return stor_table_put(op->table, ROW_ID_KEY, 2, v, 8, op->rc->err);
}

static int mat_finish(RtOp *op) { return 0; }

static void mat_close(RtOp *op)
{
    MatOp *m = (MatOp *)op;
    stor_table_close(op->table);
    buf_free(&m->kbuf);
    buf_free(&m->pbuf);
    buf_free(&m->vbuf);
    buf_free(&m->pend);
    free(m);
}

static const RtOpVt MAT_VT = {.push = mat_push, .watermark = mat_watermark, .flush_state = mat_flush_state, .finish = mat_finish, .close = mat_close};

RtOp *rt_op_materialize_new(RtCtx *rc, const PlanNode *n)
{
    MatOp *m = xcalloc(1, sizeof *m);
    m->op.vt = &MAT_VT;
    m->op.node = n;
    m->op.rc = rc;
    m->op.wm = TS_MINUS_INF;
    if (rt_op_open_table(&m->op, rc->err)) {
        mat_close(&m->op);
        return NULL;
    }
    const void *v;
    size_t vl;
    int f = stor_table_get(m->op.table, ROW_ID_KEY, 2, &v, &vl, rc->err);
    if (f < 0) {
        mat_close(&m->op);
        return NULL;
    }
    bool split = n->parallelism > 1 && rc->n_shards > 1;
    m->row_id_step = split ? rc->n_shards : 1;
    m->next_row_id = split ? rc->shard : 0;
    if (f == 1 && vl == 8)
        m->next_row_id = (int64_t)get_be64(v);
    return &m->op;
}
