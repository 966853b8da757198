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
 * itself, on 127.0.0.1 and a random port, with no API to choose the address;
 * it advertises that random address in Metadata and FindCoordinator
 * responses; its Metadata reports controller id 0 although its broker is 1
 * (so Admin requests never find a controller); it has no CreateTopics
 * handler; and it auto-creates unknown topics with a fixed 4 partitions.
 * Users and the server need a fixed, well-known address (127.0.0.1:9092 by
 * default) and topic creation. So the broker listens on HOST:PORT itself and
 * runs a forwarder thread that proxies every connection to the mock,
 * frame by frame, and changes only these things:
 *   - Metadata and FindCoordinator responses advertise the forwarder (the
 *     address the client connected to, the forwarder's port), so a client's
 *     whole traffic, including transactions, stays on the fixed address;
 *     a controller id naming no broker is replaced by the broker's id;
 *   - ApiVersions (v0-v2) responses also list CreateTopics v0-v4, and
 *     CreateTopics requests are answered by the forwarder itself through the
 *     mock's control API (rd_kafka_mock_topic_create), in request order;
 *   - topics a Metadata request allows to auto-create are created first with
 *     --partitions partitions, so auto-created topics get that count;
 *   - a Produce request carrying a record batch larger than
 *     --max-message-bytes is answered by the forwarder: MESSAGE_TOO_LARGE for
 *     that batch, NOT_ENOUGH_REPLICAS (retriable, nothing written) for the
 *     others in the same request; the mock never sees it. The mock would have
 *     acknowledged it and then dropped it (below).
 *   - static membership: a JoinGroup v5 with a group.instance.id the
 *     forwarder has seen and an empty member id gets that instance's last
 *     member id, because the mock ignores group.instance.id (broker.c);
 * Every other request and response passes through unchanged. Bootstrapping
 * at the mock's own address also works, without these fixes.
 *
 * Limits inherited from the mock: the log is in memory; a partition keeps at
 * most ~5 MiB or 100000 message sets and drops the oldest beyond that (its
 * start offset moves up); a fetch returns one message set per partition;
 * and when that trimming empties the list, the mock also hides the message
 * set it just acknowledged (its start offset jumps to the new end), so a
 * batch over ~5 MiB, or two batches in a row that together exceed it,
 * vanished with everything before them. Capping one batch at half the
 * partition's size (BROKER_MAX_MESSAGE_BYTES_MAX) means trimming always
 * leaves the older of two batches to remove, never the new one.
 * transactions are accepted but aborted records are not hidden from
 * read_committed consumers; consumer groups work but rebalance slowly.
 */
#ifndef WEIR_RUNTIME_BROKER_H
#define WEIR_RUNTIME_BROKER_H

#include <stdbool.h>
#include <stddef.h>

/* The largest record batch (the Kafka wire unit, one per partition in a
 * Produce request) the broker accepts: Kafka's own message.max.bytes
 * default. Larger batches get MESSAGE_TOO_LARGE. */
#define BROKER_MAX_MESSAGE_BYTES_DEFAULT 1048588
/* The most --max-message-bytes may be: half of the mock's per-partition log
 * (5 MiB), so a new batch can never be trimmed away with the old ones. */
#define BROKER_MAX_MESSAGE_BYTES_MAX (5 * 1024 * 1024 / 2)
/* The least: a record batch header alone is 61 bytes. */
#define BROKER_MAX_MESSAGE_BYTES_MIN 1024

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

/* Sets the largest record batch the broker accepts (bytes, from
 * BROKER_MAX_MESSAGE_BYTES_MIN to _MAX; the default is _DEFAULT). Takes
 * effect for the next Produce request. Errors: 22023 out of range. */
int rt_broker_set_max_message_bytes(RtBroker *b, long bytes, WError *err);

/* Turns the static membership emulation (on by default; see "Static
 * membership" in broker.c and README-kafka.md) on or off, for the next
 * JoinGroup. Off, the mock's own behaviour shows: a member that rejoins
 * with its group.instance.id is a new member. */
void rt_broker_set_static_members(RtBroker *b, bool on);

/* Creates topic with `partitions` partitions (0 = the broker's --partitions).
 * Errors: 42710 if it exists, 22023 for a bad name or count. */
int rt_broker_create_topic(RtBroker *b, const char *topic, int partitions, WError *err);

/* The mock broker's own address ("127.0.0.1:PORT", what Metadata
 * advertises). Valid until rt_broker_stop. */
const char *rt_broker_mock_address(const RtBroker *b);

/* Closes every client connection (both sides of each proxied one), as a
 * broker restart would; the topics and their records stay, and clients
 * reconnect. Asynchronous: the forwarder thread does it. NULL is allowed. */
void rt_broker_drop_connections(RtBroker *b);

/* Stops the forwarder, closes every proxied connection and destroys the
 * mock cluster with all its topics. NULL is allowed. */
void rt_broker_stop(RtBroker *b);

/* The `weir broker` subcommand:
 *   weir broker [--listen HOST:PORT] [--partitions N] [--topic NAME]...
 *               [--max-message-bytes N] [--no-static-members]
 * Prints "weir broker listening on HOST:PORT" (flushed) once ready, runs
 * until SIGTERM or SIGINT and returns 0 (SIGUSR1 drops every client
 * connection: rt_broker_drop_connections); returns 1 with a message on stderr
 * if it cannot start (for example the port is in use), 2 on bad usage.
 * argv[0] is the subcommand name. */
int rt_broker_main(int argc, char **argv);

#endif
