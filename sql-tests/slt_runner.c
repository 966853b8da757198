/*
 * slt_runner.c: runs sqllogictest (.slt) files against weir over pgwire.
 *
 * For each file the runner starts a fresh system of its own: an embedded Kafka
 * broker (`weir broker`) and a server (`weir serve --no-broker`) on free
 * loopback ports with a temporary data directory, connects with libpq, runs
 * the records in order, then stops both processes and removes the directory
 * (unless --keep). With --connect it instead uses an already running server
 * and starts nothing (so `control restart` is unavailable).
 *
 * Records (blank-line separated; `#` lines are comments):
 *   statement ok | statement error [SQLSTATE | regex/substring]   then SQL
 *   query <types> [rowsort|valuesort|nosort] [retry]   SQL, ----, rows
 *   query error [pattern]                              like statement error
 *   skipif <engine> / onlyif <engine>                  guard the next record
 *   halt | control restart | control kill | control restore <dir> | sleep <ms> | system <shell>
 * Rows are compared as text: values joined by one space, NULL as `NULL`, the
 * empty string as `(empty)`. `retry` re-runs a record for up to 10 s until it
 * passes, for streaming results that lag. ${KAFKA} ${PGPORT} ${FREEPORT}
 * ${DATADIR} ${TESTDIR} ${UNIQUE} are substituted in SQL, expected rows and
 * shell commands (and exported to `system` commands as environment variables).
 *
 * Output: one `not ok` block per failed record (file:line, SQL, expected and
 * actual), a summary line per file and overall. Exit status 0 only if every
 * record of every file passed.
 */
#include "arena.h" /* xrealloc, xstrdup */
#include "buf.h"

#include <libpq-fe.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ENGINE "weir"
#define BROKER_TIMEOUT_S 10.0
#define SERVER_TIMEOUT_S 20.0
#define STOP_TIMEOUT_S 5.0
#define RETRY_TIMEOUT_S 10.0
#define MAX_WORDS 16
#define MAX_SHOWN 40 /* rows shown per side of a mismatch */

/*
 * Runner: options plus the state of the file being run. Process ids are 0
 * when the process is not running; conn is NULL when not connected.
 */
typedef struct Runner {
    const char *weir;         /* path of the weir executable (own-process mode) */
    const char *connect;      /* conninfo of an existing server, or NULL */
    int keep;                 /* keep temp dirs and logs */
    char tmpdir[256];         /* per-file temp root: data/, broker.log, server.log */
    char datadir[300];
    char testdir[1024];       /* directory of the .slt file */
    char kafka[64];           /* broker host:port */
    char pgport[16], freeport[16];
    char unique[64];          /* per-file token: lowercase, digits, '_' */
    int kport, pport, fport;
    pid_t broker, server;
    PGconn *conn;
    const char *path;         /* file being run */
    int n_pass, n_fail, n_skip;
} Runner;

/* Record: one parsed record. Words and lines point into the file's text. */
typedef struct Record {
    int line;                 /* 1-based line of the header */
    char *words[MAX_WORDS];   /* header split on blanks */
    int n_words;
    char raw[1024];           /* the header line as written */
    char hdr[1024];           /* the header line, NUL-split into words */
    const char *rest;         /* raw text after the first word and its blank */
    Buf body;                 /* SQL or command text, lines joined by '\n' */
    Buf expected;             /* lines after ----, joined by '\n' */
    int has_sep;              /* a ---- line was present */
} Record;

/* StrList: a growable array of heap strings, owned. */
typedef struct StrList {
    char **v;
    size_t n, cap;
} StrList;

static pid_t *g_children[2]; /* for the signal handler: broker, server */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Append s to l; takes ownership of s. */
static void sl_push(StrList *l, char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = s;
}

/* Free the strings and the array; l is left empty. */
static void sl_free(StrList *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Remove trailing blanks and CR from s in place. */
static void rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
}

