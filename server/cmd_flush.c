/*
 * cmd_flush.c: FLUSH (wait until every view consumed its topics' ends)
 * and CHECKPOINT (with its wait for dead letters, and savepoints).
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
#include "clock.h"

#define FLUSH_TIMEOUT_MS 60000

/* ---- FLUSH ------------------------------------------------------------------------------------ */

int cmd_flush(Engine *e, SrvResult *out, WError *err)
{
    CAT_FOREACH(e->cat, CAT_ANY, o)
        if (o->flow.df && rt_dataflow_flush_target(o->flow.df, err))
            return -1;
    int64_t deadline = clock_mono_ms() + FLUSH_TIMEOUT_MS;
    for (;;) {
        bool done = true;
        CAT_FOREACH(e->cat, CAT_ANY, o) {
            if (!done)
                break;
            if (o->flow.df && !rt_dataflow_flushed(o->flow.df))
                done = false;
        }
        if (done)
            break;
        if (srv_result_cancelled(out))
            return werr(err, SQLSTATE_QUERY_CANCELED, 0, "%s", srv_result_cancel_message(out));
        if (clock_mono_ms() > deadline)
            return werr(err, SQLSTATE_QUERY_CANCELED, 0, "FLUSH timed out after %d s: a view is not keeping up",
                        FLUSH_TIMEOUT_MS / 1000);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->progress, &e->lock, &ts);
    }
    srv_result_complete(out, "FLUSH");
    return 0;
}

/* After CHECKPOINT: dead letters are delivered by a thread per view once
 * their checkpoint committed; the statement waits for them (releasing the
 * lock, so views go on) up to DLQ_WAIT_MS, so that "run CHECKPOINT to have
 * them at once" holds while Kafka answers. Past it a notice says so: the
 * checkpoint itself succeeded, and delivery goes on in the background. */
#define DLQ_WAIT_MS 15000
void cmd_dead_letters_wait(Engine *e, SrvResult *out)
{
    int64_t deadline = clock_mono_ms() + DLQ_WAIT_MS;
    for (;;) {
        const char *pending = NULL;
        CAT_FOREACH(e->cat, CAT_ANY, o) {
            if (pending)
                break;
            if (o->flow.df && rt_dataflow_dead_letters_pending(o->flow.df))
                pending = o->name;
        }
        if (!pending || srv_result_cancelled(out))
            return;
        if (clock_mono_ms() > deadline) {
            char msg[300];
            snprintf(msg, sizeof msg, "dead letters of view \"%s\" are not delivered yet; they are retried in the "
                                      "background", pending);
            srv_result_notice(out, msg);
            return;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&e->progress, &e->lock, &ts);
    }
}

/* CHECKPOINT, and ALTER SYSTEM ... (a savepoint: the checkpoint copied into a directory). */
int cmd_checkpoint(Engine *e, const AstStmt *st, SrvResult *out, WError *err)
{
    int rc = 0;
    if (!(rc = engine_checkpoint(e, err))) {
        cmd_dead_letters_wait(e, out);
        if (st->u.savepoint_dir) {
            /* A savepoint: the checkpoint just taken, copied into a directory
             * that weir can later start from (weir --data-dir DIR). */
            if ((rc = stor_copy(e->stor, st->u.savepoint_dir, err)))
                return rc;
            srv_result_complete(out, "ALTER SYSTEM");
        } else {
            srv_result_complete(out, "CHECKPOINT");
        }
    }
    return rc;
}
