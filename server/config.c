/*
 * config.c: settings from a file, the environment and --name=value (config.h).
 *
 * The result is a plain argument list, so serve() keeps one parser and one
 * set of checks for every source: a value from a file gets the same error
 * as the same value on the command line. Later arguments override earlier
 * ones in serve(), hence the order file, environment, command line.
 *
 * The file's format is a TOML subset, enough for flat settings:
 *   # comment
 *   data-dir = "/var/lib/weir"        (or data_dir; quotes optional)
 *   port = 4566
 *   http-sql = true
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "arena.h"

const char *const CONFIG_SWITCHES[] = {"no-broker", "http-sql", NULL};
const char *const CONFIG_SETTINGS[] = {"data-dir",       "host",          "port",
                                       "kafka",          "cluster",       "node-id",
                                       "advertise-host", "checkpoint-interval", "max-connections",
                                       "state-memory-limit", "max-map-size", "state-cache-size",
                                       "http-host",      "http-port",     "tls-cert",
                                       "tls-key",        "auth",          "log-level",
                                       NULL};

#define CONFIG_MAX_ARGS 4096 /* arguments from all sources together */

/* The last list handed out: the server keeps pointers into it for its whole
 * life, and this keeps it reachable (not a leak to LeakSanitizer at exit). */
char **config_kept_args;

typedef struct Args {
    int n;
    char *v[CONFIG_MAX_ARGS];
} Args;

static int push(Args *a, const char *s, size_t n, WError *err)
{
    if (a->n >= CONFIG_MAX_ARGS)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "more than %d settings", CONFIG_MAX_ARGS);
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    a->v[a->n++] = d;
    return 0;
}

/* "data_dir" -> "data-dir"; NULL when it names no setting. */
static const char *known(const char *name, size_t n, bool *is_switch)
{
    char norm[64];
    if (n == 0 || n >= sizeof norm)
        return NULL;
    for (size_t i = 0; i < n; i++)
        norm[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
    norm[n] = 0;
    for (int i = 0; CONFIG_SWITCHES[i]; i++)
        if (!strcmp(norm, CONFIG_SWITCHES[i]))
            return *is_switch = true, CONFIG_SWITCHES[i];
    for (int i = 0; CONFIG_SETTINGS[i]; i++)
        if (!strcmp(norm, CONFIG_SETTINGS[i]))
            return *is_switch = false, CONFIG_SETTINGS[i];
    return NULL;
}

static int boolean(const char *v, bool *out)
{
    if (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1") || !strcasecmp(v, "yes"))
        return *out = true, 0;
    if (!strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcmp(v, "0") || !strcasecmp(v, "no"))
        return *out = false, 0;
    return -1;
}

/* One setting from the file or the environment. */
static int add_setting(Args *a, const char *where, const char *name, size_t nlen, const char *value, WError *err)
{
    bool sw;
    const char *flag = known(name, nlen, &sw);
    if (!flag)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s: unknown setting \"%.*s\"", where, (int)nlen, name);
    char dashed[80];
    snprintf(dashed, sizeof dashed, "--%s", flag);
    if (sw) {
        bool on;
        if (boolean(value, &on))
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s: %s must be true or false, not \"%s\"", where, flag,
                        value);
        return on ? push(a, dashed, strlen(dashed), err) : 0;
    }
    if (push(a, dashed, strlen(dashed), err))
        return -1;
    return push(a, value, strlen(value), err);
}

static int read_file(Args *a, const char *path, WError *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "cannot read the configuration file %s: %s", path,
                    strerror(errno));
    char line[4096];
    int lineno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        char where[300];
        snprintf(where, sizeof where, "%.250s line %d", path, lineno);
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s: longer than %zu bytes", where, sizeof line - 2);
            break;
        }
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            continue;
        char *eq = strchr(p, '=');
        if (!eq) {
            rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s: expected name = value", where);
            break;
        }
        char *ne = eq;
        while (ne > p && isspace((unsigned char)ne[-1]))
            ne--;
        char *v = eq + 1;
        while (isspace((unsigned char)*v))
            v++;
        char *ve = v + strlen(v);
        while (ve > v && isspace((unsigned char)ve[-1]))
            ve--;
        if (ve > v && (*v == '"' || *v == '\'')) {
            char q = *v;
            if (ve - v < 2 || ve[-1] != q) {
                rc = werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s: unterminated string", where);
                break;
            }
            v++, ve--;
        } else {
            /* An unquoted value ends at a comment. */
            char *hash = memchr(v, '#', (size_t)(ve - v));
            if (hash)
                for (ve = hash; ve > v && isspace((unsigned char)ve[-1]);)
                    ve--;
        }
        *ve = 0;
        rc = add_setting(a, where, p, (size_t)(ne - p), v, err);
    }
    fclose(f);
    return rc;
}

int config_args(int argc, char **argv, int *out_argc, char ***out_argv, WError *err)
{
    Args *a = xcalloc(1, sizeof *a);
    const char *file = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            file = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9))
            file = argv[i] + 9;
    }
    int rc = file ? read_file(a, file, err) : 0;
    for (int i = 0; !rc && CONFIG_SWITCHES[i]; i++) {
        char env[80];
        snprintf(env, sizeof env, "WEIR_%s", CONFIG_SWITCHES[i]);
        for (char *p = env + 5; *p; p++)
            *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        const char *v = getenv(env);
        if (v)
            rc = add_setting(a, env, CONFIG_SWITCHES[i], strlen(CONFIG_SWITCHES[i]), v, err);
    }
    for (int i = 0; !rc && CONFIG_SETTINGS[i]; i++) {
        char env[80];
        snprintf(env, sizeof env, "WEIR_%s", CONFIG_SETTINGS[i]);
        for (char *p = env + 5; *p; p++)
            *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        const char *v = getenv(env);
        if (v)
            rc = add_setting(a, env, CONFIG_SETTINGS[i], strlen(CONFIG_SETTINGS[i]), v, err);
    }
    for (int i = 0; !rc && i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--config")) {
            i++;
            continue;
        }
        if (!strncmp(s, "--config=", 9))
            continue;
        const char *eq = strncmp(s, "--", 2) == 0 ? strchr(s, '=') : NULL;
        if (eq) {
            rc = push(a, s, (size_t)(eq - s), err);
            if (!rc)
                rc = push(a, eq + 1, strlen(eq + 1), err);
        } else {
            rc = push(a, s, strlen(s), err);
        }
    }
    if (rc) {
        for (int i = 0; i < a->n; i++)
            free(a->v[i]);
        free(a);
        return -1;
    }
    char **out = xcalloc((size_t)a->n + 1, sizeof *out);
    memcpy(out, a->v, sizeof(char *) * (size_t)a->n);
    *out_argc = a->n;
    *out_argv = out;
    config_kept_args = out;
    free(a);
    return 0;
}