/* On SIGTERM/SIGINT (e.g. a meson timeout) take the weir processes down too. */
static void on_signal(int sig)
{
    for (int i = 0; i < 2; i++)
        if (g_children[i] && *g_children[i] > 0)
            kill(*g_children[i], SIGKILL);
    static const char msg[] = "slt_runner: interrupted\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(128 + sig);
}

/* A free loopback TCP port: bind port 0, read it back, close. Racy but fine. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("slt_runner: free_port");
        exit(2);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* True if something accepts TCP connections on 127.0.0.1:port. */
static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/*
 * Start argv[0] with stdout and stderr appended to logpath. The child dies
 * with the runner (PR_SET_PDEATHSIG) and inherits no other descriptors.
 * Returns the pid, or -1.
 */
static pid_t spawn(char *const argv[], const char *logpath)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int nul = open("/dev/null", O_RDONLY);
    if (fd < 0 || nul < 0)
        _exit(127);
    dup2(nul, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    for (int i = 3; i < 1024; i++)
        close(i);
    execv(argv[0], argv);
    dprintf(2, "slt_runner: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/*
 * Stop *pid: send sig, wait up to STOP_TIMEOUT_S, then SIGKILL. Returns the
 * wait status and sets *pid to 0. A process already gone is reaped.
 */
static int stop_proc(pid_t *pid, int sig)
{
    int st = 0;
    if (*pid <= 0)
        return 0;
    kill(*pid, sig);
    double end = now_s() + STOP_TIMEOUT_S;
    for (;;) {
        pid_t w = waitpid(*pid, &st, WNOHANG);
        if (w == *pid || (w < 0 && errno != EINTR))
            break;
        if (now_s() > end) {
            fprintf(stderr, "slt_runner: pid %d ignored signal %d for %.0f s; killing\n",
                    (int)*pid, sig, STOP_TIMEOUT_S);
            kill(*pid, SIGKILL);
            waitpid(*pid, &st, 0);
            break;
        }
        sleep_ms(20);
    }
    *pid = 0;
    return st;
}

/* True if *pid has exited (reaping it and storing the status in *st). */
static int proc_exited(pid_t *pid, int *st)
{
    if (*pid <= 0)
        return 1;
    if (waitpid(*pid, st, WNOHANG) == *pid) {
        *pid = 0;
        return 1;
    }
    return 0;
}

/* Describe a wait status ("exit status 1", "signal 9") into out. */
static void describe_status(int st, char *out, size_t n)
{
    if (WIFEXITED(st))
        snprintf(out, n, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(out, n, "signal %d", WTERMSIG(st));
    else
        snprintf(out, n, "status %d", st);
}

/* Print the last n lines of a log file to stdout, indented. */
static void show_log_tail(const char *path, int n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    StrList lines = {0};
    char buf[1024];
    while (fgets(buf, sizeof buf, f))
        sl_push(&lines, xstrdup(buf));
    fclose(f);
    printf("# last lines of %s:\n", path);
    for (size_t i = lines.n > (size_t)n ? lines.n - n : 0; i < lines.n; i++)
        printf("#   %s%s", lines.v[i], strchr(lines.v[i], '\n') ? "" : "\n");
    sl_free(&lines);
}

/* Start the broker and wait for its "listening" line (or an open port). */
static int start_broker(Runner *r)
{
    char listen[64], log[320];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r->kport);
    snprintf(log, sizeof log, "%s/broker.log", r->tmpdir);
    char *argv[] = {(char *)r->weir, "broker", "--listen", listen, NULL};
    r->broker = spawn(argv, log);
    if (r->broker < 0)
        return -1;
    double end = now_s() + BROKER_TIMEOUT_S;
    while (now_s() < end) {
        int st;
        if (proc_exited(&r->broker, &st)) {
            char d[64];
            describe_status(st, d, sizeof d);
            printf("# broker exited at start (%s)\n", d);
            show_log_tail(log, 20);
            return -1;
        }
        FILE *f = fopen(log, "r");
        char line[512];
        int ready = 0;
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, "listening"))
                ready = 1;
        if (f)
            fclose(f);
        if (ready || port_open(r->kport))
            return 0;
        sleep_ms(50);
    }
    printf("# broker not ready after %.0f s\n", BROKER_TIMEOUT_S);
    show_log_tail(log, 20);
    return -1;
}

