/*
 * test_nexmark.c: the Nexmark generator (op_nexmark.c): determinism, the
 * id % 50 mix of event kinds, field ranges and skew, exact continuation
 * from a saved event number, the bounded end, and option/column checks.
 *
 * `test_nexmark --bench N` instead prints how fast the generator alone
 * fills bid chunks (used by bench/nexmark/run.sh; never a timed test).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nexmark.h"
#include "tap.h"

static const char *const BID_COLS[] = {"auction", "bidder", "price", "channel", "url", "date_time", "extra"};
static const TypeId BID_TYPES[] = {TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_TEXT, TYPE_TEXT, TYPE_TIMESTAMP, TYPE_TEXT};
static const char *const AUCTION_COLS[] = {"id", "item_name", "description", "initial_bid", "reserve",
                                           "date_time", "expires", "seller", "category", "extra"};
static const TypeId AUCTION_TYPES[] = {TYPE_INT8, TYPE_TEXT, TYPE_TEXT, TYPE_INT8, TYPE_INT8,
                                       TYPE_TIMESTAMP, TYPE_TIMESTAMP, TYPE_INT8, TYPE_INT8, TYPE_TEXT};
static const char *const PERSON_COLS[] = {"id", "name", "email_address", "credit_card", "city", "state", "date_time", "extra"};
static const TypeId PERSON_TYPES[] = {TYPE_INT8, TYPE_TEXT, TYPE_TEXT, TYPE_TEXT, TYPE_TEXT, TYPE_TEXT, TYPE_TIMESTAMP, TYPE_TEXT};

/* A source relation with the given columns and options (key, value pairs, NULL-ended). */
static CatRelation relation(int n, const char *const *names, const TypeId *types, const char *const *kv)
{
    static CatOption opts[16];
    int k = 0;
    for (; kv[2 * k]; k++)
        opts[k] = (CatOption){kv[2 * k], kv[2 * k + 1]};
    return (CatRelation){.kind = CAT_SOURCE, .name = "s", .n_cols = n, .col_names = (const char **)names,
                         .col_types = types, .n_options = k, .options = opts, .wm_col = -1};
}

typedef struct Gen {
    RtNxConfig cfg;
    RtNxGen *g;
    int n_cols;
    const TypeId *types;
} Gen;

static Gen gen_open(RtNxTable t, uint64_t seed, int64_t rate)
{
    const char *type = t == RT_NX_BID ? "bid" : t == RT_NX_AUCTION ? "auction" : "person";
    char seedbuf[32], ratebuf[32];
    snprintf(seedbuf, sizeof seedbuf, "%llu", (unsigned long long)seed);
    snprintf(ratebuf, sizeof ratebuf, "%lld", (long long)rate);
    const char *kv[] = {"connector", "nexmark", "nexmark.table.type", type, "nexmark.seed", seedbuf,
                        "nexmark.events.per.second", ratebuf, NULL};
    CatRelation r = t == RT_NX_BID       ? relation(7, BID_COLS, BID_TYPES, kv)
                    : t == RT_NX_AUCTION ? relation(10, AUCTION_COLS, AUCTION_TYPES, kv)
                                         : relation(8, PERSON_COLS, PERSON_TYPES, kv);
    Gen g = {.n_cols = r.n_cols, .types = r.col_types};
    int fields[16];
    WError err = {0};
    if (rt_nexmark_config(&r, &g.cfg, fields, &err))
        diag("config: %s", err.msg);
    g.g = rt_nexmark_gen_new(&g.cfg, g.cfg.base_time_ms, r.n_cols, fields);
    return g;
}

/* Generates every row of events [from, to) into one chunk of arena a. */
static Chunk *gen_range(Gen *g, Arena *a, int64_t from, int64_t to, int chunk_rows, int64_t *next_out)
{
    Chunk *all = chunk_new(a, g->n_cols, g->types, (int)(to - from) + 1);
    int64_t next = from;
    while (next < to) {
        Chunk *c = chunk_new(a, g->n_cols, g->types, chunk_rows);
        rt_nexmark_gen_fill(g->g, &next, to, c);
        for (int r = 0; r < c->n_rows; r++)
            chunk_append_from(all, c, r);
    }
    if (next_out)
        *next_out = next;
    return all;
}

