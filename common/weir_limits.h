/*
 * weir_limits.h: the limits on what one statement may ask for, each with its
 * reason, in one place.
 *
 * The runtime keeps rows and keys in fixed arrays on the stack (a row is
 * copied out of a chunk for every join pair, every state key is built from
 * a key's values); the sizes of those arrays are these limits. Each is
 * checked once, where the statement is planned (planner/plan_node.c,
 * check_limits), with SQLSTATE 54000 (program_limit_exceeded) and the
 * statement's position; an operator only asserts it. Nothing a client sends
 * can make an operator index past one of these arrays.
 *
 * docs/sql.md ("Limits") lists them with the error a user gets; a change
 * here changes that table.
 */
#ifndef WEIR_COMMON_WEIR_LIMITS_H
#define WEIR_COMMON_WEIR_LIMITS_H

/* Columns of a table, source, view or of any operator's row (a join's output
 * is both sides' columns; a projection's is its select list plus hidden key
 * columns). PostgreSQL's limit on a table (MaxHeapAttributeNumber). */
#define WEIR_MAX_COLUMNS 1600

/* Values in a row array of the runtime: a row of WEIR_MAX_COLUMNS plus the
 * columns an operator adds to it (a materialize's row id, a window's
 * window_start and window_end, a Top-N's row number). */
#define WEIR_ROW_VALUES (WEIR_MAX_COLUMNS + 4)

/* Columns in one key that an operator encodes per row: the equality keys of
 * a join (regular, interval, temporal), the correlation keys of a subquery,
 * a Top-N's PARTITION BY, a sink's key. A key is encoded into every state
 * entry, and LMDB keys are at most 511 bytes: 64 columns is already past
 * any key that fits. */
#define WEIR_MAX_KEY_COLUMNS 64

/* Key groups of a view (CREATE MATERIALIZED VIEW ... WITH (key_groups = N),
 * planner revision 6): the unit keyed state is split into, listed, handed
 * over and restored by (common/keygroup.h). Stored as the 2-byte big-endian
 * prefix of every key of a key-grouped state table, so at most 65536 could
 * be addressed; 4096 keeps a cluster's per-group bookkeeping (one Kafka
 * partition per key group in the repartition and changelog topics) within
 * what a broker handles per topic. The default is Flink's default maximum
 * parallelism (128): enough to spread over a few dozen nodes. */
#define WEIR_MAX_KEY_GROUPS 4096
#define WEIR_DEFAULT_KEY_GROUPS 128

/* State values of one aggregation group: the group columns, a count and a
 * fired flag, and one to three per aggregate (plan_agg_slots()). Also bounds
 * the output: group columns plus aggregates. */
#define WEIR_MAX_AGG_VALUES 256

/* Rows one Top-N keeps per partition: the N of ROW_NUMBER() OVER (...) <= N,
 * and LIMIT + OFFSET inside a query. Each change to a partition re-reads its
 * ranking (runtime/op_topn.c), so N bounds the work and state per row. */
#define WEIR_MAX_TOPN_ROWS 10000

/* Windows one row belongs to in a HOP or CUMULATE window: size / slide (or
 * size / step). The window operator emits a copy of the row per window, so
 * this bounds how much one input row multiplies into. */
#define WEIR_MAX_WINDOWS_PER_ROW 1000

/* Arguments of one function call (PostgreSQL's FUNC_MAX_ARGS is 100). */
#define WEIR_MAX_FUNC_ARGS 64

/* librdkafka properties of one source or table over Kafka: its
 * properties.* options other than the bootstrap address, which every
 * reader of its topic (the source operator, ANALYZE LATENESS, INSERT into
 * it, the CREATE's topic check) copies into an array of this size. */
#define WEIR_MAX_KAFKA_PROPERTIES 64

/* Nesting of one statement: parentheses, operators over operators,
 * subqueries. The parser and the binder recurse on it; past it a statement
 * is refused with 54001 (statement_too_complex), never a C stack overflow.
 * A chain of AND (or of OR) is one flat list, not nesting (parser/ast.c,
 * ast_binary): a 10,000-term OR is one level deep, as in PostgreSQL. */
#define WEIR_MAX_EXPR_DEPTH 1000

/* Avro (runtime/avro.c, registry_client.c, registry.c). A writer schema's
 * JSON, as fetched from a schema registry or registered with the embedded
 * one, is at most this many bytes (Confluent's default request limit is
 * larger, but a row schema past 1 MiB is a mistake, and the response is
 * read into memory before it is parsed). */
#define WEIR_MAX_AVRO_SCHEMA_BYTES (1024 * 1024)
/* Writer schemas one Avro source keeps decoded (by id): an evolving topic
 * has a handful; past this the cache is emptied and refilled, so a topic
 * written with thousands of ids stays correct, only slower. */
#define WEIR_MAX_AVRO_CACHED_SCHEMAS 256
/* Schemas the embedded registry holds (`weir broker --registry`): it keeps
 * them in memory, so this bounds its memory at ~this times the schema limit. */
#define WEIR_MAX_REGISTRY_SCHEMAS 10000

#endif
