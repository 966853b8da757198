/*
 * registry.c: the schema registry `weir broker --registry host:port`
 * serves, the REST subset of Confluent's that producers, consumers and
 * weir's own sources use (docs/connectors.md lists it):
 *
 *   POST /subjects/{s}/versions                 register (BACKWARD-checked) -> {"id"}
 *   GET  /subjects                              ["s", ...]
 *   GET  /subjects/{s}/versions                 [1, 2, ...]
 *   GET  /subjects/{s}/versions/{v|latest}      {"subject","version","id","schema"}
 *   GET  /schemas/ids/{id}                      {"schema"}
 *   POST /compatibility/subjects/{s}/versions/latest   {"is_compatible": bool}
 *
 * Errors are Confluent's bodies: {"error_code": 40401, "message": "..."}.
 * Ids are global: the same schema (libavro's equality) registered under
 * two subjects has one id. The lists live in memory; with a file
 * (--registry-file) every new version is appended to it as one JSON line
 * {"subject", "schema"} and fsync'ed before the answer, and the file is
 * registered again in order at start, so a restarted registry gives the
 * same ids (as Confluent's does from its _schemas topic). Basic auth
 * (--registry-user user:password) guards every request when asked.
 * libmicrohttpd runs one internal polling thread, and the lock guards the
 * lists against any other caller.
 *
 * <microhttpd.h> is included here for the runtime (the server's HTTP API
 * has its own in server/http.c); <avro.h> and <jansson.h> as in avro.c.
 */
#include "avro_codec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <avro.h>
#include <jansson.h>
#include <microhttpd.h>

#include "log.h"
#include "weir_limits.h"

#define MAX_BODY (WEIR_MAX_AVRO_SCHEMA_BYTES * 2 + 4096) /* a schema JSON-escaped inside {"schema": ...} */
#define MAX_SUBJECT_LEN 1024
#define CONTENT_TYPE "application/vnd.schemaregistry.v1+json"

typedef struct Schema {
    int id;
    char *text;              /* as registered */
    avro_schema_t parsed;
} Schema;

typedef struct Subject {
    char *name;
    int *versions;           /* schema index per version (version = position + 1) */
    int n_versions;
} Subject;

struct RtSchemaRegistry {
    struct MHD_Daemon *d;
    FILE *log;               /* --registry-file, or NULL */
    char *user, *password;   /* basic auth, or NULL */
    pthread_mutex_t mu;
    Schema *schemas;
    int n_schemas;
    Subject *subjects;
    int n_subjects;
};

typedef struct Req {
    Buf body;
    bool too_big;
} Req;

/* ---- BACKWARD compatibility: can a reader with schema r read data written with w? ---- */

static const char *type_of(json_t *t)
{
    if (json_is_string(t))
        return json_string_value(t);
    if (json_is_object(t))
        return json_string_value(json_object_get(t, "type"));
    return json_is_array(t) ? "union" : NULL;
}

static bool promotes(const char *w, const char *r)
{
    if (!strcmp(w, r))
        return true;
    if (!strcmp(w, "int"))
        return !strcmp(r, "long") || !strcmp(r, "float") || !strcmp(r, "double");
    if (!strcmp(w, "long"))
        return !strcmp(r, "float") || !strcmp(r, "double");
    if (!strcmp(w, "float"))
        return !strcmp(r, "double");
    return (!strcmp(w, "string") && !strcmp(r, "bytes")) || (!strcmp(w, "bytes") && !strcmp(r, "string"));
}

