/*
 * cmd_user.c: database users and their SCRAM-SHA-256 verifiers.
 *
 * CREATE USER name [WITH] [PASSWORD 'p'], ALTER USER name [WITH] PASSWORD
 * 'p' | NULL, DROP USER [IF EXISTS] name. A password is turned into its
 * SCRAM verifier at once (crypto.c) and only the verifier is kept: in memory
 * (Engine.users, under the engine lock) and in the LMDB catalog as an entry
 * of kind CATALOG_KIND_USER whose body is (kind, name, verifier, 0), the
 * same row shape as relations, replayed at start before them. A password
 * that is already a verifier (psql's \password sends one) is stored as is.
 *
 * `weir` is the built-in superuser: it always exists (it is who trusted
 * connections act as), cannot be created or dropped, and gets a password
 * with ALTER USER weir PASSWORD '...'. Users have no privileges of their
 * own: any user that can log in can run any statement.
 */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "row.h"

static EngineUser *find(Engine *e, const char *name)
{
    for (int i = 0; i < e->n_users; i++)
        if (strcmp(e->users[i].name, name) == 0)
            return &e->users[i];
    return NULL;
}

static int persist(Engine *e, const EngineUser *u, WError *err)
{
    Value vals[4];
    vals[0] = value_int(TYPE_INT8, CATALOG_KIND_USER);
    vals[1] = value_str(TYPE_TEXT, u->name, strlen(u->name));
    vals[2] = u->verifier ? value_str(TYPE_TEXT, u->verifier, strlen(u->verifier)) : value_null(TYPE_TEXT);
    vals[3] = value_int(TYPE_INT8, 0);
    Buf b = BUF_INIT;
    row_encode(&b, vals, 4);
    StorCatalogEntry ce = {.id = u->id, .kind = CATALOG_KIND_USER, .name = u->name, .body = b.data,
                           .body_len = b.len};
    int rc = stor_catalog_put(e->stor, &ce, err);
    buf_free(&b);
    return rc;
}

static EngineUser *add(Engine *e, uint64_t id, const char *name, const char *verifier)
{
    if (e->n_users == e->cap_users) {
        e->cap_users = e->cap_users ? e->cap_users * 2 : 8;
        e->users = xrealloc(e->users, sizeof(EngineUser) * (size_t)e->cap_users);
    }
    EngineUser *u = &e->users[e->n_users++];
    u->id = id;
    u->name = xstrdup(name);
    u->verifier = verifier ? xstrdup(verifier) : NULL;
    return u;
}

void users_load(Engine *e, uint64_t id, const char *name, const char *verifier)
{
    EngineUser *u = find(e, name);
    if (u) {
        free(u->verifier);
        u->verifier = verifier ? xstrdup(verifier) : NULL;
        u->id = id;
        return;
    }
    add(e, id, name, verifier);
}

void users_free(Engine *e)
{
    for (int i = 0; i < e->n_users; i++) {
        free(e->users[i].name);
        free(e->users[i].verifier);
    }
    free(e->users);
    e->users = NULL;
    e->n_users = e->cap_users = 0;
}

bool engine_has_passwords(Engine *e)
{
    pthread_mutex_lock(&e->lock);
    bool any = false;
    for (int i = 0; i < e->n_users && !any; i++)
        any = e->users[i].verifier != NULL;
    pthread_mutex_unlock(&e->lock);
    return any;
}

int users_verifier(void *ctx, const char *user, char *out, size_t n)
{
    Engine *e = ctx;
    int rc = -1;
    pthread_mutex_lock(&e->lock);
    EngineUser *u = find(e, user);
    if (u && u->verifier && strlen(u->verifier) < n) {
        strcpy(out, u->verifier);
        rc = 0;
    }
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* The verifier for a PASSWORD clause: NULL for PASSWORD NULL. */
static int make_verifier(const char *password, int pos, char *out, size_t n, bool *has, WError *err)
{
    *has = password && *password;
    if (!*has)
        return 0;
    if (crypto_scram_is_verifier(password)) {
        snprintf(out, n, "%s", password);
        return 0;
    }
    if (!strncmp(password, "md5", 3) && strlen(password) == 35)
        return werr(err, SQLSTATE_NOT_SUPPORTED, pos, "feature not supported: MD5 password hashes"),
               werr_hint(err, "Give the password itself, or a SCRAM-SHA-256 verifier."), -1;
    return crypto_scram_verifier(password, out, n, err);
}

int users_exec(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstUser *au = st->u.user;
    bool bootstrap = strcmp(au->name, USER_BOOTSTRAP) == 0;
    char verifier[SCRAM_VERIFIER_MAX];
    bool has = false;
    if (strlen(au->name) > 63)
        return werr(err, SQLSTATE_INVALID_NAME, st->pos, "user name \"%.63s...\" is too long", au->name);
    switch (st->kind) {
    case STMT_CREATE_USER: {
        if (bootstrap || find(e, au->name))
            return werr(err, SQLSTATE_DUPLICATE_OBJECT, st->pos, "role \"%s\" already exists", au->name);
        if (make_verifier(au->password, st->pos, verifier, sizeof verifier, &has, err))
            return -1;
        uint64_t id;
        if (stor_next_id(e->stor, &id, err))
            return -1;
        EngineUser tmp = {.id = id, .name = (char *)au->name, .verifier = has ? verifier : NULL};
        if (persist(e, &tmp, err))
            return -1;
        add(e, id, au->name, has ? verifier : NULL);
        srv_result_complete(out, "CREATE ROLE");
        return 0;
    }
    case STMT_ALTER_USER: {
        EngineUser *u = find(e, au->name);
        if (!u && !bootstrap)
            return werr(err, SQLSTATE_UNDEFINED_OBJECT, st->pos, "role \"%s\" does not exist", au->name);
        if (!au->password)
            return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                        "feature not supported: ALTER USER without PASSWORD (users have no other attributes)");
        if (make_verifier(au->password, st->pos, verifier, sizeof verifier, &has, err))
            return -1;
        uint64_t id = u ? u->id : 0;
        if (!u && stor_next_id(e->stor, &id, err))
            return -1;
        EngineUser tmp = {.id = id, .name = (char *)au->name, .verifier = has ? verifier : NULL};
        if (persist(e, &tmp, err))
            return -1;
        users_load(e, id, au->name, has ? verifier : NULL);
        srv_result_complete(out, "ALTER ROLE");
        return 0;
    }
    case STMT_DROP_USER: {
        if (bootstrap)
            return werr(err, SQLSTATE_OBJECT_IN_USE, st->pos, "cannot drop role %s because it is required by the database system",
                        au->name);
        EngineUser *u = find(e, au->name);
        if (!u) {
            if (au->if_exists) {
                char msg[200];
                snprintf(msg, sizeof msg, "role \"%s\" does not exist, skipping", au->name);
                srv_result_notice(out, msg);
                srv_result_complete(out, "DROP ROLE");
                return 0;
            }
            return werr(err, SQLSTATE_UNDEFINED_OBJECT, st->pos, "role \"%s\" does not exist", au->name);
        }
        if (stor_catalog_delete(e->stor, u->id, err) < 0)
            return -1;
        free(u->name);
        free(u->verifier);
        *u = e->users[--e->n_users];
        srv_result_complete(out, "DROP ROLE");
        return 0;
    }
    default:
        return werr(err, SQLSTATE_INTERNAL, st->pos, "not a user statement");
    }
}
