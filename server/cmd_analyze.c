/*
 * cmd_analyze.c: ANALYZE LATENESS ON source, the statement.
 *
 * Checks the clauses (window, candidate bounds and lateness, target,
 * options), copies what it needs of the source's catalog entry, releases
 * the engine lock while runtime/lateness_analyze.c reads the source's log
 * and replays it (running views keep running; nothing of theirs is
 * touched), and answers with up to three result sets: the arrival delay
 * distribution, one row per candidate pair, and the recommended settings.
 * The figures come from the runtime's own window rules (window_rules.c),
 * see runtime/README.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "pgwire.h"
#include "pg_oids.h"
#include "weir_limits.h"

#define ANALYZE_MAX_ROWS_DEFAULT 10000000LL
#define ANALYZE_MAX_CANDIDATES 32
#define ANALYZE_MAX_WORK 2e10   /* (row, window) pairs judged over all candidates: minutes at most */

/* Defaults when BOUNDS / LATENESS are omitted (the source's own bound is added). */
static const int64_t DEFAULT_BOUNDS_S[] = {0, 1, 2, 5, 10, 30, 60};
static const int64_t DEFAULT_LATENESS_S[] = {0, 10, 60, 300};

/* A duration in the lists or in FOR: INTERVAL '2' SECOND, '2s', '2 seconds', 2s (unquoted). */
static int duration_of(const AstExpr *x, const char *what, int64_t *us, WError *err)
{
    Interval iv;
    const char *t = x->text ? x->text : "";
    char buf[256];
    bool ok = false;
    if (x->kind == AST_LITERAL && x->lit_kind == LIT_INTERVAL) {
        if (x->interval_unit && !strchr(x->interval_unit, ' '))
            snprintf(buf, sizeof buf, "%s %s", t, x->interval_unit);
        else
            snprintf(buf, sizeof buf, "%s", t);
        ok = !parse_interval(buf, strlen(buf), &iv);
    } else if (x->kind == AST_LITERAL && x->lit_kind == LIT_STRING) {
        ok = !parse_interval(t, strlen(t), &iv);
    } else if (x->kind == AST_LITERAL && x->lit_kind == LIT_INT && !strcmp(t, "0")) {
        memset(&iv, 0, sizeof iv);
        ok = true;
    }
    if (!ok)
        return werr(err, SQLSTATE_INVALID_PARAMETER, x->pos,
                    "%s must be intervals such as INTERVAL '2' SECOND, '2s' or 2s", what);
    if (iv.months || interval_to_usecs(&iv, us) || *us < 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, x->pos, "%s must be fixed intervals of zero or more", what);
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted, without duplicates; returns the new count. */
static int sort_unique(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!m || v[m - 1] != v[i])
            v[m++] = v[i];
    return m;
}

static int duration_list(AstList *l, int pos, const char *what, int64_t *out, int *n, WError *err)
{
    int len = ast_list_len(l);
    if (len > ANALYZE_MAX_CANDIDATES)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, pos, "at most %d %s", ANALYZE_MAX_CANDIDATES, what);
    for (int i = 0; i < len; i++)
        if (duration_of(AST_AT(l, i), what, &out[i], err))
            return -1;
    *n = sort_unique(out, len);
    return 0;
}

/* The window of FOR (default TUMBLE of 1 minute), checked as CREATE checks a window TVF. */
static int window_of(const AstAnalyze *a, RtWindowDef *w, WError *err)
{
    memset(w, 0, sizeof *w);
    if (!a->has_window) {
        w->kind = WIN_TUMBLE;
        w->size_us = w->slide_us = 60 * USECS_PER_SEC;
        return 0;
    }
    w->kind = a->win_kind;
    int64_t v[3] = {0, 0, 0};
    int n = ast_list_len(a->win_args);
    for (int i = 0; i < n && i < 3; i++)
        if (duration_of(AST_AT(a->win_args, i), "window sizes", &v[i], err))
            return -1;
    if (w->kind == WIN_TUMBLE || w->kind == WIN_SESSION) {
        w->size_us = w->slide_us = v[0]; /* SESSION: the gap */
        w->offset_us = v[1];
    } else {
        w->slide_us = v[0];
        w->size_us = v[1];
        w->offset_us = v[2];
    }
    if (w->size_us <= 0 || w->slide_us <= 0)
        return werr(err, SQLSTATE_INVALID_PARAMETER, a->win_pos, "window sizes must be positive");
    if (w->size_us % w->slide_us || w->size_us / w->slide_us > WEIR_MAX_WINDOWS_PER_ROW)
        return werr(err, SQLSTATE_INVALID_PARAMETER, a->win_pos,
                    "the window size must be a multiple of the slide (step), at most %d times it",
                    WEIR_MAX_WINDOWS_PER_ROW);
    return 0;
}

