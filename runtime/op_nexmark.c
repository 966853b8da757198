/*
 * op_nexmark.c: the built-in Nexmark generator and its source operator.
 *
 * The event stream follows the published Nexmark generator (the one Flink
 * and RisingWave use): event kinds by n % 50, person and auction ids
 * derived from n, hot sellers / bidders / auctions, log-uniform prices,
 * channels and URLs from a cache of 10,000, and `extra` padding each event
 * to its average size. Two things differ, for speed and for exact replay:
 *
 *  - Randomness is a pure function of (seed, event, field): each field of
 *    each event draws from its own splitmix64 stream, so skipping a field
 *    the source does not declare changes no other value, and resuming at
 *    event n needs nothing but n.
 *  - Random text (item names, descriptions, `extra`) is a slice of a fixed
 *    pool of random letters, referenced without copying: the hot path
 *    writes integers and string references straight into the chunk's
 *    typed arrays, with no allocation per row (emails and credit card
 *    numbers of persons, 2% of the events, are formatted into the chunk
 *    arena).
 *
 * The operator polls like any source: each poll appends up to one chunk
 * (nexmark.max.chunk.size rows, default 1024) and pushes it as partition 0
 * of 1. When a bounded generator has produced its last event it sends the
 * end of input downstream, a watermark of +infinity (through the watermark
 * operator's finish when the source has one), so every window fires.
 *
 * State (the source's table): "n" -> next event number (8 bytes BE), and
 * for paced sources "b" -> the base event time in ms, fixed at the first
 * start, so a restart resumes with the same events at the same times.
 */
#include "runtime_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "nexmark.h"
#include "clock.h"

/* ---- the event model (constants of the published generator) ---- */

#define TOTAL_PROPORTION 50
#define PERSON_PROPORTION 1
#define AUCTION_PROPORTION 3
#define FIRST_PERSON_ID 1000
#define FIRST_AUCTION_ID 1000
#define FIRST_CATEGORY_ID 10
#define NUM_CATEGORIES 5
#define NUM_ACTIVE_PEOPLE 1000
#define NUM_IN_FLIGHT_AUCTIONS 100
#define PERSON_ID_LEAD 10
#define AUCTION_ID_LEAD 10
#define HOT_AUCTION_RATIO 2
#define HOT_SELLER_RATIO 4
#define HOT_BIDDER_RATIO 4
#define HOT_CHANNEL_RATIO 2
#define N_CHANNELS 10000
#define AVG_PERSON_BYTES 200
#define AVG_AUCTION_BYTES 500
#define AVG_BID_BYTES 100

#define POOL_BYTES 65536       /* random letters for text fields */
#define POOL_SLACK 1024        /* longest slice taken from the pool */

static const char *const FIRST_NAMES[] = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky",
                                          "Kate", "Julie", "Sarah", "Deiter", "Walter"};
static const char *const LAST_NAMES[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
                                         "Walton", "Smith", "Jones", "Noris"};
static const char *const CITIES[] = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
                                     "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"};
