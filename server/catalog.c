/*
 * catalog.c: the list of catalog objects and the format of their entries
 * (catalog.h).
 *
 * The list is an array in creation order: creation order is replay order
 * (a view is planned after the objects it reads), and catalogs are small
 * (tens to hundreds of objects), so lookups by name are a linear scan.
 */
#include "catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "row.h"
#include "tz.h"
#include "arena.h"
#include "log.h"

struct Catalog {
    int n_objs, cap_objs;
    CatObj **objs;            /* creation order */
};

Catalog *cat_new(void) { return xcalloc(1, sizeof(Catalog)); }

void cat_obj_free(CatObj *o)
{
    if (!o)
        return;
    if (o->sink.rt && o->sink.from && o->sink.from->flow.df)
        rt_dataflow_detach_sink(o->sink.from->flow.df, o->sink.rt);
    o->sink.rt = NULL;
    rt_dataflow_close(o->flow.df);
    free(o->name);
    for (int i = 0; i < o->n_old_names; i++)
        free(o->old_names[i]);
    free(o->old_names);
    free(o->sql);
    free(o->table_ids);
    free(o->flow.skips);
    free(o->source.alter_sql);
    arena_free(o->arena);
    free(o);
}

void cat_free(Catalog *c)
{
    if (!c)
        return;
    for (int pass = 0; pass < 2; pass++)
        for (int i = c->n_objs - 1; i >= 0; i--)
            if (c->objs[i] && (pass == 1 || c->objs[i]->kind == CAT_SINK)) {
                cat_obj_free(c->objs[i]);
                c->objs[i] = NULL;
            }
    free(c->objs);
    free(c);
}

int cat_count(const Catalog *c) { return c->n_objs; }

CatObj *cat_find(const Catalog *c, const char *name)
{
    for (int i = 0; i < c->n_objs; i++)
        if (strcmp(c->objs[i]->name, name) == 0)
            return c->objs[i];
    return NULL;
}

void cat_insert(Catalog *c, CatObj *o)
{
    if (c->n_objs == c->cap_objs) {
        c->cap_objs = c->cap_objs ? c->cap_objs * 2 : 16;
        c->objs = xrealloc(c->objs, sizeof(CatObj *) * (size_t)c->cap_objs);
    }
    c->objs[c->n_objs++] = o;
}

void cat_unlink(Catalog *c, CatObj *o)
{
    for (int i = 0; i < c->n_objs; i++)
        if (c->objs[i] == o) {
            memmove(&c->objs[i], &c->objs[i + 1], sizeof(CatObj *) * (size_t)(c->n_objs - i - 1));
            c->n_objs--;
            return;
        }
}

CatIter cat_iter(const Catalog *c, unsigned kinds) { return (CatIter){.cat = c, .kinds = kinds, .more = true}; }

CatObj *cat_iter_next(CatIter *it)
{
    const Catalog *c = it->cat;
    /* The loop removed the object it was on: the next one moved into its slot. */
    if (it->cur && (it->next > c->n_objs || c->objs[it->next - 1] != it->cur))
        it->next--;
    while (it->next < c->n_objs) {
        CatObj *o = c->objs[it->next++];
        if (it->kinds & CAT_KINDS(o->kind)) {
            it->cur = o;
            return o;
        }
    }
    it->cur = NULL;
    return NULL;
}

/* ---- catalog entries ---- */

void cat_entry_body(const CatObj *o, Buf *b)
{
    /* After the ids, optional trailing values told apart by their type, so
     * entries written before any existed still read: a bigint is the
     * streaming_parallelism (when > 1), a text the time zone (when not UTC),
     * an integer the planner revision of a view (when not 0, planner.h).
     * With a revision all three are written, NULL where there is nothing to
     * say: a weir from before revisions reads at most two and refuses the
     * entry (corrupt), where it would take a lone revision for a parallelism
     * and plan the view by older rules over state its plan did not write. */
    bool rev = o->view.plan_rev > 0;
    int n = 4 + o->n_table_ids + (rev ? 3 : (o->view.parallelism > 1) + (o->tz != NULL));
    Value *vals = xcalloc((size_t)n, sizeof(Value));
    vals[0] = value_int(TYPE_INT8, o->kind);
    vals[1] = value_str(TYPE_TEXT, o->name, strlen(o->name));
    vals[2] = value_str(TYPE_TEXT, o->sql, strlen(o->sql));
    vals[3] = value_int(TYPE_INT8, o->n_table_ids);
    for (int i = 0; i < o->n_table_ids; i++)
        vals[4 + i] = value_int(TYPE_INT8, (int64_t)o->table_ids[i]);
    int k = 4 + o->n_table_ids;
    if (o->view.parallelism > 1)
        vals[k++] = value_int(TYPE_INT8, o->view.parallelism);
    else if (rev)
        vals[k++] = value_null(TYPE_INT8);
    if (o->tz)
        vals[k++] = value_str(TYPE_TEXT, tz_name(o->tz), strlen(tz_name(o->tz)));
    else if (rev)
        vals[k++] = value_null(TYPE_TEXT);
    if (rev)
        vals[k++] = value_int(TYPE_INT4, o->view.plan_rev);
    row_encode(b, vals, n);
    free(vals);
}

