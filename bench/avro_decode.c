/*
 * avro_decode.c: decode throughput per core of Nexmark-bid-shaped records,
 * Avro (runtime/avro.c) against JSON (runtime/json.c), in one run.
 *
 *   build/bench/avro_decode [ROWS]          (default 2000000)
 *
 * 4096 distinct bids (auction, bidder, price, channel, url, date_time,
 * extra) are encoded once both ways: JSON objects as Kafka tools write them
 * (the time as epoch milliseconds), and Avro binary of the schema below
 * (date_time a timestamp-millis), written here by hand (zig-zag varints,
 * length-prefixed strings) so the bench needs no Avro library of its own.
 * Each decoder then fills chunks of 1024 rows of the same five typed columns
 * from the cycled records, as the source operator does; the chunk arena is
 * reset per chunk. Prints rows/s of this thread's CPU time for each and
 * the ratio. Nothing here fails on a number; it is not a test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "avro_codec.h"
#include "runtime_int.h"

#define NREC 4096
#define CHUNK 1024
#define NCOLS 7

static const char *SCHEMA =
    "{\"type\":\"record\",\"name\":\"bid\",\"fields\":["
    "{\"name\":\"auction\",\"type\":\"long\"},{\"name\":\"bidder\",\"type\":\"long\"},"
    "{\"name\":\"price\",\"type\":\"long\"},{\"name\":\"channel\",\"type\":\"string\"},"
    "{\"name\":\"url\",\"type\":\"string\"},"
    "{\"name\":\"date_time\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}},"
    "{\"name\":\"extra\",\"type\":\"string\"}]}";
static const char *NAMES[NCOLS] = {"auction", "bidder", "price", "channel", "url", "date_time", "extra"};
static const TypeId TYPES[NCOLS] = {TYPE_INT8, TYPE_INT8, TYPE_INT8, TYPE_TEXT, TYPE_TEXT, TYPE_TIMESTAMP, TYPE_TEXT};

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put_long(Buf *b, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z & ~UINT64_C(0x7f)) {
        buf_putc(b, (char)((z & 0x7f) | 0x80));
        z >>= 7;
    }
    buf_putc(b, (char)z);
}

static void put_string(Buf *b, const char *s)
{
    put_long(b, (int64_t)strlen(s));
    buf_puts(b, s);
}

typedef struct Rec {
    char *p;
    size_t n;
} Rec;

static Rec avro_recs[NREC], json_recs[NREC];

static void make_records(void)
{
    static const char *channels[] = {"Google", "Facebook", "Baidu", "Apple"};
    for (int i = 0; i < NREC; i++) {
        int64_t auction = 1000 + i % 97, bidder = 2000 + (i * 7) % 1013, price = 100 + (i * 31) % 100000;
        int64_t ts = INT64_C(1700000000000) + i * 13;
        const char *ch = channels[i % 4];
        char url[96], extra[64];
        snprintf(url, sizeof url, "https://www.nexmark.com/%s/item.htm?query=1&channel_id=%d", ch, i % 1000);
        snprintf(extra, sizeof extra, "%032d", i);
        Buf a = BUF_INIT, j = BUF_INIT;
        put_long(&a, auction);
        put_long(&a, bidder);
        put_long(&a, price);
        put_string(&a, ch);
        put_string(&a, url);
        put_long(&a, ts);
        put_string(&a, extra);
        buf_printf(&j,
                   "{\"auction\": %lld, \"bidder\": %lld, \"price\": %lld, \"channel\": \"%s\", \"url\": \"%s\", "
                   "\"date_time\": %lld, \"extra\": \"%s\"}",
                   (long long)auction, (long long)bidder, (long long)price, ch, url, (long long)ts, extra);
        avro_recs[i] = (Rec){a.data, a.len};
        json_recs[i] = (Rec){j.data, j.len};
    }
}

/* Decodes rows records with one of the two decoders; returns rows/s of CPU. */
static double run(long rows, RtAvroDecoder *d)
{
    Arena *a = arena_new(0);
    char err[200];
    long done = 0;
    double t0 = cpu_s();
    while (done < rows) {
        arena_reset(a);
        Chunk *c = chunk_new(a, NCOLS, TYPES, CHUNK);
        for (int r = 0; r < CHUNK && done < rows; r++, done++) {
            const Rec *rec = d ? &avro_recs[done % NREC] : &json_recs[done % NREC];
            int rc = d ? rt_avro_decode_row(d, rec->p, rec->n, c, c->n_rows, err, sizeof err)
                       : rt_json_decode_row(rec->p, rec->n, NCOLS, NAMES, c, c->n_rows, err, sizeof err);
            if (rc) {
                fprintf(stderr, "avro_decode: %s record %ld: %s\n", d ? "avro" : "json", done, err);
                exit(1);
            }
            c->ops[c->n_rows++] = OP_INSERT;
        }
    }
    double t = cpu_s() - t0;
    arena_free(a);
    return (double)rows / t;
}

int main(int argc, char **argv)
{
    long rows = argc > 1 ? atol(argv[1]) : 2000000;
    make_records();
    CatOption opts[] = {{"connector", "kafka"}, {"topic", "bids"}, {"schema.inline", SCHEMA}};
    CatRelation r = {0};
    r.name = "bids";
    r.n_cols = NCOLS;
    r.col_names = NAMES;
    r.col_types = TYPES;
    r.options = opts;
    r.n_options = 3;
    r.format = "plain";
    r.encode = "avro";
    WError err = {0};
    RtAvroDecoder *d = rt_avro_decoder_new(&r, NCOLS, NAMES, &err);
    if (!d) {
        fprintf(stderr, "avro_decode: %s\n", err.msg);
        return 1;
    }
    size_t abytes = 0, jbytes = 0;
    for (int i = 0; i < NREC; i++) {
        abytes += avro_recs[i].n;
        jbytes += json_recs[i].n;
    }
    run(rows / 10, d); /* warm-up */
    run(rows / 10, NULL);
    double json = run(rows, NULL), avro = run(rows, d);
    printf("records: %ld Nexmark bids, 7 columns; mean size avro %.0f B, json %.0f B\n", rows,
           (double)abytes / NREC, (double)jbytes / NREC);
    printf("json  %10.0f rows/s per core\n", json);
    printf("avro  %10.0f rows/s per core\n", avro);
    printf("avro/json  %.2f\n", avro / json);
    rt_avro_decoder_free(d);
    return 0;
}