/*
 * Connect to the server, retrying until timeout_s passes or (in own-process
 * mode) the server exits. Returns 0 with r->conn set, or -1.
 */
static int connect_server(Runner *r, double timeout_s)
{
    char conninfo[256];
    const char *ci = r->connect;
    if (!ci) {
        snprintf(conninfo, sizeof conninfo,
                 "host=127.0.0.1 port=%d dbname=weir user=weir sslmode=disable connect_timeout=5",
                 r->pport);
        ci = conninfo;
    }
    double end = now_s() + timeout_s;
    for (;;) {
        r->conn = PQconnectdb(ci);
        if (PQstatus(r->conn) == CONNECTION_OK) {
            PQsetNoticeProcessor(r->conn, NULL, NULL);
            return 0;
        }
        int st;
        int died = !r->connect && proc_exited(&r->server, &st);
        if (died || now_s() > end) {
            printf("# cannot connect (%s): %s", ci, PQerrorMessage(r->conn));
            if (died) {
                char d[64];
                describe_status(st, d, sizeof d);
                printf("# server exited at start (%s)\n", d);
            }
            PQfinish(r->conn);
            r->conn = NULL;
            return -1;
        }
        PQfinish(r->conn);
        r->conn = NULL;
        sleep_ms(100);
    }
}

/* Start the server on r's data dir and ports and connect to it. */
static int start_server(Runner *r)
{
    char port[16], log[320];
    snprintf(port, sizeof port, "%d", r->pport);
    snprintf(log, sizeof log, "%s/server.log", r->tmpdir);
    /* HTTP off: tests run in parallel and would all want its default port. */
    char *argv[] = {(char *)r->weir, "serve", "--data-dir", r->datadir, "--port", port,
                    "--kafka", r->kafka, "--no-broker", "--http-port", "0", NULL};
    r->server = spawn(argv, log);
    if (r->server < 0 || connect_server(r, SERVER_TIMEOUT_S) != 0) {
        show_log_tail(log, 30);
        return -1;
    }
    return 0;
}

/*
 * Stop the server with sig (SIGTERM: clean; SIGKILL: crash). After SIGTERM
 * a non-zero exit (an ASan report, say) is an error: returns -1.
 */
static int stop_server(Runner *r, int sig)
{
    if (r->conn) {
        PQfinish(r->conn);
        r->conn = NULL;
    }
    if (r->server <= 0)
        return 0;
    int st = stop_proc(&r->server, sig);
    if (sig == SIGTERM && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) &&
        !(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM)) {
        char d[64], log[320];
        describe_status(st, d, sizeof d);
        snprintf(log, sizeof log, "%s/server.log", r->tmpdir);
        printf("not ok - %s: server shutdown failed (%s)\n", r->path, d);
        show_log_tail(log, 30);
        return -1;
    }
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

#define N_VARS 6
static const char *const var_names[N_VARS] = {"KAFKA", "PGPORT", "FREEPORT",
                                              "DATADIR", "TESTDIR", "UNIQUE"};

/* The value of variable i (an index into var_names), borrowed from r. */
static const char *var_value(const Runner *r, int i)
{
    const char *vals[N_VARS] = {r->kafka, r->pgport, r->freeport, r->datadir, r->testdir, r->unique};
    return vals[i];
}

/* Copy text with ${NAME} variables replaced into out (reset first). */
static void substitute(Runner *r, const char *text, Buf *out)
{
    buf_reset(out);
    buf_puts(out, "");
    for (const char *p = text; *p;) {
        if (p[0] == '$' && p[1] == '{') {
            int i;
            const char *e = strchr(p, '}');
            size_t n = e ? (size_t)(e - p - 2) : 0;
            for (i = 0; e && i < N_VARS; i++)
                if (strlen(var_names[i]) == n && !memcmp(p + 2, var_names[i], n))
                    break;
            if (e && i < N_VARS) {
                buf_puts(out, var_value(r, i));
                p = e + 1;
                continue;
            }
        }
        buf_putc(out, *p++);
    }
}

