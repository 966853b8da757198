/*
 * engine.h: the engine behind the wire protocol.
 *
 * The engine owns the catalog (sources and materialized views, persisted
 * in LMDB and replayed at start), the running dataflows, and the engine
 * thread that drives them and takes checkpoints. Sessions (one per client
 * connection, on the connection's thread) execute statements by taking the
 * engine lock, so a statement sees the views between two steps of the
 * dataflows: a consistent snapshot.
 */
#ifndef WEIR_SERVER_ENGINE_H
#define WEIR_SERVER_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "pgwire.h"

typedef struct Engine Engine;

typedef struct EngineConfig {
    const char *data_dir;
    const char *kafka_bootstrap;       /* default bootstrap for sources that name none */
    int checkpoint_interval_ms;        /* default 1000 */
    size_t max_map_size;               /* LMDB map limit, 0 = default (64 GiB) */
    uint64_t state_memory_limit;       /* dirty (not checkpointed) operator state, bytes; 0 = no limit */
    uint64_t state_cache_size;         /* checkpointed state each state table keeps in memory; 0 = default */
    const char *cluster;               /* --cluster NAME, NULL: a cluster of one (docs/cluster.md) */
    const char *node_id;               /* --node-id, with cluster */
    const char *version;               /* this weir's version, compared with the cluster's live nodes */
} EngineConfig;

/* Opens the data directory, replays the catalog (restarting every view from
 * its last checkpoint) and starts the engine thread. */
int engine_open(const EngineConfig *cfg, Engine **out, WError *err);
/* Stops the engine thread, takes a final checkpoint and closes everything. */
void engine_close(Engine *e);
/* In a cluster: the pgwire and HTTP addresses (host:port, "" for none)
 * this node publishes in its heartbeats. No-op outside a cluster. */
void engine_cluster_addresses(Engine *e, const char *pg_addr, const char *http_addr);
/* True when some user has a password (SCRAM verifier). */
bool engine_has_passwords(Engine *e);
/* The SrvEngine vtable that connects pgwire sessions to this engine. */
SrvEngine engine_srv(Engine *e);

#endif