int cat_entry_put(StorEnv *stor, const CatObj *o, WError *err)
{
    Buf b = BUF_INIT;
    cat_entry_body(o, &b);
    StorCatalogEntry ce = {.id = o->id, .kind = o->kind, .name = o->name, .body = b.data, .body_len = b.len};
    int rc = stor_catalog_put(stor, &ce, err);
    buf_free(&b);
    return rc;
}

int cat_entry_decode(uint64_t id, const void *body, size_t len, CatEntry *out, WError *err)
{
    *out = (CatEntry){0};
    Value head[4];
    size_t used;
    if (row_decode_prefix(body, len, head, 4, &used) || head[0].null || head[3].null || head[3].u.i < 0 ||
        head[3].u.i > 100000)
        return werr(err, SQLSTATE_INTERNAL, 0, "corrupt catalog entry %llu", (unsigned long long)id);
    int nids = (int)head[3].u.i;
    Value *vals = xcalloc((size_t)(nids + 7), sizeof(Value));
    /* The ids, then up to three optional values (cat_entry_body): a bigint
     * streaming_parallelism, a text time zone, an integer planner revision. */
    size_t used_ids = 0;
    int n_extra = 0;
    bool bad = row_decode_prefix(body, len, vals, nids + 4, &used_ids) != 0;
    while (!bad && used_ids < len && n_extra < 3) {
        size_t u = 0;
        bad = row_decode_prefix((const char *)body + used_ids, len - used_ids, &vals[nids + 4 + n_extra], 1, &u) != 0;
        used_ids += u;
        n_extra++;
    }
    if (bad || used_ids != len) {
        free(vals);
        return werr(err, SQLSTATE_INTERNAL, 0, "corrupt catalog entry %llu", (unsigned long long)id);
    }
    if (vals[0].u.i == CATALOG_KIND_USER) {
        out->user_name = xstrndup(vals[1].u.s.p, vals[1].u.s.len);
        out->user_verifier = vals[2].null ? NULL : xstrndup(vals[2].u.s.p, vals[2].u.s.len);
        free(vals);
        return 0;
    }
    CatObj *o = xcalloc(1, sizeof *o);
    o->id = id;
    o->kind = (CatKind)vals[0].u.i;
    o->name = xstrndup(vals[1].u.s.p, vals[1].u.s.len);
    o->sql = xstrndup(vals[2].u.s.p, vals[2].u.s.len);
    o->view.parallelism = 1;
    const Value *zone = NULL;
    for (int x = 0; x < n_extra; x++) {
        const Value *v = &vals[nids + 4 + x];
        if (v->null)
            continue;
        if (v->type == TYPE_TEXT)
            zone = v;
        else if (v->type == TYPE_INT4)
            o->view.plan_rev = (int)v->u.i;
        else if (v->u.i >= 1 && v->u.i <= PLAN_MAX_PARALLELISM)
            o->view.parallelism = (int)v->u.i;
    }
    o->n_table_ids = nids;
    o->table_ids = xcalloc((size_t)(nids ? nids : 1), sizeof(uint64_t));
    for (int k = 0; k < nids; k++)
        o->table_ids[k] = (uint64_t)vals[4 + k].u.i;
    if (zone) {
        char *zn = xstrndup(zone->u.s.p, zone->u.s.len);
        WError zerr = {0};
        if (tz_find(zn, &o->tz, &zerr))
            wlog_warn("catalog", "%s was created in time zone %s, which this system does not know: using UTC",
                    o->name, zn);
        free(zn);
    }
    free(vals);
    out->obj = o;
    return 0;
}
