/*
 * chunk.h: the one data format that flows between operators.
 *
 * A chunk is a columnar batch of up to `cap` rows: one typed array per
 * column (see types.h for the physical kinds), a null byte per row and
 * column, and an op per row (+I, -D, -U, +U). Append-only streams carry
 * only +I. Strings point into the chunk's arena (or into memory that
 * outlives the chunk, such as a state table's row buffer held for the
 * duration of one operator call).
 *
 * `wm` optionally carries, for each row, the event-time watermark in
 * effect when the row arrived (TS_MINUS_INF before the first). Sources
 * fill it so that operators judge lateness row by row, independent of how
 * rows were batched into chunks (docs/architecture.md: "the watermark advances row by
 * row"). Operators that pass rows through keep it aligned.
 */
#ifndef WEIR_COMMON_CHUNK_H
#define WEIR_COMMON_CHUNK_H

#include "types.h"

typedef enum RowOp {
    OP_INSERT = 0,        /* +I */
    OP_DELETE = 1,        /* -D */
    OP_UPDATE_BEFORE = 2, /* -U: the old row of an update pair */
    OP_UPDATE_AFTER = 3,  /* +U: the new row of an update pair */
} RowOp;

static inline bool rowop_is_add(uint8_t op) { return op == OP_INSERT || op == OP_UPDATE_AFTER; }
const char *rowop_name(RowOp op); /* "+I", "-D", "-U", "+U" */

typedef struct Column {
    TypeId type;
    uint8_t *nulls;         /* nulls[r] != 0: row r is NULL in this column */
    union {
        int64_t *i;
        double *f;
        StrRef *s;
        Interval *iv;
        NumCell *n;
        void *raw;
    } v;
} Column;

typedef struct Chunk {
    int n_cols;
    int n_rows;             /* rows in use, <= cap */
    int cap;                /* rows allocated */
    Column *cols;
    uint8_t *ops;           /* RowOp per row */
    int64_t *wm;            /* watermark in effect per row, or NULL */
    int32_t src_partition;  /* the source partition all rows came from, -1 if none or mixed */
    int32_t src_n_partitions; /* partitions of that source (for per-partition watermarks) */
    int64_t *src_offsets;   /* per row, its record's offset in that partition, or NULL (set by Kafka sources) */
    Arena *arena;           /* owns arrays and strings; borrowed */
} Chunk;

#define CHUNK_DEFAULT_CAP 1024

/* Bytes one value of type t takes in a column array. */
size_t chunk_phys_size(TypeId t);
/* A new empty chunk in a, with n_cols columns of the given types. */
Chunk *chunk_new(Arena *a, int n_cols, const TypeId *types, int cap);
/* Gives the chunk a per-row watermark array (TS_MINUS_INF filled). */
void chunk_enable_wm(Chunk *c);
/* Reads one cell. Strings are borrowed from the chunk. */
void chunk_get(const Chunk *c, int col, int row, Value *out);
/* Writes one cell. Strings are copied into the chunk's arena. */
void chunk_set(Chunk *c, int col, int row, const Value *v);
/* Appends a row (vals has n_cols entries). Returns the row index, or -1 when full. */
int chunk_append(Chunk *c, RowOp op, const Value *vals);
/* Copies row r of src (same schema) onto the end of dst. -1 when full. */
int chunk_append_from(Chunk *dst, const Chunk *src, int r);
/* A NUMERIC cell to and from a Value (the scale moves to Value.nscale). */
static inline void num_cell_get(const NumCell *c, Value *v)
{
    v->u.n = c->coef;
    v->nscale = (uint8_t)c->scale;
}
static inline void num_cell_put(NumCell *c, const Value *v)
{
    c->coef = v->u.n;
    c->scale = v->nscale;
}
static inline bool chunk_full(const Chunk *c) { return c->n_rows >= c->cap; }

#endif