static bool same_chunks(const Chunk *a, const Chunk *b)
{
    if (a->n_rows != b->n_rows || a->n_cols != b->n_cols)
        return false;
    for (int r = 0; r < a->n_rows; r++)
        for (int c = 0; c < a->n_cols; c++) {
            Value x, y;
            chunk_get(a, c, r, &x);
            chunk_get(b, c, r, &y);
            if (x.null != y.null || (!x.null && !value_eq(&x, &y)))
                return false;
        }
    return true;
}

static int64_t geti(const Chunk *c, int col, int row) { return c->cols[col].v.i[row]; }
static StrRef gets(const Chunk *c, int col, int row) { return c->cols[col].v.s[row]; }

static void test_determinism(void)
{
    Arena *a = arena_new(0);
    Gen g1 = gen_open(RT_NX_BID, 7, 10000), g2 = gen_open(RT_NX_BID, 7, 10000), g3 = gen_open(RT_NX_BID, 8, 10000);
    Chunk *c1 = gen_range(&g1, a, 0, 20000, 1024, NULL);
    Chunk *c2 = gen_range(&g2, a, 0, 20000, 333, NULL);
    Chunk *c3 = gen_range(&g3, a, 0, 20000, 1024, NULL);
    ok(same_chunks(c1, c2), "same seed, same bids (whatever the chunk size)");
    ok(!same_chunks(c1, c3), "another seed, other bids");
    /* Declaring fewer columns changes none of the others. */
    const char *kv[] = {"connector", "nexmark", "nexmark.table.type", "bid", "nexmark.seed", "7", NULL};
    const char *names[] = {"price", "auction"};
    TypeId types[] = {TYPE_INT8, TYPE_INT8};
    CatRelation r = relation(2, names, types, kv);
    RtNxConfig cfg;
    int fields[2];
    WError err = {0};
    ok(rt_nexmark_config(&r, &cfg, fields, &err) == 0, "two of the bid columns, in another order");
    Gen g4 = {.cfg = cfg, .g = rt_nexmark_gen_new(&cfg, cfg.base_time_ms, 2, fields), .n_cols = 2, .types = types};
    Chunk *c4 = gen_range(&g4, a, 0, 20000, 1024, NULL);
    bool same = c4->n_rows == c1->n_rows;
    for (int i = 0; same && i < c4->n_rows; i++)
        same = geti(c4, 0, i) == geti(c1, 2, i) && geti(c4, 1, i) == geti(c1, 0, i);
    ok(same, "a projection of the columns sees the same values");
    rt_nexmark_gen_free(g1.g);
    rt_nexmark_gen_free(g2.g);
    rt_nexmark_gen_free(g3.g);
    rt_nexmark_gen_free(g4.g);
    arena_free(a);
}

static void test_distribution(void)
{
    Arena *a = arena_new(0);
    Gen p = gen_open(RT_NX_PERSON, 0, 10000), au = gen_open(RT_NX_AUCTION, 0, 10000), b = gen_open(RT_NX_BID, 0, 10000);
    Chunk *cp = gen_range(&p, a, 0, 50000, 1024, NULL);
    Chunk *ca = gen_range(&au, a, 0, 50000, 1024, NULL);
    Chunk *cb = gen_range(&b, a, 0, 50000, 1024, NULL);
    is_int(cp->n_rows, 1000, "2% persons (n % 50 == 0)");
    is_int(ca->n_rows, 3000, "6% auctions (n % 50 in 1..3)");
    is_int(cb->n_rows, 46000, "92% bids");
    bool seq = true;
    for (int i = 0; i < cp->n_rows && seq; i++)
        seq = geti(cp, 0, i) == 1000 + i;
    for (int i = 0; i < ca->n_rows && seq; i++)
        seq = geti(ca, 0, i) == 1000 + i;
    ok(seq, "person and auction ids count up from 1000");
    /* event times: base + floor(n * 1000 / rate) ms; person i is event 50 i */
    is_int(geti(cp, 6, 7), (RT_NX_DEFAULT_BASE_MS + 350 * 1000 / 10000) * 1000, "event time from the rate");
    is_int(geti(cb, 5, 0), RT_NX_DEFAULT_BASE_MS * 1000, "event 4 is the first bid, at base time");
    rt_nexmark_gen_free(p.g);
    rt_nexmark_gen_free(au.g);
    rt_nexmark_gen_free(b.g);
    arena_free(a);
}