/* PARTITION BY: the source columns that key the sessions (SESSION only). */
static int partition_of(const AstAnalyze *a, const RtWindowDef *w, const CatRelation *src, int *cols, int *n,
                        WError *err)
{
    *n = 0;
    if (!a->partition)
        return 0;
    if (w->kind != WIN_SESSION)
        return werr(err, SQLSTATE_INVALID_PARAMETER, a->partition_pos,
                    "PARTITION BY goes with FOR SESSION (tumbling, hopping and cumulative windows do not depend on "
                    "the group keys)");
    int len = ast_list_len(a->partition);
    if (len > WEIR_MAX_KEY_COLUMNS)
        return werr(err, SQLSTATE_PROGRAM_LIMIT, a->partition_pos, "at most %d PARTITION BY columns", WEIR_MAX_KEY_COLUMNS);
    for (int i = 0; i < len; i++) {
        const AstExpr *x = AST_AT(a->partition, i);
        int k = -1;
        for (int c = 0; x->kind == AST_COLUMN && !x->qualifier && c < src->n_cols; c++)
            if (strcmp(src->col_names[c], x->text) == 0)
                k = c;
        if (k < 0)
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, x->pos, "PARTITION BY takes columns of source \"%s\"",
                        src->name);
        cols[(*n)++] = k;
    }
    return 0;
}

/* Statement settings from WITH (...). */
typedef struct AnalyzeOpts {
    int64_t max_rows;
    int64_t tail;               /* > 0: only the last `tail` records of each partition */
    bool report[3];             /* delays, candidates, recommendation */
} AnalyzeOpts;

static int options_of(const AstAnalyze *a, AnalyzeOpts *o, WError *err)
{
    o->max_rows = ANALYZE_MAX_ROWS_DEFAULT;
    o->tail = 0;
    o->report[0] = o->report[1] = o->report[2] = true;
    for (int i = 0; i < ast_list_len(a->options); i++) {
        const AstOption *op = AST_AT(a->options, i);
        if (!strcasecmp(op->key, "max_rows")) {
            char *end;
            long long v = strtoll(op->value, &end, 10);
            if (*end || v <= 0)
                return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "max_rows must be a positive integer");
            o->max_rows = v;
        } else if (!strcasecmp(op->key, "tail")) {
            char *end;
            long long v = strtoll(op->value, &end, 10);
            if (*end || v <= 0)
                return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos, "tail must be a positive integer");
            o->tail = v;
        } else if (!strcasecmp(op->key, "report")) {
            static const char *const names[3] = {"delays", "candidates", "recommendation"};
            int k = -1;
            for (int j = 0; j < 3; j++)
                if (!strcasecmp(op->value, names[j]))
                    k = j;
            if (k < 0 && strcasecmp(op->value, "all") != 0)
                return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos,
                            "report must be 'all', 'delays', 'candidates' or 'recommendation'");
            for (int j = 0; j < 3 && k >= 0; j++)
                o->report[j] = j == k;
        } else {
            return werr(err, SQLSTATE_INVALID_PARAMETER, op->pos,
                        "unrecognized ANALYZE LATENESS option \"%s\" (max_rows, tail, report)", op->key);
        }
    }
    return 0;
}