static const char *const STATES[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
static const char *const HOT_CHANNELS[] = {"Google", "Facebook", "Baidu", "Apple"};
#define N_FIRST (int)(sizeof FIRST_NAMES / sizeof FIRST_NAMES[0])
#define N_LAST (int)(sizeof LAST_NAMES / sizeof LAST_NAMES[0])
#define N_CITIES (int)(sizeof CITIES / sizeof CITIES[0])
#define N_STATES (int)(sizeof STATES / sizeof STATES[0])
#define N_HOT_CHANNELS 4

/* ---- fields ---- */

typedef enum FieldKind { FK_INT, FK_TS, FK_STR } FieldKind;

typedef struct FieldDef {
    const char *name;
    FieldKind kind;
} FieldDef;

enum { P_ID, P_NAME, P_EMAIL, P_CARD, P_CITY, P_STATE, P_DATE_TIME, P_EXTRA, P__N };
enum { A_ID, A_ITEM, A_DESC, A_INITIAL, A_RESERVE, A_DATE_TIME, A_EXPIRES, A_SELLER, A_CATEGORY, A_EXTRA, A__N };
enum { B_AUCTION, B_BIDDER, B_PRICE, B_CHANNEL, B_URL, B_DATE_TIME, B_EXTRA, B__N };
/* A computed column (`name AS expr`): no field; NULL until the projection
 * after the source computes it. */
#define F_COMPUTED 15

static const FieldDef PERSON_FIELDS[P__N] = {
    {"id", FK_INT}, {"name", FK_STR}, {"email_address", FK_STR}, {"credit_card", FK_STR},
    {"city", FK_STR}, {"state", FK_STR}, {"date_time", FK_TS}, {"extra", FK_STR}};
static const FieldDef AUCTION_FIELDS[A__N] = {
    {"id", FK_INT}, {"item_name", FK_STR}, {"description", FK_STR}, {"initial_bid", FK_INT},
    {"reserve", FK_INT}, {"date_time", FK_TS}, {"expires", FK_TS}, {"seller", FK_INT},
    {"category", FK_INT}, {"extra", FK_STR}};
static const FieldDef BID_FIELDS[B__N] = {
    {"auction", FK_INT}, {"bidder", FK_INT}, {"price", FK_INT}, {"channel", FK_STR},
    {"url", FK_STR}, {"date_time", FK_TS}, {"extra", FK_STR}};

static const FieldDef *table_fields(RtNxTable t, int *n)
{
    switch (t) {
    case RT_NX_PERSON: *n = P__N; return PERSON_FIELDS;
    case RT_NX_AUCTION: *n = A__N; return AUCTION_FIELDS;
    case RT_NX_BID: break;
    }
    *n = B__N;
    return BID_FIELDS;
}

static const char *table_name(RtNxTable t)
{
    return t == RT_NX_PERSON ? "person" : t == RT_NX_AUCTION ? "auction" : "bid";
}

/* ---- randomness: one splitmix64 stream per (seed, event, field) ---- */

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t rng_for(uint64_t seed, int64_t n, int field)
{
    return mix64(seed ^ ((uint64_t)n * UINT64_C(0x9e3779b97f4a7c15)) ^ ((uint64_t)(field + 1) << 56));
}

static inline uint64_t rng_next(uint64_t *s)
{
    *s += UINT64_C(0x9e3779b97f4a7c15);
    return mix64(*s);
}

/* Uniform in [0, bound), bound < 2^32. */
static inline uint32_t rng_below(uint64_t *s, uint32_t bound)
{
    return (uint32_t)(((rng_next(s) >> 32) * (uint64_t)bound) >> 32);
}

/* Uniform in [0, bound) for 64-bit bounds (auction lengths). */
static inline int64_t rng_below64(uint64_t *s, int64_t bound)
{
    return bound <= 1 ? 0 : (int64_t)(rng_next(s) % (uint64_t)bound);
}

/* ---- the generator ---- */

struct RtNxGen {
    RtNxConfig cfg;
    int64_t base_ms;
    int n_cols;
    int *fields;              /* field per output column */
    bool need[16];            /* field is declared */
    char *pool;               /* POOL_BYTES + POOL_SLACK random letters */
    StrRef names[N_FIRST * N_LAST];
    char *name_buf;
    StrRef *channels, *urls;  /* N_CHANNELS + N_HOT_CHANNELS each; hot ones at the end */
    char *url_buf;
};

int64_t rt_nexmark_event_time_ms(const RtNxConfig *cfg, int64_t base_ms, int64_t n)
{
    /* inter-event delay 1e6/rate us, one generator: n * 1000 / rate ms */
    return base_ms + (int64_t)(((__int128)n * 1000) / cfg->rate);
}

static int64_t last_person0(int64_t n)
{
    int64_t epoch = n / TOTAL_PROPORTION, off = n % TOTAL_PROPORTION;
    if (off >= PERSON_PROPORTION)
        off = PERSON_PROPORTION - 1;
    return epoch * PERSON_PROPORTION + off;
}

static int64_t last_auction0(int64_t n)
{
    int64_t epoch = n / TOTAL_PROPORTION, off = n % TOTAL_PROPORTION;
    if (off < PERSON_PROPORTION) {
        epoch--;
        off = AUCTION_PROPORTION - 1;
    } else if (off >= PERSON_PROPORTION + AUCTION_PROPORTION)
        off = AUCTION_PROPORTION - 1;
    else
        off -= PERSON_PROPORTION;
    return epoch * AUCTION_PROPORTION + off;
}

/* A random person among the active ones (slightly ahead of the last, as published). */
static int64_t next_person0(int64_t n, uint64_t *s)
{
    int64_t num = last_person0(n) + 1;
    int64_t active = num < NUM_ACTIVE_PEOPLE ? num : NUM_ACTIVE_PEOPLE;
    return num - active + rng_below(s, (uint32_t)(active + PERSON_ID_LEAD));
}

static int64_t next_auction0(int64_t n, uint64_t *s)
{
    int64_t max = last_auction0(n);
    int64_t min = max - NUM_IN_FLIGHT_AUCTIONS > 0 ? max - NUM_IN_FLIGHT_AUCTIONS : 0;
    return min + rng_below(s, (uint32_t)(max - min + 1 + AUCTION_ID_LEAD));
}

/* round(10^(U*6) * 100): log-uniform between 100 and 10^8. */
static int64_t next_price(uint64_t *s)
{
    double u = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (int64_t)llround(exp(u * 13.815510557964274) * 100.0);
}

/* A slice of the letter pool: the published nextString(max) has 3..max-1 letters. */
static StrRef pool_string(const RtNxGen *g, uint64_t *s, int max)
{
    uint32_t len = 3 + rng_below(s, (uint32_t)(max - 3));
    return (StrRef){g->pool + rng_below(s, POOL_BYTES), len};
}

/* `extra`: padding so that the event averages `avg` bytes (+-20%), or "". */
static StrRef next_extra(const RtNxGen *g, uint64_t *s, int current, int avg)
{
    if (current > avg)
        return (StrRef){g->pool, 0};
    int extra = avg - current, delta = extra / 5;
    int len = extra + (delta ? (int)rng_below(s, (uint32_t)(2 * delta)) - delta : 0);
    if (len > POOL_SLACK)
        len = POOL_SLACK;
    return (StrRef){g->pool + rng_below(s, POOL_BYTES), (uint32_t)len};
}

static int base_url(char *p, uint64_t *s)
{
    int n = sprintf(p, "https://www.nexmark.com/");
    for (int k = 0; k < 3; k++) {
        int len = 3 + (int)rng_below(s, 2);
        for (int i = 0; i < len; i++)
            p[n++] = (char)('a' + rng_below(s, 26));
        p[n++] = '/';
    }
    return n + sprintf(p + n, "item.htm?query=1");
}

static uint32_t reverse_bits32(uint32_t v)
{
    uint32_t r = 0;
    for (int i = 0; i < 32; i++, v >>= 1)
        r = (r << 1) | (v & 1);
    return r;
}

RtNxGen *rt_nexmark_gen_new(const RtNxConfig *cfg, int64_t base_ms, int n_cols, const int *fields)
{
    RtNxGen *g = xcalloc(1, sizeof *g);
    g->cfg = *cfg;
    g->base_ms = base_ms;
    g->n_cols = n_cols;
    g->fields = xcalloc((size_t)(n_cols ? n_cols : 1), sizeof(int));
    for (int i = 0; i < n_cols; i++) {
        g->fields[i] = fields[i];
        g->need[fields[i]] = true;
    }
    /* The pool and the caches come from fixed streams: every generator has the same. */
    uint64_t s = mix64(cfg->seed ^ UINT64_C(0x6e65786d61726b));
    g->pool = xmalloc(POOL_BYTES + POOL_SLACK);
    for (int i = 0; i < POOL_BYTES + POOL_SLACK; i++)
        g->pool[i] = (char)('a' + rng_below(&s, 26));
    g->name_buf = xmalloc((size_t)N_FIRST * N_LAST * 16);
    for (int f = 0; f < N_FIRST; f++)
        for (int l = 0; l < N_LAST; l++) {
            char *p = g->name_buf + (f * N_LAST + l) * 16;
            int len = snprintf(p, 16, "%s %s", FIRST_NAMES[f], LAST_NAMES[l]);
            g->names[f * N_LAST + l] = (StrRef){p, (uint32_t)len};
        }
    if (cfg->table == RT_NX_BID && (g->need[B_CHANNEL] || g->need[B_URL])) {
        int n = N_CHANNELS + N_HOT_CHANNELS;
        g->channels = xcalloc((size_t)n, sizeof(StrRef));
        g->urls = xcalloc((size_t)n, sizeof(StrRef));
        g->url_buf = xmalloc((size_t)n * 128);
        for (int i = 0; i < n; i++) {
            char *p = g->url_buf + (size_t)i * 128;
            int len;
            if (i < N_CHANNELS) {
                len = snprintf(p, 32, "channel-%d", i);
                g->channels[i] = (StrRef){p, (uint32_t)len};
                p += 32;
                len = base_url(p, &s);
                /* 9 in 10 non-hot channels carry their id in the URL */
                if (rng_below(&s, 10) > 0)
                    len += sprintf(p + len, "&channel_id=%d", (int)(reverse_bits32((uint32_t)i) & 0x7fffffff));
            } else {
                g->channels[i] = (StrRef){HOT_CHANNELS[i - N_CHANNELS], (uint32_t)strlen(HOT_CHANNELS[i - N_CHANNELS])};
                len = base_url(p, &s);
            }
            g->urls[i] = (StrRef){p, (uint32_t)len};
        }
    }
    return g;
}

void rt_nexmark_gen_free(RtNxGen *g)
{
    if (!g)
        return;
    free(g->fields);
    free(g->pool);
    free(g->name_buf);
    free(g->channels);
    free(g->urls);
    free(g->url_buf);
    free(g);
}

/* The next event number >= n of the generator's kind. */
static inline int64_t next_of_kind(RtNxTable t, int64_t n)
{
    int64_t r = n % TOTAL_PROPORTION;
    switch (t) {
    case RT_NX_PERSON: return r == 0 ? n : n + TOTAL_PROPORTION - r;
    case RT_NX_AUCTION:
        if (r == 0)
            return n + 1;
        return r <= AUCTION_PROPORTION ? n : n + TOTAL_PROPORTION - r + 1;
    case RT_NX_BID: break;
    }
    return r >= PERSON_PROPORTION + AUCTION_PROPORTION ? n : n + PERSON_PROPORTION + AUCTION_PROPORTION - r;
}

static inline void put_i(Chunk *c, int col, int row, int64_t v) { c->cols[col].v.i[row] = v; }
static inline void put_s(Chunk *c, int col, int row, StrRef v) { c->cols[col].v.s[row] = v; }

/* Writes 4 groups of 4 digits into the arena. */
static StrRef credit_card(Arena *a, uint64_t *s)
{
    char *p = arena_alloc(a, 20);
    for (int k = 0; k < 4; k++) {
        uint32_t v = rng_below(s, 10000);
        for (int d = 3; d >= 0; d--, v /= 10)
            p[k * 5 + d] = (char)('0' + v % 10);
        p[k * 5 + 4] = ' ';
    }
    return (StrRef){p, 19};
}

static StrRef email(const RtNxGen *g, Arena *a, uint64_t *s)
{
    StrRef u = pool_string(g, s, 7), d = pool_string(g, s, 5);
    char *p = arena_alloc(a, u.len + d.len + 6);
    memcpy(p, u.p, u.len);
    p[u.len] = '@';
    memcpy(p + u.len + 1, d.p, d.len);
    memcpy(p + u.len + 1 + d.len, ".com", 4);
    return (StrRef){p, u.len + d.len + 5};
}

static void gen_person(const RtNxGen *g, int64_t n, int64_t ts_us, Chunk *c, int row)
{
    uint64_t seed = g->cfg.seed;
    StrRef name = {0}, mail = {0}, card = {0}, city = {0}, state = {0};
    bool extra = g->need[P_EXTRA];
    if (g->need[P_NAME] || extra) {
        uint64_t s = rng_for(seed, n, P_NAME);
        name = g->names[rng_below(&s, N_FIRST) * N_LAST + rng_below(&s, N_LAST)];
    }
    if (g->need[P_EMAIL] || extra) {
        uint64_t s = rng_for(seed, n, P_EMAIL);
        mail = email(g, c->arena, &s);
    }
    if (g->need[P_CARD] || extra) {
        uint64_t s = rng_for(seed, n, P_CARD);
        card = credit_card(c->arena, &s);
    }
    if (g->need[P_CITY] || extra) {
        uint64_t s = rng_for(seed, n, P_CITY);
        const char *v = CITIES[rng_below(&s, N_CITIES)];
        city = (StrRef){v, (uint32_t)strlen(v)};
    }
    if (g->need[P_STATE] || extra) {
        uint64_t s = rng_for(seed, n, P_STATE);
        state = (StrRef){STATES[rng_below(&s, N_STATES)], 2};
    }
    for (int i = 0; i < g->n_cols; i++) {
        switch (g->fields[i]) {
        case P_ID: put_i(c, i, row, last_person0(n) + FIRST_PERSON_ID); break;
        case P_NAME: put_s(c, i, row, name); break;
        case P_EMAIL: put_s(c, i, row, mail); break;
        case P_CARD: put_s(c, i, row, card); break;
        case P_CITY: put_s(c, i, row, city); break;
        case P_STATE: put_s(c, i, row, state); break;
        case P_DATE_TIME: put_i(c, i, row, ts_us); break;
        case P_EXTRA: {
            uint64_t s = rng_for(seed, n, P_EXTRA);
            int cur = 8 + (int)(name.len + mail.len + card.len + city.len + state.len);
            put_s(c, i, row, next_extra(g, &s, cur, AVG_PERSON_BYTES));
            break;
        }
        default: c->cols[i].nulls[row] = 1; break;
        }
    }
}

static void gen_auction(const RtNxGen *g, int64_t n, int64_t ts_ms, Chunk *c, int row)
{
    uint64_t seed = g->cfg.seed;
    StrRef item = {0}, desc = {0};
    int64_t initial = 0;
    bool extra = g->need[A_EXTRA];
    if (g->need[A_ITEM] || extra) {
        uint64_t s = rng_for(seed, n, A_ITEM);
        item = pool_string(g, &s, 20);
    }
    if (g->need[A_DESC] || extra) {
        uint64_t s = rng_for(seed, n, A_DESC);
        desc = pool_string(g, &s, 100);
    }
    if (g->need[A_INITIAL] || g->need[A_RESERVE]) {
        uint64_t s = rng_for(seed, n, A_INITIAL);
        initial = next_price(&s);
    }
    for (int i = 0; i < g->n_cols; i++) {
        uint64_t s = rng_for(seed, n, g->fields[i]);
        switch (g->fields[i]) {
        case A_ID: put_i(c, i, row, last_auction0(n) + FIRST_AUCTION_ID); break;
        case A_ITEM: put_s(c, i, row, item); break;
        case A_DESC: put_s(c, i, row, desc); break;
        case A_INITIAL: put_i(c, i, row, initial); break;
        case A_RESERVE: put_i(c, i, row, initial + next_price(&s)); break;
        case A_DATE_TIME: put_i(c, i, row, ts_ms * 1000); break;
        case A_EXPIRES: {
            /* 1 + up to twice the event time over which 100 more auctions appear */
            int64_t ahead = (int64_t)NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION;
            int64_t horizon = rt_nexmark_event_time_ms(&g->cfg, g->base_ms, n + ahead) - ts_ms;
            int64_t len = 1 + rng_below64(&s, horizon * 2 > 1 ? horizon * 2 : 1);
            put_i(c, i, row, (ts_ms + len) * 1000);
            break;
        }
        case A_SELLER: {
            int64_t p = rng_below(&s, HOT_SELLER_RATIO) > 0 ? last_person0(n) / HOT_SELLER_RATIO * HOT_SELLER_RATIO
                                                            : next_person0(n, &s);
            put_i(c, i, row, p + FIRST_PERSON_ID);
            break;
        }
        case A_CATEGORY: put_i(c, i, row, FIRST_CATEGORY_ID + rng_below(&s, NUM_CATEGORIES)); break;
        case A_EXTRA:
            put_s(c, i, row, next_extra(g, &s, 48 + (int)(item.len + desc.len), AVG_AUCTION_BYTES));
            break;
        default: c->cols[i].nulls[row] = 1; break;
        }
    }
}

/* The hot path: 92% of the events. */
static void gen_bid(const RtNxGen *g, int64_t n, int64_t ts_us, Chunk *c, int row)
{
    uint64_t seed = g->cfg.seed;
    int channel = -1;
    if (g->need[B_CHANNEL] || g->need[B_URL]) {
        uint64_t s = rng_for(seed, n, B_CHANNEL);
        channel = rng_below(&s, HOT_CHANNEL_RATIO) > 0 ? N_CHANNELS + (int)rng_below(&s, N_HOT_CHANNELS)
                                                       : (int)rng_below(&s, N_CHANNELS);
    }
    for (int i = 0; i < g->n_cols; i++) {
        uint64_t s = rng_for(seed, n, g->fields[i]);
        switch (g->fields[i]) {
        case B_AUCTION: {
            int64_t a = rng_below(&s, HOT_AUCTION_RATIO) > 0 ? last_auction0(n) / HOT_AUCTION_RATIO * HOT_AUCTION_RATIO
                                                              : next_auction0(n, &s);
            put_i(c, i, row, a + FIRST_AUCTION_ID);
            break;
        }
        case B_BIDDER: {
            int64_t p = rng_below(&s, HOT_BIDDER_RATIO) > 0
                            ? last_person0(n) / HOT_BIDDER_RATIO * HOT_BIDDER_RATIO + 1
                            : next_person0(n, &s);
            put_i(c, i, row, p + FIRST_PERSON_ID);
            break;
        }
        case B_PRICE: put_i(c, i, row, next_price(&s)); break;
        case B_CHANNEL: put_s(c, i, row, g->channels[channel]); break;
        case B_URL: put_s(c, i, row, g->urls[channel]); break;
        case B_DATE_TIME: put_i(c, i, row, ts_us); break;
        case B_EXTRA: put_s(c, i, row, next_extra(g, &s, 32, AVG_BID_BYTES)); break;
        default: c->cols[i].nulls[row] = 1; break;
        }
    }
}

int rt_nexmark_gen_fill(RtNxGen *g, int64_t *next, int64_t limit, Chunk *c)
{
    int64_t n = *next;
    int added = 0;
    RtNxTable t = g->cfg.table;
    while (c->n_rows < c->cap) {
        n = next_of_kind(t, n);
        if (limit >= 0 && n >= limit)
            break;
        int64_t ts_ms = rt_nexmark_event_time_ms(&g->cfg, g->base_ms, n);
        int row = c->n_rows++;
        c->ops[row] = OP_INSERT;
        if (t == RT_NX_BID)
            gen_bid(g, n, ts_ms * 1000, c, row);
        else if (t == RT_NX_AUCTION)
            gen_auction(g, n, ts_ms, c, row);
        else
            gen_person(g, n, ts_ms * 1000, c, row);
        added++;
        n++;
    }
    /* Every event before the limit was examined: skip to it so *next is exact. */
    if (limit >= 0 && n > limit)
        n = limit;
    *next = n;
    return added;
}

/* ---- options ---- */

static const char *const OPTIONS[] = {
    "connector", "nexmark.table.type", "nexmark.event.num", "nexmark.max.events",
    "nexmark.events.per.second", "nexmark.first-event.rate", "nexmark.first.event.rate",
    "nexmark.split.num", "nexmark.pace", "nexmark.base.time", "nexmark.seed", "nexmark.max.chunk.size"};

/* Parses a whole decimal integer in [lo, hi]. */
static int int_option(const CatRelation *r, const char *key, int64_t lo, int64_t hi, int64_t *out, WError *err)
{
    const char *v = cat_option(r, key);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "%s must be an integer between %lld and %lld, not '%s'", key,
                    (long long)lo, (long long)hi, v);
    *out = x;
    return 0;
}