/* Render a result as rows of space-separated values into rows. */
static void result_rows(PGresult *res, StrList *rows)
{
    Buf b = BUF_INIT;
    for (int i = 0; i < PQntuples(res); i++) {
        buf_reset(&b);
        buf_puts(&b, "");
        for (int j = 0; j < PQnfields(res); j++) {
            const char *v = PQgetvalue(res, i, j);
            if (j)
                buf_putc(&b, ' ');
            buf_puts(&b, PQgetisnull(res, i, j) ? "NULL" : *v ? v : "(empty)");
        }
        rtrim(b.data);
        sl_push(rows, xstrdup(b.data));
    }
    buf_free(&b);
}

/* Split text into lines (or, with by_value, blank-separated values). */
static void split_text(const char *text, int by_value, StrList *out)
{
    char *copy = xstrdup(text), *save = NULL;
    for (char *t = strtok_r(copy, by_value ? " \n" : "\n", &save); t;
         t = strtok_r(NULL, by_value ? " \n" : "\n", &save)) {
        rtrim(t);
        sl_push(out, xstrdup(t));
    }
    free(copy);
}

/*
 * Does the error in res match pattern? Five characters of [0-9A-Z] are a
 * SQLSTATE; anything else matches the message as a substring or a POSIX
 * extended regex. An empty pattern matches any error.
 */
static int error_matches(PGresult *res, const char *pattern)
{
    size_t n = strlen(pattern);
    if (n == 0)
        return 1;
    int is_state = n == 5;
    for (size_t i = 0; i < n && is_state; i++)
        is_state = isdigit((unsigned char)pattern[i]) || isupper((unsigned char)pattern[i]);
    if (is_state) {
        const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        return st && strcmp(st, pattern) == 0;
    }
    const char *msg = PQresultErrorMessage(res);
    if (strstr(msg, pattern))
        return 1;
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
        return 0;
    int m = regexec(&re, msg, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

/* The SQLSTATE of a failed result, or "?". */
static const char *sqlstate(const PGresult *res)
{
    const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    return s ? s : "?";
}

/*
 * Run one statement or query record once. On failure returns -1 and leaves
 * a description in why. Expected text and SQL are already substituted.
 */
static int exec_record(Runner *r, Record *rec, const char *sql, const char *expected, Buf *why)
{
    const char *kind = rec->words[0];
    int want_error = rec->n_words > 1 && strcmp(rec->words[1], "error") == 0;
    buf_reset(why);
    if (!r->conn) {
        buf_puts(why, "not connected to a server");
        return -1;
    }
    PGresult *res = PQexec(r->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    int ok = 0;
    if (want_error) {
        /* The pattern is the rest of the header after "error", verbatim. */
        const char *pat = strstr(rec->rest, "error") + 5;
        while (*pat == ' ' || *pat == '\t')
            pat++;
        if (st != PGRES_FATAL_ERROR)
            buf_printf(why, "expected an error matching '%s', but it succeeded", pat);
        else if (!(ok = error_matches(res, pat)))
            buf_printf(why, "expected an error matching '%s', got [%s] %s", pat,
                       sqlstate(res), PQresultErrorMessage(res));
    } else if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
        buf_printf(why, "unexpected error [%s] %s",
                   sqlstate(res), PQerrorMessage(r->conn));
    } else if (strcmp(kind, "statement") == 0) {
        ok = 1;
    } else if (st != PGRES_TUPLES_OK) {
        buf_printf(why, "query returned no rows description (%s)", PQresStatus(st));
    } else {
        const char *types = rec->n_words > 1 ? rec->words[1] : "";
        const char *mode = "nosort";
        for (int i = 2; i < rec->n_words; i++)
            if (!strcmp(rec->words[i], "rowsort") || !strcmp(rec->words[i], "valuesort"))
                mode = rec->words[i];
        int by_value = strcmp(mode, "valuesort") == 0;
        StrList got = {0}, want = {0};
        result_rows(res, &got);
        if (by_value) { /* rows -> values */
            StrList vals = {0};
            for (size_t i = 0; i < got.n; i++)
                split_text(got.v[i], 1, &vals);
            sl_free(&got);
            got = vals;
        }
        split_text(expected, by_value, &want);
        if (by_value || strcmp(mode, "rowsort") == 0) {
            /* qsort of an empty list may be passed NULL, which UBSan refuses. */
            if (got.n)
                qsort(got.v, got.n, sizeof *got.v, cmp_str);
            if (want.n)
                qsort(want.v, want.n, sizeof *want.v, cmp_str);
        }
        ok = got.n == want.n;
        for (size_t i = 0; ok && i < got.n; i++)
            ok = strcmp(got.v[i], want.v[i]) == 0;
        if (ok && (int)strlen(types) != PQnfields(res)) {
            ok = 0;
            buf_printf(why, "type string '%s' has %zu columns, result has %d\n", types,
                       strlen(types), PQnfields(res));
        } else if (!ok) {
            buf_printf(why, "result mismatch (%s)\n#   expected %zu:\n", mode, want.n);
            for (size_t i = 0; i < want.n && i < MAX_SHOWN; i++)
                buf_printf(why, "#     %s\n", want.v[i]);
            buf_printf(why, "#   got %zu:\n", got.n);
            for (size_t i = 0; i < got.n && i < MAX_SHOWN; i++)
                buf_printf(why, "#     %s\n", got.v[i]);
        }
        sl_free(&got);
        sl_free(&want);
    }
    PQclear(res);
    if (!ok && r->conn && PQstatus(r->conn) != CONNECTION_OK) {
        PQfinish(r->conn); /* the next record reconnects, or finds the server dead */
        r->conn = NULL;
    }
    return ok ? 0 : -1;
}

/* Run a `system` command with the variables also exported to it. */
static int exec_system(Runner *r, const char *cmd, Buf *why)
{
    for (int i = 0; i < N_VARS; i++)
        setenv(var_names[i], var_value(r, i), 1);
    fflush(NULL);
    int st = system(cmd);
    buf_reset(why);
    if (st == 0)
        return 0;
    char d[64];
    describe_status(st, d, sizeof d);
    buf_printf(why, "command failed (%s)", d);
    return -1;
}

/* True if the last start's log (the file at path) contains s. */
static bool log_mentions(const char *path, const char *s)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, s) != NULL;
    fclose(f);
    return found;
}