static bool compatible(json_t *r, json_t *w, int depth)
{
    const char *rt = type_of(r), *wt = type_of(w);
    if (!rt || !wt || depth > 64)
        return false;
    size_t i;
    json_t *b;
    if (!strcmp(wt, "union")) { /* every branch written must be readable */
        json_array_foreach(w, i, b) if (!compatible(r, b, depth + 1)) return false;
        return true;
    }
    if (!strcmp(rt, "union")) { /* the written type must be readable by some branch */
        json_array_foreach(r, i, b) if (compatible(b, w, depth + 1)) return true;
        return false;
    }
    if (!strcmp(rt, "record") && !strcmp(wt, "record")) {
        json_t *rf = json_object_get(r, "fields"), *wf = json_object_get(w, "fields"), *f;
        json_array_foreach(rf, i, f) {
            const char *name = json_string_value(json_object_get(f, "name"));
            json_t *match = NULL, *g;
            size_t k;
            json_array_foreach(wf, k, g) {
                if (name && !strcmp(name, json_string_value(json_object_get(g, "name")) ?: ""))
                    match = g;
            }
            if (match ? !compatible(json_object_get(f, "type"), json_object_get(match, "type"), depth + 1)
                      : !json_object_get(f, "default"))
                return false; /* a field added without a default cannot be read from old data */
        }
        return true;
    }
    if (!strcmp(rt, "enum") && !strcmp(wt, "enum")) {
        if (json_object_get(r, "default"))
            return true;
        json_t *rs = json_object_get(r, "symbols"), *s, *q;
        json_array_foreach(json_object_get(w, "symbols"), i, s) {
            bool found = false;
            size_t k;
            json_array_foreach(rs, k, q) found = found || json_equal(q, s);
            if (!found)
                return false;
        }
        return true;
    }
    if (!strcmp(rt, "array") && !strcmp(wt, "array"))
        return compatible(json_object_get(r, "items"), json_object_get(w, "items"), depth + 1);
    if (!strcmp(rt, "map") && !strcmp(wt, "map"))
        return compatible(json_object_get(r, "values"), json_object_get(w, "values"), depth + 1);
    if (!strcmp(rt, "fixed") && !strcmp(wt, "fixed"))
        return json_equal(json_object_get(r, "size"), json_object_get(w, "size"));
    return promotes(wt, rt);
}

static bool backward_compatible(const char *reader, const char *writer)
{
    json_error_t e;
    json_t *r = json_loads(reader, JSON_DECODE_ANY, &e), *w = json_loads(writer, JSON_DECODE_ANY, &e);
    bool ok = r && w && compatible(r, w, 0);
    json_decref(r);
    json_decref(w);
    return ok;
}