/* A copy of what the analysis reads of a source, so the engine lock can be released. */
static CatRelation *copy_source(Arena *ar, const CatRelation *r)
{
    CatRelation *c = arena_zalloc(ar, sizeof *c);
    c->id = r->id;
    c->kind = r->kind;
    c->name = arena_strdup(ar, r->name);
    c->n_cols = r->n_cols;
    c->col_names = arena_alloc(ar, sizeof(char *) * (size_t)(r->n_cols ? r->n_cols : 1));
    TypeId *types = arena_alloc(ar, sizeof(TypeId) * (size_t)(r->n_cols ? r->n_cols : 1));
    bool *nn = r->col_not_null ? arena_alloc(ar, sizeof(bool) * (size_t)(r->n_cols ? r->n_cols : 1)) : NULL;
    for (int i = 0; i < r->n_cols; i++) {
        c->col_names[i] = arena_strdup(ar, r->col_names[i]);
        types[i] = r->col_types[i];
        if (nn)
            nn[i] = r->col_not_null[i];
    }
    c->col_types = types;
    c->col_not_null = nn;
    if (r->col_typmod) {
        int32_t *tm = arena_alloc(ar, sizeof(int32_t) * (size_t)(r->n_cols ? r->n_cols : 1));
        memcpy(tm, r->col_typmod, sizeof(int32_t) * (size_t)r->n_cols);
        c->col_typmod = tm;
    }
    c->wm_col = r->wm_col;
    c->wm_delay_us = r->wm_delay_us;
    c->n_options = r->n_options;
    CatOption *opts = arena_alloc(ar, sizeof(CatOption) * (size_t)(r->n_options ? r->n_options : 1));
    for (int i = 0; i < r->n_options; i++) {
        opts[i].key = arena_strdup(ar, r->options[i].key);
        opts[i].value = arena_strdup(ar, r->options[i].value);
    }
    c->options = opts;
    c->format = r->format ? arena_strdup(ar, r->format) : NULL;
    c->encode = r->encode ? arena_strdup(ar, r->encode) : NULL;
    return c;
}

/* ---- output ------------------------------------------------------------------------------------- */

static const char *iv_text(Arena *ar, int64_t us)
{
    Interval iv = {0};
    iv.usecs = us;
    Buf b = BUF_INIT;
    format_interval(&iv, &b);
    const char *s = arena_strdup(ar, b.data ? b.data : "00:00:00");
    buf_free(&b);
    return s;
}

static const char *pct_text(Arena *ar, int64_t num, int64_t den)
{
    return den ? arena_printf(ar, "%.3f", 100.0 * (double)num / (double)den) : NULL;
}

static const char *i64_text(Arena *ar, int64_t v) { return arena_printf(ar, "%lld", (long long)v); }

static void columns_delays(SrvResult *out)
{
    static const char *const names[] = {"partition", "rows", "out_of_order", "p50", "p90", "p99", "p99_9", "max"};
    static const uint32_t oids[] = {PG_OID_TEXT, PG_OID_INT8, PG_OID_INT8, PG_OID_INTERVAL, PG_OID_INTERVAL, PG_OID_INTERVAL,
                                    PG_OID_INTERVAL, PG_OID_INTERVAL};
    srv_result_columns(out, 8, names, oids);
}

static int emit_delays(SrvResult *out, Arena *ar, const RtDelayStats *d, int n)
{
    columns_delays(out);
    for (int i = 0; i < n; i++) {
        const char *v[8] = {d[i].partition < 0 ? "all" : i64_text(ar, d[i].partition), i64_text(ar, d[i].rows),
                            i64_text(ar, d[i].out_of_order), iv_text(ar, d[i].p50_us), iv_text(ar, d[i].p90_us),
                            iv_text(ar, d[i].p99_us), iv_text(ar, d[i].p999_us), iv_text(ar, d[i].max_us)};
        if (srv_result_row(out, v, NULL))
            return -1;
    }
    srv_result_complete(out, arena_printf(ar, "ANALYZE %d", n));
    return 0;
}

static bool first_meets(const RtLatenessResult *r, double target)
{
    return r->pairs && 100.0 * (double)r->on_time / (double)r->pairs >= target;
}

static bool final_meets(const RtLatenessResult *r, double target)
{
    return r->pairs && 100.0 * (double)(r->pairs - r->dropped) / (double)r->pairs >= target;
}

static const char *wait_text(Arena *ar, const RtLatenessResult *r)
{
    return r->fired ? iv_text(ar, r->wait_sum_us / r->fired) : NULL;
}

static void columns_candidates(SrvResult *out)
{
    static const char *const names[] = {"bound", "lateness", "rows", "first_result_pct", "late_updates", "dropped",
                                        "windows", "exact_windows", "exact_windows_pct", "mean_wait",
                                        "fired_at_end", "max_open_windows", "meets_target"};
    static const uint32_t oids[] = {PG_OID_INTERVAL, PG_OID_INTERVAL, PG_OID_INT8, PG_OID_NUMERIC, PG_OID_INT8, PG_OID_INT8, PG_OID_INT8,
                                    PG_OID_INT8, PG_OID_NUMERIC, PG_OID_INTERVAL, PG_OID_INT8, PG_OID_INT8, PG_OID_BOOL};
    srv_result_columns(out, 13, names, oids);
}