/* Restart the server (control restart / control kill), or restart it on a
 * savepoint's copy of the data (control restore DIR: stop, replace the data
 * directory's data.mdb by DIR's, start). */
static int exec_control(Runner *r, const char *what, const char *arg, Buf *why)
{
    buf_reset(why);
    if (r->connect) {
        buf_printf(why, "control %s needs a server started by slt_runner, not --connect", what);
        return -1;
    }
    bool restore = strcmp(what, "restore") == 0;
    int sig = strcmp(what, "restart") == 0 || restore ? SIGTERM : strcmp(what, "kill") == 0 ? SIGKILL : 0;
    if (!sig || (restore && !arg)) {
        buf_printf(why, "unknown control '%s' (restart|kill|restore DIR)", what);
        return -1;
    }
    int rc = stop_server(r, sig);
    if (restore) {
        Buf dir = BUF_INIT, cmd = BUF_INIT;
        substitute(r, arg, &dir);
        buf_printf(&cmd, "cp '%s/data.mdb' '%s/data.mdb' && rm -f '%s/lock.mdb'", dir.data, r->datadir, r->datadir);
        int st = system(cmd.data);
        buf_free(&dir);
        buf_free(&cmd);
        if (st != 0) {
            buf_puts(why, "could not copy the savepoint into the data directory");
            return -1;
        }
    }
    /* The port was free while our server held it; a test running in
     * parallel may have taken it since (ports are picked by binding port 0).
     * Then the server comes back on another port: files refer to the
     * server through the runner's connection, not its port. */
    int tries = 0;
    while (start_server(r) != 0) {
        char log[320];
        snprintf(log, sizeof log, "%s/server.log", r->tmpdir);
        if (++tries == 3 || !log_mentions(log, "could not listen")) {
            buf_puts(why, "server did not come back after restart");
            return -1;
        }
        do r->pport = free_port(); while (r->pport == r->kport || r->pport == r->fport);
        snprintf(r->pgport, sizeof r->pgport, "%d", r->pport);
    }
    if (rc != 0)
        buf_puts(why, "server shutdown failed before restart");
    return rc;
}