/* ---- answers ---------------------------------------------------------------------------- */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, json_t *body)
{
    char *s = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(body);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", CONTENT_TYPE);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned status, int code, const char *msg)
{
    return answer(c, status, json_pack("{s:i,s:s}", "error_code", code, "message", msg));
}

static Subject *find_subject(RtSchemaRegistry *g, const char *name)
{
    for (int i = 0; i < g->n_subjects; i++)
        if (!strcmp(g->subjects[i].name, name))
            return &g->subjects[i];
    return NULL;
}

/* The schema of a POST body, or NULL after answering 422/400. */
static const char *body_schema(struct MHD_Connection *c, json_t *root, enum MHD_Result *res)
{
    const char *s = json_string_value(json_object_get(root, "schema"));
    const char *type = json_string_value(json_object_get(root, "schemaType"));
    if (!s) {
        *res = fail(c, 422, 42201, "Either the input schema or one its references is invalid: no \"schema\"");
        return NULL;
    }
    if (type && strcmp(type, "AVRO") != 0) {
        *res = fail(c, 422, 42201, "Only Avro schemas are supported by this registry");
        return NULL;
    }
    return s;
}

static int add_version(RtSchemaRegistry *g, Subject **subp, const char *subject, const char *text,
                       avro_schema_t parsed);

static enum MHD_Result do_register(RtSchemaRegistry *g, struct MHD_Connection *c, const char *subject, json_t *root)
{
    enum MHD_Result res;
    const char *text = body_schema(c, root, &res);
    if (!text)
        return res;
    avro_schema_t parsed;
    if (avro_schema_from_json_length(text, strlen(text), &parsed)) {
        char msg[300];
        snprintf(msg, sizeof msg, "Invalid schema: %s", avro_strerror());
        return fail(c, 422, 42201, msg);
    }
    Subject *sub = find_subject(g, subject);
    for (int v = 0; sub && v < sub->n_versions; v++)
        if (avro_schema_equal(g->schemas[sub->versions[v]].parsed, parsed)) {
            avro_schema_decref(parsed);
            return answer(c, 200, json_pack("{s:i}", "id", g->schemas[sub->versions[v]].id));
        }
    if (sub && sub->n_versions &&
        !backward_compatible(text, g->schemas[sub->versions[sub->n_versions - 1]].text)) {
        avro_schema_decref(parsed);
        char msg[MAX_SUBJECT_LEN + 100];
        snprintf(msg, sizeof msg, "Schema being registered is incompatible with an earlier schema for subject \"%s\"",
                 subject);
        return fail(c, 409, 409, msg);
    }
    int idx = add_version(g, &sub, subject, text, parsed);
    if (idx < 0)
        return fail(c, 500, 50001, idx == -2 ? "could not write the registry file"
                                             : "the embedded registry holds its maximum number of schemas");
    wlog_info("registry", "subject %s version %d: schema id %d", subject, sub->n_versions, g->schemas[idx].id);
    return answer(c, 200, json_pack("{s:i}", "id", g->schemas[idx].id));
}

/* Adds text (parsed; taken) as the next version of subject (*sub, created
 * if NULL), and appends it to the file when there is one. Returns the
 * schema's index, -1 (too many schemas) or -2 (the file write failed). */
static int add_version(RtSchemaRegistry *g, Subject **subp, const char *subject, const char *text,
                       avro_schema_t parsed)
{
    Subject *sub = *subp;
    int idx = -1;
    for (int i = 0; i < g->n_schemas && idx < 0; i++)
        if (avro_schema_equal(g->schemas[i].parsed, parsed))
            idx = i;
    if (idx < 0) {
        if (g->n_schemas == WEIR_MAX_REGISTRY_SCHEMAS) {
            avro_schema_decref(parsed);
            return -1;
        }
        g->schemas = xrealloc(g->schemas, sizeof(Schema) * (size_t)(g->n_schemas + 1));
        g->schemas[g->n_schemas] = (Schema){g->n_schemas + 1, xstrdup(text), parsed};
        idx = g->n_schemas++;
    } else {
        avro_schema_decref(parsed);
    }
    if (!sub) {
        g->subjects = xrealloc(g->subjects, sizeof(Subject) * (size_t)(g->n_subjects + 1));
        sub = &g->subjects[g->n_subjects++];
        *sub = (Subject){xstrdup(subject), NULL, 0};
    }
    sub->versions = xrealloc(sub->versions, sizeof(int) * (size_t)(sub->n_versions + 1));
    sub->versions[sub->n_versions++] = idx;
    *subp = sub;
    if (g->log) {
        json_t *line = json_pack("{s:s,s:s}", "subject", subject, "schema", text);
        char *t = json_dumps(line, JSON_COMPACT);
        json_decref(line);
        bool ok = fprintf(g->log, "%s\n", t) > 0 && fflush(g->log) == 0 && fsync(fileno(g->log)) == 0;
        free(t);
        if (!ok)
            return -2;
    }
    return idx;
}

/* The version named by v ("latest" or 1..n) of sub, or -1 after answering. */
static int version_of(struct MHD_Connection *c, const Subject *sub, const char *v, enum MHD_Result *res)
{
    if (!strcmp(v, "latest") || !strcmp(v, "-1"))
        return sub->n_versions - 1;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || !*v || n < 1) {
        *res = fail(c, 422, 42202, "The specified version is not a valid version id");
        return -1;
    }
    if (n > sub->n_versions) {
        *res = fail(c, 404, 40402, "Version not found.");
        return -1;
    }
    return (int)n - 1;
}

