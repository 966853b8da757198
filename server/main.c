/*
 * main.c: the weir command.
 *
 *   weir [serve] [options]     the server (the default)
 *   weir broker [options]      the embedded Kafka-protocol broker on its own
 *
 * With no --kafka, the server uses 127.0.0.1:9092 and, if nothing answers
 * there, starts `weir broker` as a separate, detached process: the broker
 * keeps its topics in memory, so it must outlive a crash (or a restart) of
 * the server. It keeps running after the server stops; its log is
 * DATADIR/broker.log.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "broker.h"
#include "cluster.h"
#include "nexmark_cli.h"
#include "engine.h"
#include "http.h"
#include "kafka.h"
#include "log.h"
#include "pgwire.h"

#define WEIR_VERSION "0.1.0"
#define DEFAULT_PORT 4566
#define DEFAULT_HTTP_PORT 4567
#define DEFAULT_KAFKA "127.0.0.1:9092"
/* The schema registry the embedded broker serves beside Kafka (Confluent's usual port). */
#define DEFAULT_REGISTRY "127.0.0.1:8081"

static void usage(FILE *f)
{
    fprintf(f,
            "weir " WEIR_VERSION " - a streaming SQL engine server\n"
            "\n"
            "Usage:\n"
            "  weir [serve] [options]   run the server\n"
            "  weir broker [options]    run the embedded Kafka broker (see weir broker --help)\n"
            "  weir nexmark [options]   print Nexmark events as JSON or CSV (see weir nexmark --help)\n"
            "\n"
            "Server options:\n"
            "  --data-dir DIR              where state, checkpoints and the catalog live (default ./data)\n"
            "  --host ADDR                 address for the Postgres protocol (default 127.0.0.1)\n"
            "  --port N                    port for the Postgres protocol (default %d)\n"
            "  --kafka HOST:PORT           Kafka bootstrap server for sources that name none\n"
            "                              (default " DEFAULT_KAFKA ", with an embedded broker started\n"
            "                              there if nothing answers)\n"
            "  --no-broker                 never start the embedded broker\n"
            "  --cluster NAME              join weir cluster NAME (with --node-id): DDL goes through\n"
            "                              the Kafka topic _weir.NAME.catalog, heartbeats through\n"
            "                              _weir.NAME.nodes (docs/cluster.md); 1-64 of [A-Za-z0-9._-]\n"
            "  --node-id ID                this node's id in the cluster, unique; 1-64 of [A-Za-z0-9._-]\n"
            "  --advertise-host HOST       the host name other nodes and weir_cluster show for this\n"
            "                              node (default: --host, or this machine's name for 0.0.0.0)\n"
            "  --checkpoint-interval MS    time between checkpoints (default 1000)\n"
            "  --max-connections N         client connections at once (default 100)\n"
            "  --state-memory-limit SIZE   operator state not yet checkpointed, at most (default 1GB;\n"
            "                              0 = no limit); over it weir checkpoints early, and views\n"
            "                              pause while a checkpoint cannot be taken\n"
            "  --max-map-size SIZE         largest the LMDB data file may grow (default 64GB)\n"
            "  --state-cache-size SIZE     checkpointed state each operator keeps in memory (default\n"
            "                              256MB); more is read back from disk when needed\n"
            "  --auth MODE                 trust: loopback clients need no password, others use\n"
            "                              SCRAM-SHA-256 (the default); scram-sha-256: everyone does\n"
            "  --tls-cert FILE             PEM certificate (chain) for TLS on the Postgres protocol\n"
            "  --tls-key FILE              its private key; with both, clients may use sslmode=require\n"
            "  --http-host ADDR            address for HTTP: dashboard, /metrics, /api (default 127.0.0.1)\n"
            "  --http-port N               port for HTTP (default %d; 0 = no HTTP)\n"
            "  --http-sql                  enable POST /api/sql (runs any SQL: keep HTTP on loopback)\n"
            "  --config FILE               read settings from FILE (name = value lines, # comments);\n"
            "                              every option can also be --name=value, or the environment\n"
            "                              variable WEIR_NAME (WEIR_DATA_DIR=...); the command line\n"
            "                              wins over the environment, which wins over the file\n"
            "  --version                   print the version\n"
            "  -h, --help                  this text\n",
            DEFAULT_PORT, DEFAULT_HTTP_PORT);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* A size in bytes: digits with an optional kB, MB, GB (or k, M, G; powers
 * of 1024) suffix. */
static int parse_size(const char *s, uint64_t lo, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    uint64_t mult = 1;
    if (*end == 'k' || *end == 'K')
        mult = 1024;
    else if (*end == 'M')
        mult = 1024 * 1024;
    else if (*end == 'G')
        mult = 1024 * 1024 * 1024;
    else if (*end)
        return -1;
    if (*end && end[1] && strcmp(end + 1, "B") != 0)
        return -1;
    if (v > UINT64_MAX / mult || (v != 0 && v * mult < lo))
        return -1;
    *out = v * mult;
    return 0;
}

/* Starts `weir broker --listen addr --registry DEFAULT_REGISTRY` detached, and waits until it answers. */
static int spawn_broker(const char *addr, const char *data_dir)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/broker.log", data_dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* A new session: the broker must not die with the server's terminal or process group. */
        setsid();
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, 0);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (fork() != 0)
            _exit(0); /* double fork: the broker is nobody's child */
        execl(exe, exe, "broker", "--listen", addr, "--registry", DEFAULT_REGISTRY, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
    for (int i = 0; i < 100; i++) {
        if (rt_kafka_ping(addr, 200))
            return 0;
        usleep(100 * 1000);
    }
    return -1;
}

