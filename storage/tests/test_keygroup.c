/*
 * test_keygroup.c: unit tests for storage's key-group calls (storage.h "Key
 * groups"): listing the groups of a table, exporting one to a buffer and a
 * callback, importing it into another table (checked before written),
 * dropping one, durability of both through a checkpoint and a reopen, and
 * the grouped handle that reads a key-grouped table (plain or merged) as
 * if it had no groups. TAP output.
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage.h"
#include "tap.h"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* kg ++ s as a key. */
static size_t gkey(unsigned char *out, int kg, const char *s)
{
    out[0] = (unsigned char)(kg >> 8);
    out[1] = (unsigned char)kg;
    memcpy(out + 2, s, strlen(s));
    return 2 + strlen(s);
}

static int put(StorTable *t, int kg, const char *k, const char *v)
{
    unsigned char b[64];
    WError err = {0};
    return stor_table_put(t, b, gkey(b, kg, k), v, strlen(v), &err);
}

/* The value of kg ++ k in t, as a string in a static buffer, or "-" if absent. */
static const char *get(StorTable *t, int kg, const char *k)
{
    static char out[64];
    unsigned char b[64];
    const void *v;
    size_t vl;
    WError err = {0};
    int f = stor_table_get(t, b, gkey(b, kg, k), &v, &vl, &err);
    if (f != 1)
        return "-";
    snprintf(out, sizeof out, "%.*s", (int)vl, (const char *)v);
    return out;
}

static int commit(StorEnv *env, uint64_t epoch, StorTable *t)
{
    StorCheckpoint *ck;
    WError err = {0};
    if (stor_checkpoint_begin(env, epoch, &ck, &err) || stor_checkpoint_add_table(ck, t, &err))
        return -1;
    return stor_checkpoint_commit(ck, &err);
}

/* The groups of t (G groups) as "0,1,5". */
static const char *groups(StorTable *t, int G)
{
    static char out[256];
    int *v;
    WError err = {0};
    int n = stor_kg_list(t, G, &v, &err);
    out[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%d", i ? "," : "", v[i]);
    free(v);
    return n < 0 ? "error" : out;
}

/* Every key of a scan of t (prefix p) as "a b c". */
static const char *scan(StorTable *t, const char *p, const char *lower, const char *upper)
{
    static char out[256];
    StorIter *it;
    WError err = {0};
    out[0] = 0;
    if (stor_iter_open_range(t, p, strlen(p), lower, lower ? strlen(lower) : 0, upper, upper ? strlen(upper) : 0,
                             &it, &err))
        return "error";
    const void *k, *v;
    size_t kl, vl;
    int f;
    while ((f = stor_iter_next(it, &k, &kl, &v, &vl, &err)) == 1)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%.*s", out[0] ? " " : "", (int)kl, (const char *)k);
    stor_iter_close(it);
    return f < 0 ? "error" : out;
}

static int count_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    return ++*(int *)arg == 100 ? 7 : 0;
}