static void test_ranges(void)
{
    Arena *a = arena_new(0);
    Gen b = gen_open(RT_NX_BID, 3, 10000);
    int64_t events = 200000;
    Chunk *cb = gen_range(&b, a, 0, events, 1024, NULL);
    bool price_ok = true, ids_ok = true, url_ok = true, time_mono = true;
    long hot_auction = 0, hot_bidder = 0, hot_channel = 0, low_price = 0;
    double extra_sum = 0;
    int64_t max_person = 1000 + events / 50 + 10, max_auction = 1000 + events / 50 * 3 + 10;
    for (int i = 0; i < cb->n_rows; i++) {
        int64_t price = geti(cb, 2, i);
        price_ok &= price >= 100 && price <= 100000000;
        low_price += price < 10000; /* log-uniform: a third below 10^4 */
        ids_ok &= geti(cb, 0, i) >= 1000 && geti(cb, 0, i) <= max_auction && geti(cb, 1, i) >= 1000 &&
                  geti(cb, 1, i) <= max_person;
        hot_auction += geti(cb, 0, i) % 2 == 0;
        hot_bidder += (geti(cb, 1, i) - 1000) % 4 == 1;
        StrRef ch = gets(cb, 3, i), url = gets(cb, 4, i);
        bool hot = ch.len < 9 || memcmp(ch.p, "channel-", 8) != 0;
        hot_channel += hot;
        url_ok &= url.len > 40 && memcmp(url.p, "https://www.nexmark.com/", 24) == 0;
        extra_sum += gets(cb, 6, i).len;
        if (i)
            time_mono &= geti(cb, 5, i) >= geti(cb, 5, i - 1);
    }
    double n = cb->n_rows;
    ok(price_ok, "bid prices within 100 .. 10^8");
    ok(fabs(low_price / n - 1.0 / 3) < 0.02, "prices are log-uniform");
    ok(ids_ok, "bids refer to auctions and persons that exist (or are about to)");
    diag("hot auction %.3f, hot bidder %.3f, hot channel %.3f, extra avg %.1f", hot_auction / n, hot_bidder / n,
         hot_channel / n, extra_sum / n);
    ok(hot_auction / n > 0.5 && hot_auction / n < 0.8, "about half the bids go to the hot auction");
    ok(hot_bidder / n > 0.7 && hot_bidder / n < 0.85, "about 3/4 of the bids come from hot bidders");
    ok(fabs(hot_channel / n - 0.5) < 0.02, "half the bids on the 4 hot channels");
    ok(url_ok, "urls are https://www.nexmark.com/...");
    ok(fabs(extra_sum / n + 32 - 100) < 2, "bids average 100 bytes");
    ok(time_mono, "event times never go back");

    Gen au = gen_open(RT_NX_AUCTION, 3, 10000);
    Chunk *ca = gen_range(&au, a, 0, events, 1024, NULL);
    bool cat_ok = true, reserve_ok = true, expires_ok = true, seller_ok = true, text_ok = true;
    for (int i = 0; i < ca->n_rows; i++) {
        cat_ok &= geti(ca, 8, i) >= 10 && geti(ca, 8, i) <= 14;
        reserve_ok &= geti(ca, 4, i) > geti(ca, 3, i) && geti(ca, 3, i) >= 100;
        expires_ok &= geti(ca, 6, i) > geti(ca, 5, i) && geti(ca, 6, i) - geti(ca, 5, i) <= 2 * 1000 * 1000 * 20;
        seller_ok &= geti(ca, 7, i) >= 1000 && geti(ca, 7, i) <= max_person;
        text_ok &= gets(ca, 1, i).len >= 3 && gets(ca, 1, i).len < 20 && gets(ca, 2, i).len < 100;
    }
    ok(cat_ok, "categories 10..14");
    ok(reserve_ok, "reserve above the initial bid");
    ok(expires_ok, "auctions expire after they start, within twice the 100-auction horizon");
    ok(seller_ok, "sellers are persons");
    ok(text_ok, "item names and descriptions within their lengths");

    Gen p = gen_open(RT_NX_PERSON, 3, 10000);
    Chunk *cp = gen_range(&p, a, 0, events, 1024, NULL);
    bool card_ok = true, mail_ok = true, state_ok = true;
    double bytes = 0;
    for (int i = 0; i < cp->n_rows; i++) {
        StrRef card = gets(cp, 3, i), mail = gets(cp, 2, i), st = gets(cp, 5, i);
        card_ok &= card.len == 19 && card.p[4] == ' ' && card.p[9] == ' ' && card.p[14] == ' ';
        mail_ok &= mail.len > 8 && memchr(mail.p, '@', mail.len) && memcmp(mail.p + mail.len - 4, ".com", 4) == 0;
        state_ok &= st.len == 2 && strstr("AZ CA ID OR WA WY", (char[3]){st.p[0], st.p[1], 0});
        bytes += 8 + gets(cp, 1, i).len + mail.len + card.len + gets(cp, 4, i).len + st.len + gets(cp, 7, i).len;
    }
    ok(card_ok, "credit cards are four 4-digit groups");
    ok(mail_ok, "emails look like x@y.com");
    ok(state_ok, "states among AZ CA ID OR WA WY");
    ok(fabs(bytes / cp->n_rows - 200) < 5, "persons average 200 bytes");
    rt_nexmark_gen_free(b.g);
    rt_nexmark_gen_free(au.g);
    rt_nexmark_gen_free(p.g);
    arena_free(a);
}