/* Print text line by line, each prefixed (lines already starting '#' as is). */
static void print_indented(const char *prefix, const char *text)
{
    for (const char *p = text ? text : ""; *p;) {
        const char *e = strchr(p, '\n');
        int n = e ? (int)(e - p) : (int)strlen(p);
        printf("%s%.*s\n", p[0] == '#' ? "" : prefix, n, p);
        p += n + (e ? 1 : 0);
    }
}

/* Report a failed record TAP-style: where, the SQL, and why. */
static void report_fail(Runner *r, Record *rec, const char *sql, const Buf *why)
{
    printf("not ok - %s:%d: %s\n", r->path, rec->line, rec->raw);
    if (sql && *sql)
        printf("#   sql:\n");
    print_indented("#     ", sql);
    print_indented("#   ", why->data);
}

/*
 * Run one record. Returns 1 to go on, 0 to stop the file (halt or a dead
 * server). Counts the outcome on r.
 */
static int run_record(Runner *r, Record *rec)
{
    const char *kind = rec->words[0];
    Buf sql = BUF_INIT, exp = BUF_INIT, why = BUF_INIT;
    int rc = 0, go_on = 1, retry = 0;
    for (int i = 1; i < rec->n_words; i++)
        retry |= strcmp(rec->words[i], "retry") == 0;
    substitute(r, rec->body.data ? rec->body.data : "", &sql);
    substitute(r, rec->expected.data ? rec->expected.data : "", &exp);

    if (strcmp(kind, "halt") == 0) {
        go_on = 0;
    } else if (strcmp(kind, "sleep") == 0 && rec->n_words == 2) {
        sleep_ms(atol(rec->words[1]));
    } else if (strcmp(kind, "system") == 0) {
        substitute(r, rec->rest, &sql);
        if (rec->body.len) {
            Buf more = BUF_INIT;
            substitute(r, rec->body.data, &more);
            buf_printf(&sql, "\n%s", more.data);
            buf_free(&more);
        }
        rc = exec_system(r, sql.data, &why);
    } else if (strcmp(kind, "control") == 0 && (rec->n_words == 2 || rec->n_words == 3)) {
        rc = exec_control(r, rec->words[1], rec->n_words == 3 ? rec->words[2] : NULL, &why);
        buf_reset(&sql);
    } else if (strcmp(kind, "statement") == 0 || strcmp(kind, "query") == 0) {
        double end = now_s() + RETRY_TIMEOUT_S;
        for (;;) {
            if (!r->conn && (r->connect || r->server > 0))
                connect_server(r, 2.0);
            rc = exec_record(r, rec, sql.data, exp.data, &why);
            if (rc == 0 || !retry || now_s() > end)
                break;
            sleep_ms(100);
        }
        int st;
        if (rc != 0 && !r->connect && proc_exited(&r->server, &st)) {
            char d[64];
            describe_status(st, d, sizeof d);
            buf_printf(&why, "\n#   server died (%s); stopping this file", d);
            go_on = 0;
        }
    } else {
        buf_printf(&why, "unknown or malformed record '%s'", kind);
        rc = -1;
    }
    if (rc != 0) {
        r->n_fail++;
        report_fail(r, rec, sql.data, &why);
        if (!go_on && r->tmpdir[0]) {
            char log[320];
            snprintf(log, sizeof log, "%s/server.log", r->tmpdir);
            show_log_tail(log, 30);
        }
    } else if (strcmp(kind, "halt") != 0) {
        r->n_pass++;
    }
    buf_free(&sql);
    buf_free(&exp);
    buf_free(&why);
    return go_on;
}