static enum MHD_Result route(RtSchemaRegistry *g, struct MHD_Connection *c, const char *method, const char *url,
                             json_t *body)
{
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    char subject[MAX_SUBJECT_LEN + 1], rest[64];
    int id;
    enum MHD_Result res = MHD_NO;
    if (get && (!strcmp(url, "/subjects") || !strcmp(url, "/subjects/"))) {
        json_t *a = json_array();
        for (int i = 0; i < g->n_subjects; i++)
            json_array_append_new(a, json_string(g->subjects[i].name));
        return answer(c, 200, a);
    }
    if (get && sscanf(url, "/schemas/ids/%d%63s", &id, rest) == 1) {
        if (id < 1 || id > g->n_schemas)
            return fail(c, 404, 40403, "Schema not found");
        return answer(c, 200, json_pack("{s:s}", "schema", g->schemas[id - 1].text));
    }
    bool compat = !strncmp(url, "/compatibility", 14);
    const char *p = compat ? url + 14 : url;
    if (strncmp(p, "/subjects/", 10) != 0)
        return fail(c, 404, 404, "HTTP 404 Not Found");
    p += 10;
    const char *slash = strchr(p, '/');
    size_t sl = slash ? (size_t)(slash - p) : strlen(p);
    if (sl == 0 || sl > MAX_SUBJECT_LEN)
        return fail(c, 404, 40401, "Subject not found.");
    memcpy(subject, p, sl);
    subject[sl] = 0;
    const char *tail = p + sl;
    Subject *sub = find_subject(g, subject);
    if (post && !compat && !strcmp(tail, "/versions"))
        return do_register(g, c, subject, body);
    char msg[MAX_SUBJECT_LEN + 64];
    snprintf(msg, sizeof msg, "Subject '%s' not found.", subject);
    if (!strncmp(tail, "/versions", 9) && (get || (post && compat)) && !sub)
        return fail(c, 404, 40401, msg);
    if (get && !compat && !strcmp(tail, "/versions")) {
        json_t *a = json_array();
        for (int v = 0; v < sub->n_versions; v++)
            json_array_append_new(a, json_integer(v + 1));
        return answer(c, 200, a);
    }
    if (!strncmp(tail, "/versions/", 10)) {
        int v = version_of(c, sub, tail + 10, &res);
        if (v < 0)
            return res;
        const Schema *s = &g->schemas[sub->versions[v]];
        if (get && !compat)
            return answer(c, 200, json_pack("{s:s,s:i,s:i,s:s}", "subject", sub->name, "version", v + 1, "id", s->id,
                                            "schema", s->text));
        if (post && compat) {
            const char *text = body_schema(c, body, &res);
            if (!text)
                return res;
            avro_schema_t parsed;
            if (avro_schema_from_json_length(text, strlen(text), &parsed))
                return fail(c, 422, 42201, "Invalid schema");
            avro_schema_decref(parsed);
            return answer(c, 200, json_pack("{s:b}", "is_compatible", backward_compatible(text, s->text)));
        }
    }
    return fail(c, 405, 405, "HTTP 405 Method Not Allowed");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    RtSchemaRegistry *g = cls;
    Req *rq = *con_cls;
    if (!rq) {
        *con_cls = xcalloc(1, sizeof(Req));
        return MHD_YES;
    }
    if (*upload_size) {
        if (rq->body.len + *upload_size > MAX_BODY)
            rq->too_big = true; /* checked before it grows; answered once the upload ends */
        else
            buf_append(&rq->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->too_big)
        return fail(c, 413, 413, "request body too large");
    if (g->user) {
        char *pw = NULL, *u = MHD_basic_auth_get_username_password(c, &pw);
        bool ok = u && pw && !strcmp(u, g->user) && !strcmp(pw, g->password);
        MHD_free(u);
        MHD_free(pw);
        if (!ok) {
            const char *msg = "{\"error_code\":401,\"message\":\"Unauthorized\"}";
            struct MHD_Response *r = MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
            MHD_add_response_header(r, "Content-Type", CONTENT_TYPE);
            enum MHD_Result res = MHD_queue_basic_auth_fail_response(c, "weir schema registry", r);
            MHD_destroy_response(r);
            return res;
        }
    }
    json_t *body = NULL;
    if (!strcmp(method, "POST")) {
        json_error_t e;
        body = rq->body.len ? json_loadb(rq->body.data, rq->body.len, 0, &e) : NULL;
        if (!body)
            return fail(c, 400, 400, "request body is not JSON");
    }
    pthread_mutex_lock(&g->mu);
    enum MHD_Result res = route(g, c, method, url, body);
    pthread_mutex_unlock(&g->mu);
    json_decref(body);
    return res;
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    (void)cls;
    (void)c;
    (void)t;
    Req *rq = *con_cls;
    if (rq) {
        buf_free(&rq->body);
        free(rq);
    }
    *con_cls = NULL;
}

/* Registers the lines of file f again, in order. Returns 0 or -1 (err). */
static int load_file(RtSchemaRegistry *g, FILE *f, const char *path, WError *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0, rc = 0;
    while (!rc && (n = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t e;
        json_t *j = json_loadb(line, (size_t)n, 0, &e);
        const char *subject = json_string_value(json_object_get(j, "subject"));
        const char *text = json_string_value(json_object_get(j, "schema"));
        avro_schema_t parsed;
        if (!subject || !text || avro_schema_from_json_length(text, strlen(text), &parsed)) {
            rc = werr(err, SQLSTATE_DATA_CORRUPTED, 0, "%s line %d is not a registered schema", path, lineno);
        } else {
            Subject *sub = find_subject(g, subject);
            if (add_version(g, &sub, subject, text, parsed) < 0)
                rc = werr(err, SQLSTATE_PROGRAM_LIMIT, 0, "%s holds more than %d schemas", path,
                          WEIR_MAX_REGISTRY_SCHEMAS);
        }
        json_decref(j);
    }
    free(line);
    return rc;
}

RtSchemaRegistry *rt_schema_registry_start(const char *listen, const char *file, const char *userpass, WError *err)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "registry address \"%s\" is not host:port", listen);
        return NULL;
    }
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = 0;
    int port = atoi(colon + 1);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (port < 1 || port > 65535 || inet_pton(AF_INET, !strcmp(host, "localhost") ? "127.0.0.1" : host,
                                              &sa.sin_addr) != 1) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "registry address \"%s\" is not an IPv4 host:port", listen);
        return NULL;
    }
    RtSchemaRegistry *g = xcalloc(1, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    if (userpass) {
        const char *c = strchr(userpass, ':');
        if (!c) {
            werr(err, SQLSTATE_INVALID_PARAMETER, 0, "registry user must be user:password");
            rt_schema_registry_stop(g);
            return NULL;
        }
        g->user = xstrndup(userpass, (size_t)(c - userpass));
        g->password = xstrdup(c + 1);
    }
    if (file) {
        FILE *f = fopen(file, "r");
        if (f) {
            int rc = load_file(g, f, file, err);
            fclose(f);
            if (rc) {
                rt_schema_registry_stop(g);
                return NULL;
            }
        }
        if (!(g->log = fopen(file, "a"))) {
            werr(err, SQLSTATE_IO_ERROR, 0, "cannot open %s: %s", file, strerror(errno));
            rt_schema_registry_stop(g);
            return NULL;
        }
    }
    g->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, g, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, request_done, g,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!g->d) {
        werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "cannot serve the schema registry on %s: %s", listen,
             strerror(errno));
        rt_schema_registry_stop(g);
        return NULL;
    }
    return g;
}

void rt_schema_registry_stop(RtSchemaRegistry *g)
{
    if (!g)
        return;
    if (g->d)
        MHD_stop_daemon(g->d);
    if (g->log)
        fclose(g->log);
    free(g->user);
    free(g->password);
    for (int i = 0; i < g->n_schemas; i++) {
        free(g->schemas[i].text);
        avro_schema_decref(g->schemas[i].parsed);
    }
    for (int i = 0; i < g->n_subjects; i++) {
        free(g->subjects[i].name);
        free(g->subjects[i].versions);
    }
    free(g->schemas);
    free(g->subjects);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
