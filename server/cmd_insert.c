/*
 * cmd_insert.c: INSERT INTO a Kafka source (VALUES or SELECT): JSON
 * records produced to its topic, acknowledged before the answer.
 */
#include "commands.h"
#include "tz.h"
#include "crashpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cluster.h"
#include "crypto.h"
#include "nexmark.h"
#include "pgcatalog.h"
#include "numeric.h"
#include "row.h"

/* How long INSERT INTO a Kafka source waits for the broker's acknowledgement. */
#define INSERT_ACK_TIMEOUT_MS 10000

/* INSERT INTO a source failed after `produced` records were queued (a
 * delivery failed or the broker did not answer within
 * INSERT_ACK_TIMEOUT_MS): every record not yet acknowledged is withdrawn
 * from the producer, so none of them is sent later (the row used to arrive
 * when a paused broker resumed, after the client had been told it failed).
 * err keeps its error when nothing was written; it becomes 08007 when some
 * rows were acknowledged or had already been sent (written, or possibly
 * written: a retry could write them twice). Runs under the engine lock, so
 * the shared producer holds only this statement's records. */
static void insert_withdraw(RtKafkaProducer *p, long acked0, int produced, const char *source, WError *err)
{
    int in_flight = rt_kafka_producer_purge(p);
    long acked = rt_kafka_producer_acked(p) - acked0;
    if (acked == 0 && in_flight == 0) {
        werr_detail(err, "No row was written: the %d record%s not acknowledged were withdrawn before "
                         "they reached the broker.", produced, produced == 1 ? "" : "s");
        werr_hint(err, "Retrying the statement is safe.");
        return;
    }
    char first[sizeof err->msg];
    snprintf(first, sizeof first, "%s", err->msg);
    werr_clear(err);
    werr(err, SQLSTATE_TXN_RESOLUTION_UNKNOWN, 0,
         "INSERT into source \"%s\" is partly or possibly written: %ld of %d rows were acknowledged, "
         "%d were sent without an answer", source, acked, produced, in_flight);
    werr_detail(err, "%s. The rows sent without an answer may or may not be in the topic; the rest "
                     "were withdrawn and will not be written.", first);
    werr_hint(err, "Check the source before retrying: a retry may write some rows twice.");
}

/* ---- INSERT ----------------------------------------------------------------------------- */