/* Split a header line into rec->words, keeping the raw text for rec->rest. */
static void split_header(const char *line, Record *rec)
{
    snprintf(rec->raw, sizeof rec->raw, "%s", line);
    snprintf(rec->hdr, sizeof rec->hdr, "%s", line);
    char *p = rec->hdr;
    rec->n_words = 0;
    rec->rest = "";
    while (*p && rec->n_words < MAX_WORDS) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        rec->words[rec->n_words++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (*p)
            *p++ = 0;
        if (rec->n_words == 1)
            rec->rest = rec->raw + (p - rec->hdr);
    }
}

/*
 * Parse and run the records of text (modified in place: split into lines).
 */
static void run_text(Runner *r, char *text)
{
    StrList lines = {0};
    for (char *p = text; p && *p;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = 0;
        rtrim(p);
        sl_push(&lines, xstrdup(p));
        p = e ? e + 1 : NULL;
    }
    int skip = 0;
    for (size_t i = 0; i < lines.n;) {
        char *line = lines.v[i];
        if (!*line || line[0] == '#') {
            i++;
            continue;
        }
        Record rec = {.line = (int)i + 1};
        for (;;) { /* guards: skipif/onlyif lines stack onto the next record */
            split_header(line, &rec);
            if (rec.n_words != 2 || (strcmp(rec.words[0], "skipif") && strcmp(rec.words[0], "onlyif")))
                break;
            int is_us = strcmp(rec.words[1], ENGINE) == 0;
            skip |= rec.words[0][0] == 's' ? is_us : !is_us;
            if (++i >= lines.n || !*lines.v[i]) {
                rec.n_words = 0;
                break;
            }
            rec.line = (int)i + 1;
            line = lines.v[i];
        }
        if (rec.n_words == 0)
            continue;
        if (!strcmp(rec.words[0], "hash-threshold")) {
            i++;
            continue;
        }
        for (i++; i < lines.n && *lines.v[i]; i++) {
            Buf *dst = rec.has_sep ? &rec.expected : &rec.body;
            if (!strcmp(rec.words[0], "query") && !rec.has_sep && !strcmp(lines.v[i], "----")) {
                rec.has_sep = 1;
                continue;
            }
            if (dst->len)
                buf_putc(dst, '\n');
            buf_puts(dst, lines.v[i]);
        }
        int go_on = 1;
        if (skip)
            r->n_skip++;
        else
            go_on = run_record(r, &rec);
        skip = 0;
        buf_free(&rec.body);
        buf_free(&rec.expected);
        if (!go_on)
            break;
    }
    sl_free(&lines);
}

/* Read a whole file into a heap string (caller frees), or NULL. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    Buf b = BUF_INIT;
    char chunk[8192];
    size_t n;
    buf_puts(&b, "");
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_append(&b, chunk, n);
    fclose(f);
    return buf_take(&b);
}

/*
 * Run one .slt file on a fresh system (or the --connect server). Returns 0
 * if every record passed.
 */