int rt_nexmark_config(const CatRelation *r, RtNxConfig *cfg, int *fields, WError *err)
{
    *cfg = (RtNxConfig){.event_num = -1, .rate = RT_NX_DEFAULT_RATE, .base_time_ms = RT_NX_DEFAULT_BASE_MS, .chunk_rows = 1024};
    for (int i = 0; i < r->n_options; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof OPTIONS / sizeof OPTIONS[0] && !known; k++)
            known = strcasecmp(r->options[i].key, OPTIONS[k]) == 0;
        if (!known) {
            werr(err, SQLSTATE_INVALID_PARAMETER, 0, "unknown option \"%s\" for a nexmark source", r->options[i].key);
            werr_hint(err, "Options: nexmark.table.type, nexmark.event.num, nexmark.events.per.second, "
                           "nexmark.split.num, nexmark.pace, nexmark.base.time, nexmark.seed, nexmark.max.chunk.size.");
            return -1;
        }
    }
    const char *type = cat_option(r, "nexmark.table.type");
    if (!type) {
        werr(err, SQLSTATE_INVALID_PARAMETER, 0, "a nexmark source needs WITH (nexmark.table.type = '...')");
        werr_hint(err, "The table types are 'person', 'auction' and 'bid'.");
        return -1;
    }
    if (!strcasecmp(type, "person"))
        cfg->table = RT_NX_PERSON;
    else if (!strcasecmp(type, "auction"))
        cfg->table = RT_NX_AUCTION;
    else if (!strcasecmp(type, "bid"))
        cfg->table = RT_NX_BID;
    else
        return werr(err, SQLSTATE_INVALID_PARAMETER, 0,
                    "nexmark.table.type must be 'person', 'auction' or 'bid', not '%s'", type);
    const int64_t big = INT64_C(1) << 50;
    if (int_option(r, "nexmark.event.num", 0, big, &cfg->event_num, err) ||
        int_option(r, "nexmark.max.events", 0, big, &cfg->event_num, err) ||
        int_option(r, "nexmark.first-event.rate", 1, 1000000000, &cfg->rate, err) ||
        int_option(r, "nexmark.first.event.rate", 1, 1000000000, &cfg->rate, err) ||
        int_option(r, "nexmark.events.per.second", 1, 1000000000, &cfg->rate, err) ||
        int_option(r, "nexmark.base.time", 0, big, &cfg->base_time_ms, err))
        return -1;
    int64_t v = 1;
    if (int_option(r, "nexmark.split.num", 1, 1, &v, err)) {
        werr_hint(err, "weir runs one generator per source; parallel splits are not supported yet.");
        return -1;
    }
    v = 0;
    if (int_option(r, "nexmark.seed", 0, INT64_MAX, &v, err))
        return -1;
    cfg->seed = (uint64_t)v;
    v = cfg->chunk_rows;
    if (int_option(r, "nexmark.max.chunk.size", 1, 65536, &v, err))
        return -1;
    cfg->chunk_rows = (int)v;
    const char *pace = cat_option(r, "nexmark.pace");
    if (pace) {
        if (!strcasecmp(pace, "true") || !strcasecmp(pace, "on") || !strcmp(pace, "1"))
            cfg->pace = true;
        else if (strcasecmp(pace, "false") && strcasecmp(pace, "off") && strcmp(pace, "0"))
            return werr(err, SQLSTATE_INVALID_PARAMETER, 0, "nexmark.pace must be 'true' or 'false', not '%s'", pace);
        if (cfg->pace && !cat_option(r, "nexmark.base.time"))
            cfg->base_time_ms = -1;
    }
    int nf;
    const FieldDef *defs = table_fields(cfg->table, &nf);
    for (int c = 0; c < r->n_cols; c++) {
        const char *name = r->col_names[c];
        if (r->col_gen && r->col_gen[c]) {
            if (fields)
                fields[c] = F_COMPUTED;
            continue;
        }
        int f = -1;
        for (int k = 0; k < nf && f < 0; k++)
            if (!strcmp(name, defs[k].name) || (!strcmp(name, "datetime") && !strcmp(defs[k].name, "date_time")))
                f = k;
        if (f < 0) {
            werr(err, SQLSTATE_UNDEFINED_COLUMN, 0, "column \"%s\" is not a field of nexmark table type '%s'", name,
                 table_name(cfg->table));
            Buf b = BUF_INIT;
            for (int k = 0; k < nf; k++)
                buf_printf(&b, "%s%s", k ? ", " : "", defs[k].name);
            werr_hint(err, "The %s fields are: %s.", table_name(cfg->table), b.data);
            buf_free(&b);
            return -1;
        }
        TypeId t = r->col_types[c];
        bool ok = defs[f].kind == FK_INT   ? t == TYPE_INT8
                  : defs[f].kind == FK_TS  ? t == TYPE_TIMESTAMP || t == TYPE_TIMESTAMPTZ
                                           : t == TYPE_TEXT;
        if (!ok)
            return werr(err, SQLSTATE_DATATYPE_MISMATCH, 0, "nexmark field \"%s\" is %s, but column \"%s\" is declared %s",
                        defs[f].name, defs[f].kind == FK_INT ? "BIGINT" : defs[f].kind == FK_TS ? "TIMESTAMP" : "VARCHAR",
                        name, type_name(t));
        if (fields)
            fields[c] = f;
    }
    return 0;
}

