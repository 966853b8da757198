/*
 * nexmark_cli.c: `weir nexmark`, the built-in Nexmark generator on stdout.
 *
 * Prints the events of one table type (person, auction or bid) that a
 * source with the same options would read -- the same generator, so the
 * same rows -- as JSON lines (to produce to Kafka with kcat and measure the
 * Kafka path) or CSV (to load PostgreSQL or SQLite as a reference). Every
 * field of the table, in the order the specification lists them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nexmark.h"
#include "nexmark_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "Usage: weir nexmark [options]\n"
               "  --table person|auction|bid   which events (default bid)\n"
               "  --events N                   events 0..N-1 of the stream, all kinds (default 1000000)\n"
               "  --rate N                     events per second of event time (default 10000,\n"
               "                               as the connector's and the Nexmark generator's)\n"
               "  --format json|csv            one JSON object or CSV record per line (default json)\n"
               "  --header                     CSV: a header line first\n"
               "The rows are those of CREATE SOURCE ... WITH (connector = 'nexmark', nexmark.table.type = ...,\n"
               "nexmark.event.num = N, nexmark.events.per.second = RATE) with every column declared.\n");
}

/* The columns of each table type, as CREATE SOURCE would declare them. */
typedef struct Col {
    const char *name;
    TypeId type;
} Col;
static const Col PERSON[] = {{"id", TYPE_INT8}, {"name", TYPE_TEXT}, {"email_address", TYPE_TEXT},
                             {"credit_card", TYPE_TEXT}, {"city", TYPE_TEXT}, {"state", TYPE_TEXT},
                             {"date_time", TYPE_TIMESTAMP}, {"extra", TYPE_TEXT}};
static const Col AUCTION[] = {{"id", TYPE_INT8}, {"item_name", TYPE_TEXT}, {"description", TYPE_TEXT},
                              {"initial_bid", TYPE_INT8}, {"reserve", TYPE_INT8}, {"date_time", TYPE_TIMESTAMP},
                              {"expires", TYPE_TIMESTAMP}, {"seller", TYPE_INT8}, {"category", TYPE_INT8},
                              {"extra", TYPE_TEXT}};
static const Col BID[] = {{"auction", TYPE_INT8}, {"bidder", TYPE_INT8}, {"price", TYPE_INT8},
                          {"channel", TYPE_TEXT}, {"url", TYPE_TEXT}, {"date_time", TYPE_TIMESTAMP},
                          {"extra", TYPE_TEXT}};

/* s as a JSON string (quotes, escapes). */
static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* s as a CSV field (quoted when it holds a comma, quote or line break). */
static void csv_str(FILE *f, const char *s, size_t n)
{
    if (!memchr(s, ',', n) && !memchr(s, '"', n) && !memchr(s, '\n', n) && !memchr(s, '\r', n)) {
        fwrite(s, 1, n, f);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

int weir_nexmark_main(int argc, char **argv)
{
    const char *table = "bid", *format = "json", *events = "1000000", *rate = NULL;
    bool header = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--header")) {
            header = true;
            continue;
        } else if (!v) {
            fprintf(stderr, "weir nexmark: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--table")) {
            table = v;
        } else if (!strcmp(a, "--events")) {
            events = v;
        } else if (!strcmp(a, "--rate")) {
            rate = v;
        } else if (!strcmp(a, "--format")) {
            format = v;
        } else {
            fprintf(stderr, "weir nexmark: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    bool json = !strcmp(format, "json");
    if (!json && strcmp(format, "csv")) {
        fprintf(stderr, "weir nexmark: --format must be json or csv\n");
        return 2;
    }
    const Col *cols;
    int n;
    if (!strcmp(table, "person")) {
        cols = PERSON;
        n = (int)(sizeof PERSON / sizeof *PERSON);
    } else if (!strcmp(table, "auction")) {
        cols = AUCTION;
        n = (int)(sizeof AUCTION / sizeof *AUCTION);
    } else if (!strcmp(table, "bid")) {
        cols = BID;
        n = (int)(sizeof BID / sizeof *BID);
    } else {
        fprintf(stderr, "weir nexmark: --table must be person, auction or bid\n");
        return 2;
    }
    /* A source declaring every column: the connector checks the options. */
    const char *names[16];
    TypeId types[16];
    for (int i = 0; i < n; i++) {
        names[i] = cols[i].name;
        types[i] = cols[i].type;
    }
    /* Without --rate the option is left out: the connector's default applies (one default). */
    CatOption opts[] = {{"connector", "nexmark"},
                        {"nexmark.table.type", table},
                        {"nexmark.event.num", events},
                        {"nexmark.events.per.second", rate}};
    CatRelation r = {.kind = CAT_SOURCE, .name = table, .n_cols = n, .col_names = names, .col_types = types,
                     .wm_col = -1, .n_options = rate ? 4 : 3, .options = opts};
    RtNxConfig cfg;
    int fields[16];
    WError err = {0};
    if (rt_nexmark_config(&r, &cfg, fields, &err)) {
        fprintf(stderr, "weir nexmark: %s\n", err.msg);
        return 2;
    }
    if (cfg.event_num < 0) {
        fprintf(stderr, "weir nexmark: --events must be a count\n");
        return 2;
    }
    RtNxGen *g = rt_nexmark_gen_new(&cfg, cfg.base_time_ms >= 0 ? cfg.base_time_ms : RT_NX_DEFAULT_BASE_MS, n, fields);
    Arena *a = arena_new(1 << 20);
    Buf text = BUF_INIT;
    if (header && !json)
        for (int i = 0; i < n; i++)
            printf("%s%s", cols[i].name, i + 1 < n ? "," : "\n");
    int64_t next = 0;
    while (next < cfg.event_num) {
        arena_reset(a);
        Chunk *c = chunk_new(a, n, types, 4096);
        rt_nexmark_gen_fill(g, &next, cfg.event_num, c);
        for (int row = 0; row < c->n_rows; row++) {
            if (json)
                fputc('{', stdout);
            for (int i = 0; i < n; i++) {
                Value v;
                chunk_get(c, i, row, &v);
                if (json)
                    printf("%s\"%s\":", i ? "," : "", cols[i].name);
                else if (i)
                    fputc(',', stdout);
                if (v.null) {
                    fputs(json ? "null" : "", stdout);
                    continue;
                }
                buf_reset(&text);
                value_to_text(&v, &text);
                if (v.type == TYPE_INT8)
                    fwrite(text.data, 1, text.len, stdout);
                else if (json)
                    json_str(stdout, text.data, text.len);
                else
                    csv_str(stdout, text.data, text.len);
            }
            fputs(json ? "}\n" : "\n", stdout);
        }
    }
    buf_free(&text);
    arena_free(a);
    rt_nexmark_gen_free(g);
    return fflush(stdout) == 0 ? 0 : 1;
}
