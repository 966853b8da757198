/* test_state_ttl.c: key expiry (state_ttl.c) on a real state table: the grain,
 * when keys are due, sweeps (bounded, oldest first), expiry on access, reads
 * that do not create, and access times that survive a checkpoint and reopen. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_int.h"
#include "tap.h"

#define S (1000000LL)

static char dropped[64];     /* the keys the operator was told to drop, in order */

static int drop_cb(void *arg, const void *key, size_t klen, WError *err)
{
    StorTable *t = arg;
    strncat(dropped, key, klen);
    return stor_table_delete(t, key, klen, err);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static bool has(StorTable *t, const char *key)
{
    const void *v;
    size_t vl;
    WError err = {0};
    return stor_table_get(t, key, strlen(key), &v, &vl, &err) == 1;
}

static void put(StorTable *t, const char *key)
{
    WError err = {0};
    stor_table_put(t, key, strlen(key), "row", 3, &err);
}

int main(void)
{
    char base[] = "/tmp/weir-ttl-XXXXXX";
    if (!mkdtemp(base))
        return perror("mkdtemp"), 1;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/data", base);
    StorEnv *env;
    StorTable *t;
    WError err = {0};
    if (stor_open(dir, NULL, &env, &err) || stor_table_open(env, 7, &t, &err))
        return diag("open: %s", err.msg), 1;

    uint64_t expired = 0;
    RtTtl ttl;
    rt_ttl_init(&ttl, t, 100 * S, drop_cb, t, &expired); /* grain: 1 s */
    is_int(ttl.grain_us, S, "the grain is 1/100 of the TTL");
    put(t, "a");
    put(t, "b");
    put(t, "c");
    ok(!rt_ttl_touch(&ttl, "c", 1, 0, true, &err), "touch c at 0");
    ok(!rt_ttl_touch(&ttl, "a", 1, S / 2, true, &err), "touch a at 0.5 s (same grain as 0)");
    ok(!rt_ttl_touch(&ttl, "b", 1, 50 * S, true, &err), "touch b at 50 s");
    ok(!rt_ttl_touch(&ttl, "z", 1, 50 * S, false, &err), "a read of z, which has no state");
    is_int(rt_ttl_due(&ttl, 101 * S - 1, &err), 0, "nothing due before last grain + grain + TTL");
    is_int(rt_ttl_due(&ttl, 101 * S, &err), 1, "a and c due at 101 s");

    ttl.sweep_max = 1;
    ok(!rt_ttl_sweep(&ttl, 120 * S, &err), "sweep at 120 s");
    is_str(dropped, "a", "one key per sweep here, the oldest first (ties by key)");
    is_int(rt_ttl_due(&ttl, 120 * S, &err), 1, "c is still due");
    ok(!rt_ttl_sweep(&ttl, 120 * S, &err), "sweep again");
    is_str(dropped, "ac", "then c");
    ok(!has(t, "a") && !has(t, "c") && has(t, "b"), "their state is gone, b's is not");
    is_int(rt_ttl_due(&ttl, 120 * S, &err), 0, "b is not due (touched at 50 s)");
    is_int((int64_t)expired, 2, "two keys counted");

    /* A checkpoint, then the table reopened: b's access time is state. */
    StorCheckpoint *ck;
    ok(!stor_checkpoint_begin(env, 1, &ck, &err) && !stor_checkpoint_add_table(ck, t, &err) &&
           !stor_checkpoint_commit(ck, &err),
       "checkpoint");
    rt_ttl_fini(&ttl);
    stor_table_close(t);
    ok(!stor_table_open(env, 7, &t, &err), "reopen");
    rt_ttl_init(&ttl, t, 100 * S, drop_cb, t, &expired);
    is_int(rt_ttl_due(&ttl, 151 * S - 1, &err), 0, "after reopen: b not due before 151 s");
    is_int(rt_ttl_due(&ttl, 151 * S, &err), 1, "after reopen: b due at 151 s (z was never recorded)");

    /* Expired on access: dropped before the caller reads, then recorded again. */
    ok(!rt_ttl_touch(&ttl, "b", 1, 200 * S, true, &err), "touch b at 200 s");
    is_str(dropped, "acb", "b's old state dropped on access");
    ok(!has(t, "b"), "b's state is gone");
    is_int(rt_ttl_due(&ttl, 300 * S, &err), 0, "b, touched again at 200 s, not due at 300 s");
    is_int(rt_ttl_due(&ttl, 301 * S, &err), 1, "due at 301 s");
    ttl.sweep_max = 100;
    ok(!rt_ttl_sweep(&ttl, 301 * S, &err), "sweep at 301 s");
    is_int((int64_t)expired, 4, "four expiries counted");
    is_int(rt_ttl_due(&ttl, INT64_MAX - 1, &err), 0, "nothing left");

    rt_ttl_fini(&ttl);
    stor_table_close(t);
    stor_close(env);
    nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
