/*
 * test_catalog_api.c: the catalog's list and entry format (catalog.h):
 * lookup, iteration by kind, removal of the current object (and of objects
 * after it) during an iteration, freeing with sinks first, and an entry
 * encoded then decoded. TAP.
 */
#include "catalog.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CatObj *obj(CatKind kind, const char *name)
{
    CatObj *o = xcalloc(1, sizeof *o);
    o->kind = kind;
    o->name = xstrdup(name);
    o->sql = xstrdup("");
    return o;
}

/* The names the iteration visits, space-separated. */
static void names(Catalog *c, unsigned kinds, char *out, size_t n)
{
    out[0] = 0;
    CAT_FOREACH(c, kinds, o)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? " " : "", o->name);
}

int main(void)
{
    Catalog *c = cat_new();
    CatObj *src = obj(CAT_SOURCE, "s");
    CatObj *v1 = obj(CAT_VIEW, "v1");
    CatObj *t = obj(CAT_TABLE, "t");
    CatObj *k1 = obj(CAT_SINK, "k1");
    CatObj *v2 = obj(CAT_VIEW, "v2");
    CatObj *late = obj(CAT_VIEW, "v2_late");
    late->view.late_of = v2;
    CatObj *k2 = obj(CAT_SINK, "k2");
    k1->sink.from = v1;
    k2->sink.from = v2;
    CatObj *all[] = {src, v1, t, k1, v2, late, k2};
    for (int i = 0; i < 7; i++)
        cat_insert(c, all[i]);
    char buf[256];

    is_int(cat_count(c), 7, "seven objects");
    ok(cat_find(c, "t") == t, "cat_find finds a table");
    ok(cat_find(c, "nope") == NULL, "cat_find: NULL for an unknown name");
    names(c, CAT_ANY, buf, sizeof buf);
    is_str(buf, "s v1 t k1 v2 v2_late k2", "CAT_ANY: creation order");
    names(c, CAT_KINDS(CAT_VIEW), buf, sizeof buf);
    is_str(buf, "v1 v2 v2_late", "CAT_KINDS(CAT_VIEW)");
    names(c, CAT_FLOWS, buf, sizeof buf);
    is_str(buf, "v1 t v2 v2_late", "CAT_FLOWS: views and tables");
    names(c, CAT_KINDS(CAT_SINK) | CAT_KINDS(CAT_SOURCE), buf, sizeof buf);
    is_str(buf, "s k1 k2", "two kinds");

    /* break leaves the loop, as in a plain for. */
    CatObj *first_view = NULL;
    CAT_FOREACH(c, CAT_KINDS(CAT_VIEW), o) {
        first_view = o;
        break;
    }
    ok(first_view == v1, "break stops at the first match");

    /* Removing the current object, and a view with its late-rows relation
     * (after it), while iterating: nothing is skipped or visited twice. */
    char seen[256] = "";
    CAT_FOREACH(c, CAT_ANY, o) {
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s", seen[0] ? " " : "", o->name);
        if (o == k1 || o == v2) {
            CatObj *l = o == v2 ? late : NULL;
            cat_unlink(c, o);
            cat_obj_free(o);
            if (l) {
                cat_unlink(c, l);
                cat_obj_free(l);
            }
        }
    }
    is_str(seen, "s v1 t k1 v2 k2", "removal during iteration: each object once");
    names(c, CAT_ANY, buf, sizeof buf);
    is_str(buf, "s v1 t k2", "the removed objects are gone");
    is_int(cat_count(c), 4, "four left");

    /* An entry encoded, then decoded. */
    uint64_t ids[3] = {7, 9, 12};
    CatObj *e = obj(CAT_VIEW, "ev");
    free(e->sql);
    e->sql = xstrdup("CREATE MATERIALIZED VIEW ev AS SELECT 1");
    e->id = 42;
    e->n_table_ids = 3;
    e->table_ids = xmalloc(sizeof ids);
    memcpy(e->table_ids, ids, sizeof ids);
    e->view.parallelism = 4;
    e->view.plan_rev = 2;
    Buf b = BUF_INIT;
    cat_entry_body(e, &b);
    CatEntry ce;
    WError err = {0};
    int rc = cat_entry_decode(42, b.data, b.len, &ce, &err);
    ok(rc == 0 && ce.obj, "an entry decodes");
    if (ce.obj) {
        CatObj *d = ce.obj;
        ok(d->id == 42 && d->kind == CAT_VIEW && !strcmp(d->name, "ev") && !strcmp(d->sql, e->sql),
           "id, kind, name and statement");
        ok(d->n_table_ids == 3 && !memcmp(d->table_ids, ids, sizeof ids), "state table ids, in order");
        ok(d->view.parallelism == 4 && d->view.plan_rev == 2 && d->tz == NULL, "parallelism, revision, UTC");
        cat_obj_free(d);
    }
    /* A truncated body is corrupt: XX000, nothing returned. */
    rc = cat_entry_decode(42, b.data, b.len - 1, &ce, &err);
    ok(rc < 0 && !strcmp(err.sqlstate, SQLSTATE_INTERNAL) && !ce.obj, "a truncated entry: XX000");
    buf_free(&b);
    cat_obj_free(e);

    /* cat_free frees what is left, sinks first (valgrind/ASan builds check the memory). */
    cat_free(c);
    cat_free(NULL);
    ok(1, "cat_free");
    return tap_done();
}
