/* chunk.c: see chunk.h. */
#include "chunk.h"

#include <string.h>

const char *rowop_name(RowOp op)
{
    static const char *names[] = {"+I", "-D", "-U", "+U"};
    return (unsigned)op < 4 ? names[op] : "?";
}

size_t chunk_phys_size(TypeId t)
{
    switch (type_phys(t)) {
    case PHYS_I64: return sizeof(int64_t);
    case PHYS_F64: return sizeof(double);
    case PHYS_STR: return sizeof(StrRef);
    case PHYS_IV: return sizeof(Interval);
    case PHYS_NUM: return sizeof(NumCell);
    }
    return 8;
}

Chunk *chunk_new(Arena *a, int n_cols, const TypeId *types, int cap)
{
    Chunk *c = arena_zalloc(a, sizeof *c);
    c->n_cols = n_cols;
    c->cap = cap;
    c->arena = a;
    c->src_partition = -1;
    c->cols = arena_zalloc(a, sizeof(Column) * (size_t)(n_cols ? n_cols : 1));
    c->ops = arena_zalloc(a, (size_t)cap);
    for (int i = 0; i < n_cols; i++) {
        c->cols[i].type = types[i];
        c->cols[i].nulls = arena_zalloc(a, (size_t)cap);
        c->cols[i].v.raw = arena_zalloc(a, chunk_phys_size(types[i]) * (size_t)cap);
    }
    return c;
}

void chunk_enable_wm(Chunk *c)
{
    if (c->wm)
        return;
    c->wm = arena_alloc(c->arena, sizeof(int64_t) * (size_t)c->cap);
    for (int i = 0; i < c->cap; i++)
        c->wm[i] = TS_MINUS_INF;
}

void chunk_get(const Chunk *c, int col, int row, Value *out)
{
    const Column *k = &c->cols[col];
    out->type = k->type;
    out->null = k->nulls[row] != 0;
    switch (type_phys(k->type)) {
    case PHYS_I64: out->u.i = k->v.i[row]; break;
    case PHYS_F64: out->u.f = k->v.f[row]; break;
    case PHYS_STR: out->u.s = k->v.s[row]; break;
    case PHYS_IV: out->u.iv = k->v.iv[row]; break;
    case PHYS_NUM: num_cell_get(&k->v.n[row], out); break;
    }
}

void chunk_set(Chunk *c, int col, int row, const Value *v)
{
    Column *k = &c->cols[col];
    k->nulls[row] = v->null;
    if (v->null) {
        /* Keep the slot defined so vectorized kernels can read it blindly. */
        memset((char *)k->v.raw + chunk_phys_size(k->type) * (size_t)row, 0, chunk_phys_size(k->type));
        return;
    }
    switch (type_phys(k->type)) {
    case PHYS_I64: k->v.i[row] = v->u.i; break;
    case PHYS_F64: k->v.f[row] = v->u.f; break;
    case PHYS_STR: {
        char *p = arena_alloc(c->arena, v->u.s.len + 1);
        if (v->u.s.len)
            memcpy(p, v->u.s.p, v->u.s.len);
        p[v->u.s.len] = 0;
        k->v.s[row].p = p;
        k->v.s[row].len = v->u.s.len;
        break;
    }
    case PHYS_IV: k->v.iv[row] = v->u.iv; break;
    case PHYS_NUM: num_cell_put(&k->v.n[row], v); break;
    }
}

int chunk_append(Chunk *c, RowOp op, const Value *vals)
{
    if (c->n_rows >= c->cap)
        return -1;
    int r = c->n_rows++;
    c->ops[r] = (uint8_t)op;
    for (int i = 0; i < c->n_cols; i++)
        chunk_set(c, i, r, &vals[i]);
    return r;
}

int chunk_append_from(Chunk *dst, const Chunk *src, int r)
{
    if (dst->n_rows >= dst->cap)
        return -1;
    int d = dst->n_rows++;
    dst->ops[d] = src->ops[r];
    if (dst->wm && src->wm)
        dst->wm[d] = src->wm[r];
    for (int i = 0; i < dst->n_cols; i++) {
        Value v;
        chunk_get(src, i, r, &v);
        chunk_set(dst, i, d, &v);
    }
    return d;
}