static void test_restart_and_end(void)
{
    Arena *a = arena_new(0);
    Gen g1 = gen_open(RT_NX_BID, 1, 1000000);
    Chunk *whole = gen_range(&g1, a, 0, 30000, 1024, NULL);
    /* stop at an odd place, save next, continue in a new generator */
    Chunk *part = chunk_new(a, g1.n_cols, g1.types, 30001);
    int64_t next = 0;
    Chunk *c = chunk_new(a, g1.n_cols, g1.types, 777);
    rt_nexmark_gen_fill(g1.g, &next, 30000, c);
    for (int r = 0; r < c->n_rows; r++)
        chunk_append_from(part, c, r);
    int64_t saved = next;
    ok(saved > 777 && saved < 900, "next counts events examined, not rows");
    rt_nexmark_gen_free(g1.g);
    Gen g2 = gen_open(RT_NX_BID, 1, 1000000);
    Chunk *rest = gen_range(&g2, a, saved, 30000, 1024, NULL);
    for (int r = 0; r < rest->n_rows; r++)
        chunk_append_from(part, rest, r);
    ok(same_chunks(whole, part), "a generator resumed at the saved event number continues exactly");

    /* bounded end: events [0, 1000) hold 920 bids, and next stops at the limit */
    Chunk *b = chunk_new(a, g2.n_cols, g2.types, 4096);
    next = 0;
    is_int(rt_nexmark_gen_fill(g2.g, &next, 1000, b), 920, "1000 events hold 920 bids");
    is_int(next, 1000, "next stops at the limit");
    Chunk *more = chunk_new(a, g2.n_cols, g2.types, 16);
    is_int(rt_nexmark_gen_fill(g2.g, &next, 1000, more), 0, "nothing after the end");
    /* a limit that falls on non-bid events still moves next to it */
    next = 996;
    Chunk *d = chunk_new(a, g2.n_cols, g2.types, 16);
    is_int(rt_nexmark_gen_fill(g2.g, &next, 1002, d), 4, "events 996..999 are bids, 1000, 1001 are not");
    is_int(next, 1002, "next moved past the person and auction events");
    rt_nexmark_gen_free(g2.g);
    arena_free(a);
}