/* ---- the source operator ---- */

typedef struct NexmarkOp {
    RtSource base;            /* base.op first: an RtOp* is a NexmarkOp* */
    RtNxConfig cfg;
    RtNxGen *gen;
    int64_t base_ms;          /* event time of event 0 */
    int64_t next;             /* next event number to examine */
    bool ended;               /* the end of input went downstream */
} NexmarkOp;

static int nx_push(RtOp *op, Chunk *c) { return rt_emit(op, c); }
static int nx_watermark(RtOp *op, int64_t wm) { return rt_emit_watermark(op, wm); }

static int nx_flush_state(RtOp *op, uint64_t epoch)
{
    NexmarkOp *s = (NexmarkOp *)(void *)op;
    unsigned char v[8];
    put_be64(v, (uint64_t)s->next);
    if (stor_table_put(op->table, "n", 1, v, 8, op->rc->err))
        return -1;
    if (s->cfg.pace) {
        put_be64(v, (uint64_t)s->base_ms);
        if (stor_table_put(op->table, "b", 1, v, 8, op->rc->err))
            return -1;
    }
    return 0;
}

static void nx_close(RtOp *op)
{
    NexmarkOp *s = (NexmarkOp *)(void *)op;
    rt_nexmark_gen_free(s->gen);
    stor_table_close(op->table);
    free(s);
}