int main(void)
{
    char base[] = "/tmp/weir_test_kg_XXXXXX";
    if (!mkdtemp(base))
        return 1;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/d", base);
    StorEnv *env;
    WError err = {0};
    if (stor_open(dir, NULL, &env, &err))
        return 1;
    StorTable *t, *u;
    stor_table_open(env, 10, &t, &err);
    stor_table_open(env, 11, &u, &err);

    /* Groups 0, 5 and 300 committed, group 1 and more of 5 dirty, and a
     * bookkeeping key outside every group. */
    put(t, 0, "a", "0a");
    put(t, 5, "b", "5b");
    put(t, 5, "d", "5d");
    put(t, 300, "c", "300c");
    stor_table_put(t, "\xff\xff", 2, "meta", 4, &err);
    ok(commit(env, 1, t) == 0, "checkpoint 1");
    put(t, 1, "e", "1e");
    put(t, 5, "a", "5a");
    is_str(groups(t, 512), "0,1,5,300", "list: committed and dirty groups, not the bookkeeping key");
    is_str(groups(t, 300), "0,1,5", "list: only groups below G");
    int *v;
    ok(stor_kg_list(t, 0, &v, &err) < 0 && strcmp(err.sqlstate, "22023") == 0, "list: G 0 is 22023");

    /* Export: the callback sees group 5's three keys; a nonzero return stops and is returned. */
    int n = 0;
    ok(stor_kg_export(t, 5, count_cb, &n, &err) == 0 && n == 3, "export: three entries of group 5");
    ok(stor_kg_export(t, 70000, count_cb, &n, &err) < 0 && strcmp(err.sqlstate, "22023") == 0,
       "export: group outside 0..65535 is 22023");
    Buf b5 = BUF_INIT, b0 = BUF_INIT;
    ok(stor_kg_export_buf(t, 5, &b5, &err) == 0 && b5.len == 1 + 3 * 8 + 3 * 3 + 3 * 2,
       "export_buf: version byte and three entries");
    ok(stor_kg_export_buf(t, 0, &b0, &err) == 0, "export_buf of group 0");

    /* Import into another table: refused whole when malformed or of another group. */
    put(u, 5, "z", "old");
    ok(stor_kg_import(u, 6, b5.data, b5.len, &err) < 0 && strcmp(err.sqlstate, "22023") == 0,
       "import: a key of another group is 22023");
    ok(stor_kg_import(u, 5, b5.data, b5.len - 1, &err) < 0 && strcmp(err.sqlstate, "22023") == 0,
       "import: truncated is 22023");
    is_str(get(u, 5, "z"), "old", "import: nothing written after an error");
    ok(stor_kg_import(u, 5, b5.data, b5.len, &err) == 0, "import group 5");
    is_str(get(u, 5, "z"), "-", "import replaces the group's old entries");
    is_str(get(u, 5, "a"), "5a", "import: dirty entry carried");
    is_str(get(u, 5, "b"), "5b", "import: committed entry carried");
    is_str(groups(u, 512), "5", "import: only group 5 in the new table");

    /* Drop: group 5 goes, the others and the bookkeeping key stay. */
    ok(stor_kg_drop(t, 5, &err) == 0, "drop group 5");
    is_str(groups(t, 512), "0,1,300", "drop: group 5 gone");
    is_str(get(t, 300, "c"), "300c", "drop: other groups stay");
    const void *mv;
    size_t ml;
    ok(stor_table_get(t, "\xff\xff", 2, &mv, &ml, &err) == 1, "drop: keys outside groups stay");

    /* Durable through a checkpoint and a reopen. */
    ok(commit(env, 2, t) == 0 && commit(env, 3, u) == 0, "checkpoints 2 and 3");
    stor_table_close(t);
    stor_table_close(u);
    stor_close(env);
    if (stor_open(dir, NULL, &env, &err))
        return 1;
    stor_table_open(env, 10, &t, &err);
    stor_table_open(env, 11, &u, &err);
    is_str(groups(t, 512), "0,1,300", "reopen: the drop is durable");
    is_str(groups(u, 512), "5", "reopen: the import is durable");
    is_str(get(u, 5, "d"), "5d", "reopen: imported entry");

    /* The grouped handle: keys without prefix, merged in key order. */
    StorTable *g;
    put(t, 2, "b", "2b");
    put(t, 1, "d", "1d");
    ok(stor_table_open_grouped(t, 512, &g, &err) == 0, "open grouped");
    is_str(scan(g, "", NULL, NULL), "a b c d e", "grouped scan: every group's keys in key order");
    is_str(scan(g, "", "b", "e"), "b c d", "grouped scan with bounds");
    is_str(scan(g, "d", NULL, NULL), "d", "grouped scan with a prefix");
    const void *gv;
    size_t gl;
    ok(stor_table_get(g, "c", 1, &gv, &gl, &err) == 1 && gl == 4 && memcmp(gv, "300c", 4) == 0,
       "grouped get finds the key in its group");
    ok(stor_table_get(g, "q", 1, &gv, &gl, &err) == 0, "grouped get of a missing key");
    ok(stor_table_put(g, "x", 1, "y", 1, &err) < 0, "grouped handle is read-only");
    ok(stor_kg_drop(g, 1, &err) < 0, "drop through a grouped handle is refused");
    stor_table_close(g);

    /* Over a merged handle (a parallel view's instances). */
    StorTable *parts[2] = {t, u}, *m;
    ok(stor_table_open_merged(parts, 2, &m, &err) == 0 && stor_table_open_grouped(m, 512, &g, &err) == 0,
       "grouped over merged");
    is_str(scan(g, "", NULL, NULL), "a b c d e", "grouped merged scan: keys of both parts once, in order");
    ok(stor_table_get(g, "d", 1, &gv, &gl, &err) == 1, "grouped merged get");
    stor_table_close(g);
    stor_table_close(m);

    buf_free(&b5);
    buf_free(&b0);
    stor_table_close(t);
    stor_table_close(u);
    stor_close(env);
    nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