static int run_file(Runner *r, const char *path, int index)
{
    char *text = read_file(path);
    if (!text) {
        printf("not ok - %s: cannot read: %s\n", path, strerror(errno));
        return -1;
    }
    int setup_failed = 0;
    r->path = path;
    r->n_pass = r->n_fail = r->n_skip = 0;
    char *real = realpath(path, NULL), *slash = real ? strrchr(real, '/') : NULL;
    if (slash)
        *slash = 0;
    snprintf(r->testdir, sizeof r->testdir, "%s", slash ? real : ".");
    free(real);
    snprintf(r->unique, sizeof r->unique, "u%ld_%d_%ld", (long)getpid(), index, (long)time(NULL) % 100000);
    r->tmpdir[0] = 0;

    if (r->connect) {
        setup_failed = connect_server(r, 5.0) != 0;
        if (!setup_failed)
            snprintf(r->pgport, sizeof r->pgport, "%s", PQport(r->conn));
    } else {
        snprintf(r->tmpdir, sizeof r->tmpdir, "/tmp/weir-slt-XXXXXX");
        if (!mkdtemp(r->tmpdir)) {
            perror("slt_runner: mkdtemp");
            exit(2);
        }
        snprintf(r->datadir, sizeof r->datadir, "%s/data", r->tmpdir);
        mkdir(r->datadir, 0755);
        r->kport = free_port();
        do r->pport = free_port(); while (r->pport == r->kport);
        do r->fport = free_port(); while (r->fport == r->kport || r->fport == r->pport);
        snprintf(r->kafka, sizeof r->kafka, "127.0.0.1:%d", r->kport);
        snprintf(r->pgport, sizeof r->pgport, "%d", r->pport);
        snprintf(r->freeport, sizeof r->freeport, "%d", r->fport);
        setup_failed = start_broker(r) != 0 || start_server(r) != 0;
    }
    if (setup_failed)
        printf("not ok - %s: could not start or reach weir\n", path);
    else
        run_text(r, text);
    free(text);

    if (!r->connect) {
        if (stop_server(r, SIGTERM) != 0)
            r->n_fail++;
        stop_proc(&r->broker, SIGTERM);
        if (r->keep)
            printf("# %s: kept %s\n", path, r->tmpdir);
        else
            nftw(r->tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    } else if (r->conn) {
        PQfinish(r->conn);
        r->conn = NULL;
    }
    int failed = setup_failed || r->n_fail > 0;
    printf("%s - %s: %d passed, %d failed, %d skipped\n", failed ? "not ok" : "ok", path,
           r->n_pass, r->n_fail, r->n_skip);
    fflush(stdout);
    return failed ? -1 : 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: slt_runner (--weir PATH | --connect CONNINFO) [--keep]\n"
            "                  [--kafka HOST:PORT] [--free-port P] [--data-dir DIR] file.slt...\n"
            "  --weir PATH        start a fresh broker and server from this binary per file\n"
            "  --connect CONNINFO use a running server (no control restart/kill)\n"
            "  --keep             keep temp dirs and logs\n"
            "  --kafka, --free-port, --data-dir  values of ${KAFKA} ${FREEPORT} ${DATADIR}\n"
            "                     with --connect (defaults 127.0.0.1:9092, 4567, ./data)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    Runner r = {0};
    StrList files = {0};
    snprintf(r.kafka, sizeof r.kafka, "127.0.0.1:9092");
    snprintf(r.freeport, sizeof r.freeport, "4567");
    snprintf(r.datadir, sizeof r.datadir, "./data");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--weir") && has_val)
            r.weir = argv[++i];
        else if (!strcmp(a, "--connect") && has_val)
            r.connect = argv[++i];
        else if (!strcmp(a, "--keep"))
            r.keep = 1;
        else if (!strcmp(a, "--kafka") && has_val)
            snprintf(r.kafka, sizeof r.kafka, "%s", argv[++i]);
        else if (!strcmp(a, "--free-port") && has_val)
            snprintf(r.freeport, sizeof r.freeport, "%s", argv[++i]);
        else if (!strcmp(a, "--data-dir") && has_val)
            snprintf(r.datadir, sizeof r.datadir, "%s", argv[++i]);
        else if (a[0] == '-')
            usage();
        else
            sl_push(&files, xstrdup(a));
    }
    if ((!r.weir == !r.connect) || files.n == 0)
        usage();
    if (r.weir && access(r.weir, X_OK) != 0) {
        fprintf(stderr, "slt_runner: %s is not executable\n", r.weir);
        return 2;
    }
    g_children[0] = &r.broker;
    g_children[1] = &r.server;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);

    int n_failed = 0;
    for (size_t i = 0; i < files.n; i++)
        n_failed += run_file(&r, files.v[i], (int)i) != 0;
    printf("# %zu files: %zu passed, %d failed\n", files.n, files.n - n_failed, n_failed);
    sl_free(&files);
    return n_failed ? 1 : 0;
}