static const RtOpVt NEXMARK_VT = {.push = nx_push, .watermark = nx_watermark, .flush_state = nx_flush_state,
                                  .close = nx_close};

/* The end of a bounded input is a watermark of +infinity. A watermark
 * operator makes watermarks from rows and ignores upstream ones, so it is
 * told through its finish hook, which sends +infinity on. */
static int end_to(RtOp *r)
{
    if (r->node && r->node->kind == PN_WATERMARK && r->vt->finish)
        return r->vt->finish(r);
    return r->vt->watermark ? r->vt->watermark(r, TS_PLUS_INF) : 0;
}

static int send_end(RtOp *op)
{
    /* Every reader (several when the source is shared, plan_share.c). */
    for (int i = 0; i < op->n_fan; i++)
        if (end_to(op->fan[i]))
            return -1;
    return op->down ? end_to(op->down) : 0;
}

/* A parallel view's instance s of P generates the blocks of chunk_rows
 * event numbers k with k % P == s (the union over instances is the one
 * stream, and each instance's events stay in event-time order): next is
 * moved to the first event number of a block of its own. */
static void own_block(NexmarkOp *s, const RtOp *op)
{
    int P = rt_op_shards(op);
    if (P <= 1)
        return;
    int64_t B = s->cfg.chunk_rows, blk = s->next / B;
    int64_t skip = ((int64_t)op->rc->shard - blk % P + P) % P;
    if (skip)
        s->next = (blk + skip) * B;
}