static int emit_candidates(SrvResult *out, Arena *ar, const RtLatenessResult *res, int n, double target)
{
    columns_candidates(out);
    for (int i = 0; i < n; i++) {
        const RtLatenessResult *r = &res[i];
        const char *v[13] = {iv_text(ar, r->bound_us), iv_text(ar, r->lateness_us), i64_text(ar, r->pairs),
                             pct_text(ar, r->on_time, r->pairs), i64_text(ar, r->late_updates),
                             i64_text(ar, r->dropped), i64_text(ar, r->windows), i64_text(ar, r->exact_windows),
                             pct_text(ar, r->exact_windows, r->windows), wait_text(ar, r),
                             i64_text(ar, r->fired_at_end), i64_text(ar, r->max_open),
                             first_meets(r, target) ? "t" : "f"};
        if (srv_result_row(out, v, NULL))
            return -1;
    }
    srv_result_complete(out, arena_printf(ar, "ANALYZE %d", n));
    return 0;
}

/* The candidate a strategy picks: the smallest bound, then the smallest
 * lateness, among those that meet the target; if none does, the most
 * complete one (then the smallest bound and lateness). Results are
 * bound-major with both lists sorted, so the first hit in order is it. */
static int pick(const RtLatenessResult *res, int n, double target, bool final, bool *met)
{
    for (int i = 0; i < n; i++)
        if (final ? final_meets(&res[i], target) : first_meets(&res[i], target)) {
            *met = true;
            return i;
        }
    *met = false;
    int best = -1;
    double bv = -1;
    for (int i = 0; i < n; i++) {
        const RtLatenessResult *r = &res[i];
        if (!r->pairs)
            continue;
        double v = 100.0 * (double)(final ? r->pairs - r->dropped : r->on_time) / (double)r->pairs;
        if (v > bv) {
            bv = v;
            best = i;
        }
    }
    return best;
}

static void columns_recommendation(SrvResult *out)
{
    static const char *const names[] = {"strategy", "bound", "lateness", "first_result_pct", "final_pct",
                                        "late_updates", "dropped", "mean_wait", "max_open_windows", "meets_target",
                                        "records_read", "skipped_records", "complete"};
    static const uint32_t oids[] = {PG_OID_TEXT, PG_OID_INTERVAL, PG_OID_INTERVAL, PG_OID_NUMERIC, PG_OID_NUMERIC, PG_OID_INT8,
                                    PG_OID_INT8, PG_OID_INTERVAL, PG_OID_INT8, PG_OID_BOOL, PG_OID_INT8, PG_OID_INT8, PG_OID_BOOL};
    srv_result_columns(out, 13, names, oids);
}

static int emit_recommendation(SrvResult *out, Arena *ar, const RtLatenessResult *res, int n, double target,
                               const RtLatenessLog *log)
{
    columns_recommendation(out);
    int rows = 0;
    for (int s = 0; s < 2; s++) {
        bool met;
        int i = pick(res, n, target, s == 1, &met);
        if (i < 0)
            continue;
        const RtLatenessResult *r = &res[i];
        const char *v[13] = {s ? "final result" : "first result", iv_text(ar, r->bound_us),
                             iv_text(ar, r->lateness_us), pct_text(ar, r->on_time, r->pairs),
                             pct_text(ar, r->pairs - r->dropped, r->pairs), i64_text(ar, r->late_updates),
                             i64_text(ar, r->dropped), wait_text(ar, r), i64_text(ar, r->max_open),
                             met ? "t" : "f", i64_text(ar, log->records),
                             i64_text(ar, log->bad_records + log->rejected), log->truncated ? "f" : "t"};
        if (srv_result_row(out, v, NULL))
            return -1;
        rows++;
    }
    srv_result_complete(out, arena_printf(ar, "ANALYZE %d", rows));
    return 0;
}

static bool cancelled(void *out) { return srv_result_cancelled(out); }

