/*
 * sink.h: the contract between the sink operator and the connectors that
 * write to external systems (PostgreSQL, SQLite, Kafka, blackhole).
 *
 * Exactly-once works by epochs. The sink operator gathers a view's changes
 * between two checkpoints into one batch per epoch, netted per key: for
 * each key, the row it had when the epoch began (`before`) and the row it
 * has when the epoch ends (`after`). The batch is stored in weir's
 * checkpoint (LMDB) together with the state that produced it; only after
 * that commit is it handed to the writer, on a delivery thread, with
 * write_epoch(). A writer must apply one epoch atomically *and* record the
 * epoch number in the target in the same transaction, so that after a
 * crash last_epoch() tells which epochs the target already has and weir
 * re-delivers only the rest: nothing lost, nothing applied twice.
 *
 * Writers never see the engine lock or the LMDB: they get plain values and
 * may block (network I/O); errors are returned, never fatal to the server,
 * and the operator retries with backoff.
 */
#ifndef WEIR_RUNTIME_SINK_H
#define WEIR_RUNTIME_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "planner.h"
#include "types.h"

/* What a sink writes, fixed at CREATE SINK. */
typedef struct RtSinkSpec {
    const char *name;            /* the sink's name: the key of its progress record */
    int n_options;
    const CatOption *options;    /* WITH (...) as given (connector, url, table, type, primary_key, ...) */
    const char *format;          /* FORMAT (kafka: "plain", "upsert", "debezium"); may be NULL */
    int n_cols;                  /* the columns written, in order */
    const char *const *col_names;
    const TypeId *col_types;
    int n_pk;                    /* upsert key: indexes into the columns; 0 for append-only */
    const int *pk;
    bool upsert;                 /* type = 'upsert' (else 'append-only') */
} RtSinkSpec;

/* One key's net change in an epoch. Values have spec->n_cols entries. */
typedef struct RtSinkChange {
    const Value *before;         /* the row when the epoch began, NULL if none */
    const Value *after;          /* the row when the epoch ended, NULL if deleted */
} RtSinkChange;

typedef struct RtSinkWriter RtSinkWriter;

/* Rows a database target refused and weir recorded in its
 * weir_sink_rejects table (sink option on_error = 'skip'), since open. */
typedef struct RtSinkRejects {
    uint64_t rows;
    char last[320];              /* the last one: epoch, op, row, message, SQLSTATE */
} RtSinkRejects;

typedef struct RtSinkConnector {
    const char *name;            /* "postgres", "sqlite", "kafka", "blackhole" */
    /* Connects and checks the target against spec (columns, types, primary
     * key; creates it when the options say so). check_only: validate and
     * close (used by CREATE SINK before anything runs). Errors name what is
     * wrong with a SQLSTATE (42P01 missing table, 42804 type mismatch,
     * 08006 unreachable, 22023 bad option). */
    int (*open)(const RtSinkSpec *spec, RtSinkWriter **out, WError *err);
    /* The last epoch the target has applied for this sink (0 if none). */
    int (*last_epoch)(RtSinkWriter *w, uint64_t *epoch, WError *err);
    /* Applies all changes of one epoch and records epoch, atomically. An
     * epoch <= last_epoch() must be a no-op. On error nothing is applied. */
    int (*write_epoch)(RtSinkWriter *w, uint64_t epoch, int n, const RtSinkChange *changes, WError *err);
    /* Forgets the sink's progress in the target (a new sink under an old
     * name starts from epoch 0, e.g. over a fresh data directory). */
    int (*reset)(RtSinkWriter *w, WError *err);
    void (*close)(RtSinkWriter *w);
    /* Optional (NULL: the connector rejects no single row): the rows
     * refused so far (on the delivery thread, after write_epoch). */
    void (*rejects)(RtSinkWriter *w, RtSinkRejects *out);
} RtSinkConnector;

/* The connectors (sink_*.c). NULL from rt_sink_connector for an unknown name. */
extern const RtSinkConnector rt_sink_postgres;
extern const RtSinkConnector rt_sink_sqlite;
extern const RtSinkConnector rt_sink_kafka;
extern const RtSinkConnector rt_sink_blackhole;
const RtSinkConnector *rt_sink_connector(const char *name);

/* Option lookup for writers (case-insensitive key), NULL if absent. */
const char *rt_sink_option(const RtSinkSpec *spec, const char *key);

#endif