static bool is_wildcard(const char *host)
{
    return !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*");
}

/* host:port, with an IPv6 literal in brackets. */
static void format_addr(char *out, size_t n, const char *host, int port)
{
    bool v6 = strchr(host, ':') != NULL;
    snprintf(out, n, "%s%.200s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

static int serve(int argc_in, char **argv_in)
{
    int argc;
    char **argv;
    WError cerr = {0};
    if (config_args(argc_in, argv_in, &argc, &argv, &cerr)) {
        fprintf(stderr, "weir: %s\n", cerr.msg);
        return 2;
    }
    const char *data_dir = "./data", *host = "127.0.0.1", *kafka = NULL;
    const char *http_host = "127.0.0.1";
    const char *cluster = NULL, *node_id = NULL, *advertise = NULL;
    const char *tls_cert = NULL, *tls_key = NULL;
    SrvAuth auth = SRV_AUTH_LOCAL_TRUST;
    int port = DEFAULT_PORT, interval = 1000, max_conn = 100, http_port = DEFAULT_HTTP_PORT;
    bool no_broker = false, http_sql = false, http_port_set = false;
    uint64_t state_limit = UINT64_C(1) << 30, max_map = 0, state_cache = 0;
    WLogLevel log_level;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("weir " WEIR_VERSION "\n");
            return 0;
        } else if (!strcmp(a, "--no-broker")) {
            no_broker = true;
            continue;
        } else if (!strcmp(a, "--http-sql")) {
            http_sql = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "weir: unknown option or missing value: %s\n\n", a);
            usage(stderr);
            return 2;
        }
        if (!strcmp(a, "--data-dir"))
            data_dir = v;
        else if (!strcmp(a, "--host"))
            host = v;
        else if (!strcmp(a, "--kafka"))
            kafka = v;
        else if (!strcmp(a, "--cluster"))
            cluster = v;
        else if (!strcmp(a, "--node-id"))
            node_id = v;
        else if (!strcmp(a, "--advertise-host") && strlen(v) < 200)
            advertise = v;
        else if (!strcmp(a, "--port") && !parse_int(v, 0, 65535, &port))
            ;
        else if (!strcmp(a, "--checkpoint-interval") && !parse_int(v, 10, 3600000, &interval))
            ;
        else if (!strcmp(a, "--max-connections") && !parse_int(v, 1, 100000, &max_conn))
            ;
        else if (!strcmp(a, "--state-memory-limit") && !parse_size(v, 64 * 1024, &state_limit))
            ;
        else if (!strcmp(a, "--max-map-size") && !parse_size(v, 1024 * 1024, &max_map) && max_map)
            ;
        else if (!strcmp(a, "--state-cache-size") && !parse_size(v, 1024 * 1024, &state_cache) && state_cache)
            ;
        else if (!strcmp(a, "--http-host"))
            http_host = v;
        else if (!strcmp(a, "--tls-cert"))
            tls_cert = v;
        else if (!strcmp(a, "--tls-key"))
            tls_key = v;
        else if (!strcmp(a, "--auth") && (!strcmp(v, "trust") || !strcmp(v, "scram-sha-256")))
            auth = !strcmp(v, "trust") ? SRV_AUTH_LOCAL_TRUST : SRV_AUTH_SCRAM;
        else if (!strcmp(a, "--http-port") && !parse_int(v, 0, 65535, &http_port))
            http_port_set = true;
        else if (!strcmp(a, "--log-level") && wlog_level_parse(v, &log_level) == 0)
            wlog_set_level(log_level);
        else {
            fprintf(stderr, "weir: bad option: %s %s\n\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if ((cluster != NULL) != (node_id != NULL)) {
        fprintf(stderr, "weir: --cluster and --node-id go together\n");
        return 2;
    }
    WError err = {0};
    if (cluster && (cluster_name_check("cluster name", cluster, &err) || cluster_name_check("node id", node_id, &err))) {
        fprintf(stderr, "weir: %s\n", err.msg);
        return 2;
    }
    /* Test-only (tests/cluster): a node that claims another version, to check
     * that a cluster refuses mixed versions. Not for production use. */
    const char *version = getenv("WEIR_TEST_FAKE_VERSION");
    if (!version || !*version)
        version = WEIR_VERSION;
    if (mkdir(data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "weir: cannot create data directory %s: %s\n", data_dir, strerror(errno));
        return 1;
    }
    const char *bootstrap = kafka ? kafka : DEFAULT_KAFKA;
    const char *broker_note = "";
    if (!kafka && !no_broker) {
        if (rt_kafka_ping(bootstrap, 1000)) {
            broker_note = " (already running)";
        } else if (spawn_broker(bootstrap, data_dir) == 0) {
            broker_note = " (embedded broker started; it keeps running after weir stops)";
        } else {
            fprintf(stderr, "weir: could not start the embedded Kafka broker on %s (see %s/broker.log)\n", bootstrap,
                    data_dir);
            return 1;
        }
    }

    /* Signals are taken by sigwait below; every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    Engine *e;
    EngineConfig ec = {.data_dir = data_dir, .kafka_bootstrap = bootstrap, .checkpoint_interval_ms = interval,
                       .max_map_size = (size_t)max_map, .state_memory_limit = state_limit,
                       .state_cache_size = state_cache, .cluster = cluster, .node_id = node_id,
                       .version = version};
    if (engine_open(&ec, &e, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        if (err.hint[0])
            fprintf(stderr, "weir: hint: %s\n", err.hint);
        return 1;
    }
    if (auth == SRV_AUTH_SCRAM && http_sql && http_port != 0) {
        fprintf(stderr, "weir: --http-sql runs SQL with no password, which --auth scram-sha-256 forbids\n");
        engine_close(e);
        return 2;
    }
    if ((tls_cert != NULL) != (tls_key != NULL)) {
        fprintf(stderr, "weir: --tls-cert and --tls-key go together\n");
        engine_close(e);
        return 2;
    }
    if (!engine_has_passwords(e)) {
        if (auth == SRV_AUTH_SCRAM)
            fprintf(stderr, "weir: warning: --auth scram-sha-256, but no user has a password: nobody can log in "
                            "(start once without it and run ALTER USER weir PASSWORD '...')\n");
        else if (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "localhost") != 0 && strcmp(host, "::1") != 0)
            fprintf(stderr, "weir: note: clients from other machines log in with a password (SCRAM-SHA-256), "
                            "and no user has one yet (ALTER USER weir PASSWORD '...' from this machine)\n");
    }
    SrvConfig sc = {.host = host, .port = port, .max_connections = max_conn, .server_version = "15.0",
                    .auth = auth, .tls_cert = tls_cert, .tls_key = tls_key};
    SrvEngine se = engine_srv(e);
    SrvServer *srv;
    if (srv_server_start(&sc, &se, &srv, &err)) {
        fprintf(stderr, "weir: %s\n", err.msg);
        engine_close(e);
        return 1;
    }
    /* HTTP: on by default. When the default port is taken (a second weir on
     * this machine, parallel tests) weir runs without it and says so; a port
     * asked for explicitly must be had. */
    SrvHttp *http = NULL;
    char http_line[300] = "off (--http-port 0)";
    if (http_port != 0) {
        char conninfo[400];
        const char *pg_host = strcmp(host, "0.0.0.0") == 0 ? "127.0.0.1" : strcmp(host, "::") == 0 ? "::1" : host;
        snprintf(conninfo, sizeof conninfo, "host='%s' port=%d dbname=weir user=weir sslmode=disable "
                 "application_name=weir_http", pg_host, srv_server_port(srv));
        HttpConfig hc = {.host = http_host, .port = http_port, .enable_sql = http_sql, .sql_conninfo = conninfo,
                         .version = WEIR_VERSION};
        if (srv_http_start(&hc, e, &http, &err)) {
            if (http_port_set) {
                fprintf(stderr, "weir: %s\n", err.msg);
                srv_server_stop(srv);
                engine_close(e);
                return 1;
            }
            fprintf(stderr, "weir: warning: %s; running without HTTP (see --http-port)\n", err.msg);
            snprintf(http_line, sizeof http_line, "off (%.200s)", err.msg);
            werr_clear(&err);
        } else {
            bool v6 = strchr(http_host, ':') != NULL;
            snprintf(http_line, sizeof http_line, "http://%s%.100s%s:%d/   (dashboard; /metrics, /api/views%s)",
                     v6 ? "[" : "", http_host, v6 ? "]" : "", srv_http_port(http),
                     http_sql ? ", POST /api/sql" : "");
        }
    }
    if (cluster) {
        /* The addresses other nodes and tools are told (weir_cluster): a
         * wildcard listen address names no host, so the machine's name
         * stands in for it unless --advertise-host says better. */
        char pg_addr[300], http_addr[300] = "", hostname[256] = "localhost";
        gethostname(hostname, sizeof hostname - 1);
        const char *pg_host = advertise ? advertise : is_wildcard(host) ? hostname : host;
        const char *web_host = advertise ? advertise : is_wildcard(http_host) ? hostname : http_host;
        format_addr(pg_addr, sizeof pg_addr, pg_host, srv_server_port(srv));
        if (http)
            format_addr(http_addr, sizeof http_addr, web_host, srv_http_port(http));
        engine_cluster_addresses(e, pg_addr, http_addr);
    }
    char cluster_line[200] = "";
    if (cluster)
        snprintf(cluster_line, sizeof cluster_line, "  cluster:           %s, node %s\n", cluster, node_id);
    printf("weir " WEIR_VERSION " is ready\n"
           "  postgres protocol: %s:%d   connect with: psql \"host=%s port=%d dbname=weir user=weir\"\n"
           "  authentication:    %s; tls %s\n"
           "  http:              %s\n"
           "  kafka:             %s%s\n"
           "%s"
           "  data directory:    %s\n"
           "%s",
           host, srv_server_port(srv), host, srv_server_port(srv),
           auth == SRV_AUTH_SCRAM ? "scram-sha-256 for everyone" : "trust on loopback, scram-sha-256 otherwise",
           tls_cert ? "on" : "off", http_line, bootstrap, broker_note,
           !kafka && !no_broker ? "  schema registry:   http://" DEFAULT_REGISTRY " (with the embedded broker)\n" : "",
           data_dir, cluster_line);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    printf("weir: shutting down (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    fflush(stdout);
    srv_http_stop(http);
    srv_server_stop(srv);
    engine_close(e);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "broker"))
        return rt_broker_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "nexmark"))
        return weir_nexmark_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "serve"))
        return serve(argc - 2, argv + 2);
    return serve(argc - 1, argv + 1);
}
