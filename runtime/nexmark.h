/*
 * nexmark.h: the built-in Nexmark generator (op_nexmark.c), the source
 * connector `connector = 'nexmark'`.
 *
 * One stream of events numbered 0, 1, 2...: event n is a person when
 * n % 50 == 0, an auction when it is 1..3, a bid otherwise. Each source
 * declares the columns it wants of one table type (`nexmark.table.type` =
 * person, auction or bid) and gets the events of that kind; three sources
 * with the same options see one consistent stream (bids refer to the
 * auctions and persons the others produce). Every field of event n is a
 * pure function of (seed, n, field), so a generator resumed at event n
 * produces exactly what an uninterrupted one would, whatever columns the
 * source declares.
 *
 * The server validates a CREATE SOURCE with rt_nexmark_config; the
 * runtime's source operator and the unit tests drive the generator below.
 */
#ifndef WEIR_RUNTIME_NEXMARK_H
#define WEIR_RUNTIME_NEXMARK_H

#include <stdbool.h>
#include <stdint.h>

#include "chunk.h"
#include "planner.h"

typedef enum RtNxTable { RT_NX_PERSON, RT_NX_AUCTION, RT_NX_BID } RtNxTable;

/* The generator's parameters, from the source's WITH options. */
typedef struct RtNxConfig {
    RtNxTable table;           /* which events the source emits */
    int64_t event_num;         /* events 0..event_num-1 (all kinds), then the source ends; -1 = unbounded */
    int64_t rate;              /* events per second of event time (all kinds), >= 1 */
    int64_t base_time_ms;      /* event time of event 0, ms since the epoch; -1 = wall clock at first start */
    uint64_t seed;             /* same seed, same events */
    bool pace;                 /* wait for the wall clock to reach each event's time */
    int chunk_rows;            /* rows per chunk, 1..65536 */
} RtNxConfig;

/* Default rate, events per second of event time (all kinds): the Nexmark
 * generator's own default (its suite runs at 10M/s by saying so). One
 * default for the connector and `weir nexmark`, so a CSV printed without
 * --rate holds the rows a source declared without the option reads. */
#define RT_NX_DEFAULT_RATE 10000

/* Default event time of event 0 (2026-01-01 00:00:00 UTC), when not pacing. */
#define RT_NX_DEFAULT_BASE_MS INT64_C(1767225600000)

/*
 * Reads the nexmark WITH options of source r and matches its declared
 * columns by name to the generated fields of the table type (fields[i]
 * receives the field of column i; fields may be NULL to only validate).
 * Unknown options, unknown columns and columns of the wrong type are
 * errors (22023, 42703, 42804) naming the culprit.
 */
int rt_nexmark_config(const CatRelation *r, RtNxConfig *cfg, int *fields, WError *err);

/* Event time of event n in milliseconds: base + floor(n * 1000 / rate). */
int64_t rt_nexmark_event_time_ms(const RtNxConfig *cfg, int64_t base_ms, int64_t n);

typedef struct RtNxGen RtNxGen;

/* A generator for n_cols columns holding fields[0..n_cols) (copied). base_ms
 * is the event time of event 0 (cfg's, or the one a paced source fixed at
 * its first start). Free with rt_nexmark_gen_free. */
RtNxGen *rt_nexmark_gen_new(const RtNxConfig *cfg, int64_t base_ms, int n_cols, const int *fields);
void rt_nexmark_gen_free(RtNxGen *g);

/*
 * Appends to c (empty or partly filled, with the generator's columns in
 * order) one +I row per event of the generator's kind among events
 * [*next, limit), stopping early when c is full. *next advances past every
 * event examined, so it can be saved and handed to a new generator to
 * continue exactly. Strings point into the generator (valid until it is
 * freed) or into c's arena. Returns the number of rows added.
 */
int rt_nexmark_gen_fill(RtNxGen *g, int64_t *next, int64_t limit, Chunk *c);

/* The source operator (runtime-internal; the dispatch in op_source.c calls it). */
struct RtOp;
struct RtCtx;
struct RtOp *rt_op_nexmark_source_new(struct RtCtx *rc, const PlanNode *n);

#endif