static int nx_poll(RtOp *op, int timeout_ms, bool *did_work)
{
    NexmarkOp *s = (NexmarkOp *)(void *)op;
    RtCtx *rc = op->rc;
    int64_t limit = s->cfg.event_num;
    own_block(s, op);
    if (rt_op_shards(op) > 1) {
        int64_t end = (s->next / s->cfg.chunk_rows + 1) * s->cfg.chunk_rows;
        if (limit < 0 || end < limit)
            limit = end;
    }
    if (s->cfg.pace) {
        /* events whose time has come: base + n*1000/rate <= now */
        int64_t now = clock_wall_ms() - s->base_ms;
        int64_t due = now < 0 ? 0 : (int64_t)(((__int128)now * s->cfg.rate) / 1000) + 1;
        if (limit < 0 || due < limit)
            limit = due;
    }
    if (limit < 0 || s->next < limit) {
        const PlanNode *node = op->node;
        Chunk *c = chunk_new(rc->chunk_arena, node->out.n, node->out.types, s->cfg.chunk_rows);
        c->src_partition = 0;
        c->src_n_partitions = 1;
        int64_t before = s->next;
        int rows = rt_nexmark_gen_fill(s->gen, &s->next, limit, c);
        if (s->next != before)
            *did_work = true;
        own_block(s, op);
        rc->stats.records_in += (uint64_t)rows;
        if (rows && rt_emit(op, c))
            return -1;
    }
    if (s->cfg.event_num >= 0 && s->next >= s->cfg.event_num && !s->ended) {
        s->ended = true;
        *did_work = true;
        return send_end(op);
    }
    return 0;
}