static void test_config_errors(void)
{
    const char *kv[] = {"connector", "nexmark", "nexmark.table.type", "bid", NULL};
    RtNxConfig cfg;
    WError err = {0};
    const char *bad_col[] = {"auction", "seller"};
    TypeId t2[] = {TYPE_INT8, TYPE_INT8};
    CatRelation r = relation(2, bad_col, t2, kv);
    ok(rt_nexmark_config(&r, &cfg, NULL, &err) != 0 && !strcmp(err.sqlstate, "42703") && strstr(err.msg, "seller"),
       "a column that is not a bid field is an error");
    const char *wrong_type[] = {"price"};
    TypeId tt[] = {TYPE_TEXT};
    memset(&err, 0, sizeof err);
    r = relation(1, wrong_type, tt, kv);
    ok(rt_nexmark_config(&r, &cfg, NULL, &err) != 0 && !strcmp(err.sqlstate, "42804"), "price must be BIGINT");
    const char *kv_bad[] = {"connector", "nexmark", "nexmark.table.type", "bid", "nexmark.colour", "red", NULL};
    memset(&err, 0, sizeof err);
    r = relation(1, BID_COLS, BID_TYPES, kv_bad);
    ok(rt_nexmark_config(&r, &cfg, NULL, &err) != 0 && strstr(err.msg, "nexmark.colour"), "unknown options are errors");
    const char *kv_none[] = {"connector", "nexmark", NULL};
    memset(&err, 0, sizeof err);
    r = relation(1, BID_COLS, BID_TYPES, kv_none);
    ok(rt_nexmark_config(&r, &cfg, NULL, &err) != 0, "the table type is required");
    const char *kv_split[] = {"connector", "nexmark", "nexmark.table.type", "bid", "nexmark.split.num", "2", NULL};
    memset(&err, 0, sizeof err);
    r = relation(1, BID_COLS, BID_TYPES, kv_split);
    ok(rt_nexmark_config(&r, &cfg, NULL, &err) != 0, "one split only");
    const char *kv_ok[] = {"connector", "nexmark", "nexmark.table.type", "BID", "nexmark.event.num", "10000000",
                           "nexmark.first-event.rate", "10000000", "nexmark.pace", "false", NULL};
    memset(&err, 0, sizeof err);
    r = relation(7, BID_COLS, BID_TYPES, kv_ok);
    ok(rt_nexmark_config(&r, &cfg, NULL, &err) == 0 && cfg.event_num == 10000000 && cfg.rate == 10000000 &&
           cfg.table == RT_NX_BID && !cfg.pace,
       "the RisingWave spelling of the options");
}

/* Generator-only throughput: bid rows per second into 1024-row chunks. */
static int bench(int64_t events)
{
    Arena *a = arena_new(1 << 20);
    Gen g = gen_open(RT_NX_BID, 0, 10000000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t next = 0, rows = 0;
    while (next < events) {
        Chunk *c = chunk_new(a, g.n_cols, g.types, 1024);
        rows += rt_nexmark_gen_fill(g.g, &next, events, c);
        arena_reset(a);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("generator: %lld events (%lld bid rows, 7 columns) in %.3f s: %.2f M events/s on one core\n",
           (long long)events, (long long)rows, s, (double)events / s / 1e6);
    rt_nexmark_gen_free(g.g);
    arena_free(a);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--bench"))
        return bench(atoll(argv[2]));
    test_determinism();
    test_distribution();
    test_ranges();
    test_restart_and_end();
    test_config_errors();
    return tap_done();
}