int srv_analyze_lateness(Engine *e, const AstStmt *st, bool describe_only, SrvResult *out, WError *err)
{
    const AstAnalyze *a = st->u.analyze;
    CatObj *o = cat_find(e->cat, a->source);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "source \"%s\" does not exist", a->source);
    if (o->kind != CAT_SOURCE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "\"%s\" is not a source", a->source);
    if (o->rel.encode && !strcasecmp(o->rel.encode, "avro"))
        /* The analysis reads the topic with the JSON decoder (runtime/lateness_analyze.c). */
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: ANALYZE LATENESS of Avro source \"%s\"",
                    a->source),
               werr_hint(err, "It reads JSON sources only, for now."), -1;
    RtWindowDef w;
    AnalyzeOpts opts;
    int64_t bounds[ANALYZE_MAX_CANDIDATES + 8], lateness[ANALYZE_MAX_CANDIDATES + 8];
    int nb = 0, nl = 0;
    double target = 99.9;
    int key_cols[WEIR_MAX_KEY_COLUMNS], n_key_cols = 0;
    if (window_of(a, &w, err) || options_of(a, &opts, err) || partition_of(a, &w, &o->rel, key_cols, &n_key_cols, err))
        return -1;
    if (a->bounds) {
        if (duration_list(a->bounds, a->bounds_pos, "BOUNDS", bounds, &nb, err))
            return -1;
    } else {
        for (size_t i = 0; i < sizeof DEFAULT_BOUNDS_S / sizeof DEFAULT_BOUNDS_S[0]; i++)
            bounds[nb++] = DEFAULT_BOUNDS_S[i] * USECS_PER_SEC;
        if (o->rel.wm_delay_us >= 0)
            bounds[nb++] = o->rel.wm_delay_us; /* the source's own WATERMARK bound */
        nb = sort_unique(bounds, nb);
    }
    if (a->lateness) {
        if (duration_list(a->lateness, a->lateness_pos, "LATENESS", lateness, &nl, err))
            return -1;
    } else {
        for (size_t i = 0; i < sizeof DEFAULT_LATENESS_S / sizeof DEFAULT_LATENESS_S[0]; i++)
            lateness[nl++] = DEFAULT_LATENESS_S[i] * USECS_PER_SEC;
    }
    if (a->target) {
        char *end;
        target = strtod(a->target, &end);
        if (*end || !(target > 0 && target <= 100))
            return werr(err, SQLSTATE_INVALID_PARAMETER, a->target_pos, "TARGET must be a percentage in (0, 100]");
    }

    if (o->rel.wm_col >= 0 && !cat_col_in_value(&o->rel, o->rel.wm_col))
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                    "feature not supported: ANALYZE LATENESS of a source whose event time is a computed column or "
                    "an INCLUDE column");
    if (describe_only) {
        /* The extended protocol describes one result set: the first one asked for. */
        if (opts.report[0])
            columns_delays(out);
        else if (opts.report[1])
            columns_candidates(out);
        else
            columns_recommendation(out);
        return 0;
    }
    Arena *ar = arena_new(0);
    CatRelation *src = copy_source(ar, &o->rel);
    RtEnv env = e->rt;
    RtLatenessLog log;
    /* The log is read without the engine lock: views keep running meanwhile. */
    pthread_mutex_unlock(&e->lock);
    int rc = rt_lateness_read_log(&env, src, n_key_cols, key_cols, opts.tail, opts.max_rows, cancelled, out, &log, err);
    RtDelayStats *delays = NULL;
    RtLatenessResult *res = NULL;
    /* The replays cost rows x windows per row x candidates: refuse what would run for hours. */
    double work = rc ? 0 : (double)log.n_rows * (double)(w.size_us / w.slide_us) * nb * nl;
    if (!rc && work > ANALYZE_MAX_WORK)
        rc = werr(err, SQLSTATE_PROGRAM_LIMIT, st->pos,
                  "ANALYZE LATENESS would judge %.0f (row, window) pairs: lower max_rows, the number of candidates "
                  "or size / slide (at most %.0f)", work, (double)ANALYZE_MAX_WORK);
    if (!rc) {
        delays = xcalloc((size_t)log.n_parts + 1, sizeof *delays);
        res = xcalloc((size_t)(nb * nl), sizeof *res);
        if (rt_lateness_simulate(&log, &w, nb, bounds, nl, lateness, delays, res, cancelled, out))
            rc = werr(err, SQLSTATE_QUERY_CANCELED, 0, "canceling statement due to user request");
    }
    pthread_mutex_lock(&e->lock);
    if (rc) {
        rt_lateness_log_fini(&log);
        goto done;
    }
    if (log.truncated) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "ANALYZE LATENESS stopped after %lld records (max_rows): the figures cover those records only",
                 (long long)log.records);
        srv_result_notice(out, msg);
    }
    if ((opts.report[0] && emit_delays(out, ar, delays, log.n_parts + 1)) ||
        (opts.report[1] && emit_candidates(out, ar, res, nb * nl, target)) ||
        (opts.report[2] && emit_recommendation(out, ar, res, nb * nl, target, &log)))
        rc = werr(err, SQLSTATE_CONNECTION_FAILURE, 0, "the client went away");
    rt_lateness_log_fini(&log);
done:
    free(delays);
    free(res);
    arena_free(ar);
    return rc;
}