/* A bounded generator is flushed once it has produced every event and sent
 * the end of input; an unbounded one at once (there is no "now" to reach). */
static int nx_flush_target(RtOp *op, WError *err) { return 0; }

static bool nx_flushed(RtOp *op)
{
    NexmarkOp *s = (NexmarkOp *)(void *)op;
    return s->cfg.event_num < 0 || s->ended;
}

static const RtSourceVt NEXMARK_SRC = {nx_poll, nx_flush_target, nx_flushed};

static int load_i64(StorTable *t, const char *key, int64_t *out, WError *err)
{
    const void *v;
    size_t vl;
    int found = stor_table_get(t, key, 1, &v, &vl, err);
    if (found < 0)
        return -1;
    if (found && vl == 8)
        *out = (int64_t)get_be64(v);
    return 0;
}

/* The nexmark source operator for a plan node (connector = 'nexmark'). */
RtOp *rt_op_nexmark_source_new(RtCtx *rc, const PlanNode *n)
{
    NexmarkOp *s = xcalloc(1, sizeof *s);
    s->base.src = &NEXMARK_SRC;
    s->base.op.vt = &NEXMARK_VT;
    s->base.op.node = n;
    s->base.op.rc = rc;
    s->base.op.wm = TS_MINUS_INF;
    int *fields = xcalloc((size_t)(n->out.n ? n->out.n : 1), sizeof(int));
    /* The node's columns are the source's, possibly pruned: match them by name. */
    CatRelation cols = *n->source;
    cols.n_cols = n->out.n;
    cols.col_names = (const char **)n->out.names;
    cols.col_types = n->out.types;
    if (rt_nexmark_config(&cols, &s->cfg, fields, rc->err) || rt_op_open_table(&s->base.op, rc->err))
        goto fail;
    s->base_ms = s->cfg.base_time_ms;
    if (load_i64(s->base.op.table, "n", &s->next, rc->err) || load_i64(s->base.op.table, "b", &s->base_ms, rc->err))
        goto fail;
    if (s->base_ms < 0)
        s->base_ms = clock_wall_ms(); /* paced: event time starts now, and is saved with the first checkpoint */
    s->gen = rt_nexmark_gen_new(&s->cfg, s->base_ms, n->out.n, fields);
    free(fields);
    return &s->base.op;
fail:
    free(fields);
    nx_close(&s->base.op);
    return NULL;
}