int cmd_insert(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    const AstInsert *ins = st->u.insert;
    CatObj *o = cat_find(e->cat, ins->table);
    if (!o)
        return werr(err, SQLSTATE_UNDEFINED_TABLE, st->pos, "relation \"%s\" does not exist", ins->table);
    if (o->kind == CAT_TABLE)
        return table_insert(e, st, out, err);
    if (o->kind == CAT_SINK && !ins->query->values)
        /* Flink starts a continuous job with INSERT INTO <sink table> SELECT;
         * weir's sinks are not tables, and a sink with its own query is
         * CREATE SINK ... AS query. */
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos,
                    "feature not supported: INSERT INTO sink \"%s\" ... SELECT (a continuous insert)", o->name),
               werr_hint(err, "A sink that runs a query of its own is CREATE SINK name AS SELECT ... WITH (...)."), -1;
    if (o->kind != CAT_SOURCE)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos, "cannot insert into %s \"%s\"", cmd_kind_word(o->kind),
                    o->name);
    const CatRelation *r = &o->rel;
    const char *connector = cat_option(r, "connector");
    if (!connector || strcasecmp(connector, "kafka") != 0)
        return werr(err, SQLSTATE_WRONG_OBJECT_TYPE, st->pos,
                    "cannot insert into source \"%s\": its connector '%s' makes its own rows", o->name,
                    connector ? connector : "");
    if (r->encode && !strcasecmp(r->encode, "avro"))
        /* INSERT writes JSON records; in an Avro topic they would be bad records. */
        return werr(err, SQLSTATE_NOT_SUPPORTED, st->pos, "feature not supported: INSERT INTO Avro source \"%s\"",
                    o->name),
               werr_hint(err, "Produce its records with an Avro producer (Confluent's wire format with "
                              "schema.registry, raw Avro binary with schema.inline)."), -1;
    int ncols = r->n_cols, nphys = 0;
    for (int k = 0; k < ncols; k++)
        nphys += cat_col_in_value(r, k);
    /* Computed columns are not written: the records carry the others. */
    int n_target = ins->columns ? ast_list_len(ins->columns) : nphys;
    int *map = xcalloc((size_t)(n_target ? n_target : 1), sizeof(int));
    for (int i = 0, k = 0; i < n_target; i++) {
        if (!ins->columns) {
            while (!cat_col_in_value(r, k))
                k++;
            map[i] = k++;
            continue;
        }
        const char *c = AST_AT(ins->columns, i);
        map[i] = -1;
        for (int k = 0; k < ncols; k++)
            if (strcmp(r->col_names[k], c) == 0)
                map[i] = k;
        if (map[i] < 0) {
            free(map);
            return werr(err, SQLSTATE_UNDEFINED_COLUMN, st->pos, "column \"%s\" of relation \"%s\" does not exist", c,
                        o->name);
        }
        if (!cat_col_in_value(r, map[i])) {
            bool computed = r->col_gen && r->col_gen[map[i]];
            free(map);
            return werr(err, SQLSTATE_GENERATED_ALWAYS, st->pos, "cannot insert a value into column \"%s\"", c),
                   werr_hint(err, computed ? "Column \"%s\" is computed from the others (a computed column)."
                                           : "Column \"%s\" comes from the Kafka record (INCLUDE).", c), -1;
        }
        for (int j = 0; j < i; j++)
            if (map[j] == map[i]) {
                free(map);
                return werr(err, SQLSTATE_DUPLICATE_COLUMN, st->pos, "column \"%s\" specified more than once", c);
            }
    }
    const char *boot = cat_option(r, "properties.bootstrap.server");
    if (!boot)
        boot = cat_option(r, "properties.bootstrap.servers");
    if (!boot)
        boot = e->kafka_bootstrap;
    RtKafkaProducer *p;
    RtKafkaProp props[WEIR_MAX_KAFKA_PROPERTIES];
    int np = rt_source_kafka_props(r, props, WEIR_MAX_KAFKA_PROPERTIES);
    if (engine_producer(e, boot, props, np, &p, err)) {
        free(map);
        return -1;
    }
    Arena *a = arena_new(0);
    Value *vals = arena_alloc(a, sizeof(Value) * (size_t)ncols);
    const char **wnames = arena_alloc(a, sizeof(char *) * (size_t)ncols);
    Buf json = BUF_INIT;
    int nrows = ast_list_len(ins->query->values), rc = 0;
    /* INSERT ... SELECT: the query's current result, produced once like
     * VALUES (one-shot, as INSERT INTO a table ... SELECT). */
    Value **qrows = NULL;
    int qcols = 0, pos = ins->query->pos;
    if (!ins->query->values) {
        rc = table_query_rows(e, ins->query, a, &qrows, &nrows, &qcols, err);
        if (!rc && qcols != n_target)
            rc = werr(err, SQLSTATE_SYNTAX_ERROR, pos, "INSERT has %s expressions than target columns",
                      qcols > n_target ? "more" : "fewer");
        if (rc)
            nrows = 0;
    }
    /* Encode every row before producing any, so a bad value sends nothing. */
    char **recs = arena_alloc(a, sizeof(char *) * (size_t)(nrows ? nrows : 1));
    size_t *lens = arena_alloc(a, sizeof(size_t) * (size_t)(nrows ? nrows : 1));
    for (int rrow = 0; rrow < nrows && !rc; rrow++) {
        AstList *row = qrows ? NULL : AST_AT(ins->query->values, rrow);
        if (row && ast_list_len(row) != n_target) {
            rc = werr(err, SQLSTATE_SYNTAX_ERROR, ((AstExpr *)AST_AT(row, 0))->pos,
                      "INSERT has %s expressions than target columns",
                      ast_list_len(row) > n_target ? "more" : "fewer");
            break;
        }
        if (row)
            pos = ((AstExpr *)AST_AT(row, 0))->pos;
        for (int k = 0; k < ncols; k++)
            vals[k] = value_null(r->col_types[k]);
        for (int i = 0; i < n_target && !rc; i++)
            rc = row ? plan_const_expr(AST_AT(row, i), r->col_types[map[i]], a, &vals[map[i]], err)
                     : table_assign(a, &qrows[rrow][i], r->col_types[map[i]], pos, &vals[map[i]], err);
        if (rc)
            break;
        for (int k = 0; k < ncols && r->col_typmod && !rc; k++)
            if ((rc = num_apply_typmod(r->col_typmod[k], &vals[k], err)))
                err->pos = ((AstExpr *)AST_AT(row, 0))->pos;
        if (rc)
            break;
        for (int k = 0; k < ncols && r->col_not_null; k++)
            if (r->col_not_null[k] && vals[k].null) {
                rc = werr(err, SQLSTATE_NOT_NULL_VIOLATION, pos,
                          "null value in column \"%s\" of relation \"%s\" violates not-null constraint",
                          r->col_names[k], o->name);
                break;
            }
        if (rc)
            break;
        buf_reset(&json);
        int nw = 0;
        for (int k = 0; k < ncols; k++)
            if (cat_col_in_value(r, k)) {
                wnames[nw] = r->col_names[k];
                vals[nw++] = vals[k]; /* k >= nw: compacts in place */
            }
        rt_json_encode_row(nw, wnames, vals, &json);
        recs[rrow] = arena_strndup(a, json.data, json.len);
        lens[rrow] = json.len;
    }
    const char *topic = cat_option(r, "topic");
    long acked0 = rt_kafka_producer_acked(p);
    int produced = 0;
    for (int i = 0; i < nrows && !rc; i++)
        if (!(rc = rt_kafka_produce(p, topic, -1, NULL, 0, recs[i], lens[i], err)))
            produced++;
    if (!rc)
        rc = rt_kafka_producer_flush(p, INSERT_ACK_TIMEOUT_MS, err);
    if (rc && produced > 0)
        insert_withdraw(p, acked0, produced, o->name, err);
    if (!rc) {
        char tag[64];
        snprintf(tag, sizeof tag, "INSERT 0 %d", nrows);
        srv_result_complete(out, tag);
    }
    buf_free(&json);
    arena_free(a);
    free(map);
    return rc;
}
