/*
 * broker.h: the embedded Kafka-protocol broker (`weir broker`).
 *
 * weir needs a Kafka on a fresh machine, so it embeds librdkafka's mock
 * cluster: one in-memory broker that speaks the real Kafka protocol well
 * enough for librdkafka, kcat and confluent-kafka clients to produce, list
 * metadata, fetch, list offsets, create topics and run (unenforced)
 * transactions. The log lives in memory, so the broker runs as its own
 * process: a crash of the server must not take the topics with it.
 *
 * Why a forwarder: the mock (librdkafka 2.0.2) always binds its listener
 * itself, on 127.0.0.1 and a random port, and has no API to choose the
 * address. Users and the server need a fixed, well-known bootstrap address
 * (127.0.0.1:9092 by default). So the broker opens HOST:PORT itself and runs
 * a small TCP forwarder thread that proxies every accepted connection byte
 * for byte to the mock's real address. Kafka clients bootstrap through the
 * forwarder; the Metadata response then advertises the mock's own address
 * (127.0.0.1:<random port>), and clients open their working connections
 * there directly. Both paths are loopback, so this is fine on one machine;
 * it also means a client on another host cannot use the broker even when
 * HOST is a public address (the advertised address is loopback).
 *
 * Partitions: the mock auto-creates an unknown topic on a Metadata or
 * Produce request with its built-in default of 4 partitions (a producer that
 * names an explicit partition p of an unknown topic gets p + 1); librdkafka
 * 2.0.2 has no public API to change that default. `--partitions N` therefore
 * applies to the topics named with `--topic` (created at start-up) and is
 * the documented way to get other counts, besides the Admin API
 * (CreateTopics, which the mock honours and which rt_kafka_source_open uses).
 *
 * Retention: the mock keeps at most ~5 MiB or 100000 message sets per
 * partition and drops the oldest beyond that (start offset moves up).
 */
#ifndef WEIR_RUNTIME_BROKER_H
#define WEIR_RUNTIME_BROKER_H

#include <stddef.h>

#include "error.h"

typedef struct RtBroker RtBroker;

/* Starts a broker: binds listen ("HOST:PORT", "[v6]:PORT"; port 0 picks a
 * free port), creates the mock cluster and starts the forwarder thread.
 * `partitions` (>= 1) is the count rt_broker_create_topic uses when given 0. On success *out owns the broker (free it with
 * rt_broker_stop) and addr_out receives the real "HOST:PORT" clients should
 * bootstrap from. Errors: 58030 if the address cannot be bound (in use,
 * not local), 22023 for a malformed address or partition count, XX000 if the
 * mock cannot be created. */
int rt_broker_start(const char *listen, int partitions, RtBroker **out,
                    char *addr_out, size_t addr_len, WError *err);

/* Creates topic with `partitions` partitions (0 = the broker's --partitions).
 * Errors: 42710 if it exists, 22023 for a bad name or count. */
int rt_broker_create_topic(RtBroker *b, const char *topic, int partitions, WError *err);

/* The mock broker's own address ("127.0.0.1:PORT", what Metadata
 * advertises). Valid until rt_broker_stop. */
const char *rt_broker_mock_address(const RtBroker *b);

/* Stops the forwarder, closes every proxied connection and destroys the
 * mock cluster with all its topics. NULL is allowed. */
void rt_broker_stop(RtBroker *b);

/* The `weir broker` subcommand:
 *   weir broker [--listen HOST:PORT] [--partitions N] [--topic NAME]...
 * Prints "weir broker listening on HOST:PORT" (flushed) once ready, runs
 * until SIGTERM or SIGINT and returns 0; returns 1 with a message on stderr
 * if it cannot start (for example the port is in use), 2 on bad usage.
 * argv[0] is the subcommand name. */
int rt_broker_main(int argc, char **argv);

#endif
