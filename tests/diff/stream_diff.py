#!/usr/bin/python3
"""stream_diff.py: random materialized views under random table changes, against the same query
run ad hoc, with restarts and kill -9 in between.

Two writable tables t0 and t1 (id INT PRIMARY KEY, k INT, g TEXT, v BIGINT, n NUMERIC(12,2),
f BOOLEAN, ts TIMESTAMP; k from a small domain so joins and groups meet, NULLs everywhere)
receive random INSERT / UPDATE / DELETE batches. Random views over them (filters and
projections, GROUP BY aggregates with HAVING, global aggregates, inner and outer joins, joins
with aggregates, DISTINCT, Top-N over a table and over a join, IN / NOT EXISTS subqueries,
UNION / INTERSECT / EXCEPT, a view over a view) are created at the start and now and then
between steps. After every step each view's rows are compared, as a multiset, with its query run
ad hoc over the tables' current rows (docs/sql.md: a table's changes have reached every view
when the statement answers, so no wait is needed; a view that still differs after 5 s fails),
and each table with a model of the acknowledged changes (durability). Between steps the server
is now and then restarted (SIGTERM) or killed (SIGKILL) and started again on its data directory.
Every few steps VERIFY MATERIALIZED VIEW checks each view too. Differences listed in
known_defects.txt are reported as known (tests/diff/README.md); any other fails the run.
"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import difflib_weir as dw  # noqa: E402

COLS = [("k", "INT"), ("g", "TEXT"), ("v", "BIGINT"), ("n", "NUMERIC(12,2)"), ("f", "BOOLEAN"), ("ts", "TIMESTAMP"),
        ("iv", "INTERVAL"), ("w", "BIGINT")]
POOL = {
    "k": ["0", "1", "2", "3", "4"],
    "g": ["'a'", "'b'", "'héllo'", "'日本'", "''", "'Z'"],
    "v": ["0", "1", "-7", "42", "1000", "-1000000"],
    "n": ["'0.00'", "'1.50'", "'-2.25'", "'10.10'", "'99.99'"],
    "f": ["true", "false"],
    "ts": ["'2026-01-01 00:00:00'", "'2026-01-01 00:00:05.5'", "'2025-12-31 23:59:59'", "'1999-01-01 12:00:00'"],
    # iv and w are read only by their own views (group_iv, sum_w): iv holds intervals PostgreSQL
    # finds equal ('1 day', '24 hours'), w bigints whose sum overflows a bigint.
    "iv": ["'1 day'", "'24 hours'", "'-3 hours'", "'1 mon'", "'30 days'", "'00:00:01.5'"],
    "w": ["1", "-1", "9223372036854775807", "-9223372036854775808", "1000"],
}


def rand_val(r, col):
    return "NULL" if r.random() < 0.12 else r.choice(POOL[col])


def cond(r, a):
    """A random condition over alias a (or no alias when a is '')."""
    p = a + "." if a else ""
    return r.choice([
        "%sk >= %s" % (p, r.choice(POOL["k"])),
        "%sv > %s" % (p, r.choice(POOL["v"])),
        "%sf" % p,
        "%sg <> %s" % (p, r.choice(POOL["g"])),
        "%sn IS NOT NULL" % p,
        "(%sk = %s OR %sv < 0)" % (p, r.choice(POOL["k"]), p),
        "%sts < TIMESTAMP '2026-01-01 00:00:01'" % p,
    ])


def gen_view(r, views):
    """(kind, query) for a new view; views: the names of existing grouped views."""
    t, u = r.choice(["t0", "t1"]), r.choice(["t0", "t1"])
    kind = r.choice(["filter", "group", "group", "global", "join", "join", "joinagg", "distinct", "topn",
                     "topn_join", "subq", "setop", "viewview", "group_iv", "sum_w"])
    if kind == "group_iv":
        return kind, "SELECT iv, count(*) AS c, min(id) AS mi FROM %s GROUP BY iv" % t
    if kind == "sum_w":
        return kind, "SELECT k, sum(w) AS sw, count(*) AS c FROM %s GROUP BY k" % t
    if kind == "filter":
        return kind, "SELECT id, k, v * 2 AS v2, upper(g) AS gu, n + 1 AS n1, CASE WHEN f THEN 'y' ELSE 'n' END AS fy " \
                     "FROM %s WHERE %s" % (t, cond(r, ""))
    if kind == "group":
        having = " HAVING count(*) > 1" if r.random() < 0.3 else ""
        where = " WHERE %s" % cond(r, "") if r.random() < 0.4 else ""
        return kind, "SELECT k, count(*) AS c, count(g) AS cg, sum(v) AS s, sum(n) AS sn, min(n) AS mn, max(ts) AS mx, " \
                     "count(DISTINCT g) AS dg, bool_or(f) AS bo, avg(n) AS an FROM %s%s GROUP BY k%s" % (t, where, having)
    if kind == "global":
        return kind, "SELECT count(*) AS c, sum(n) AS sn, max(v) AS mv, min(g) AS mg FROM %s" % t
    if kind == "join":
        j = r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
        extra = " WHERE %s" % cond(r, "a") if r.random() < 0.3 and j == "JOIN" else ""
        return kind, "SELECT a.id AS aid, b.id AS bid, a.v AS av, b.n AS bn, b.g AS bg FROM %s a %s %s b ON a.k = b.k%s" % (
            t, j, u, extra)
    if kind == "joinagg":
        return kind, "SELECT a.k, count(*) AS c, sum(b.v) AS s, max(b.g) AS mg FROM %s a JOIN %s b ON a.k = b.k " \
                     "GROUP BY a.k" % (t, u)
    if kind == "distinct":
        return kind, "SELECT DISTINCT k, f FROM %s" % t
    if kind == "topn":
        return kind, "SELECT id, k, v FROM (SELECT id, k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v %s, id) AS rn " \
                     "FROM %s) x WHERE rn <= %d" % (r.choice(["ASC", "DESC"]), t, r.randint(1, 3))
    if kind == "topn_join":
        return kind, "SELECT aid, bid, bv FROM (SELECT a.id AS aid, b.id AS bid, b.v AS bv, ROW_NUMBER() OVER " \
                     "(PARTITION BY a.id ORDER BY b.v DESC, b.id) AS rn FROM %s a JOIN %s b ON a.k = b.k) x " \
                     "WHERE rn <= 1" % (t, u)
    if kind == "subq":
        if r.random() < 0.5:
            return kind, "SELECT id, v FROM %s WHERE k IN (SELECT k FROM %s WHERE %s)" % (t, u, cond(r, ""))
        return kind, "SELECT id, v FROM %s a WHERE NOT EXISTS (SELECT 1 FROM %s b WHERE b.k = a.k AND b.f)" % (t, u)
    if kind == "setop":
        op = r.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "INTERSECT ALL", "EXCEPT ALL"])
        return kind, "SELECT k, g FROM %s WHERE %s %s SELECT k, g FROM %s" % (t, cond(r, ""), op, u)
    # a view over a grouped view (or a group view itself when there is none yet)
    if not views:
        return gen_view(r, views)
    name, q = r.choice(views)
    return kind, "SELECT k, c, s FROM %s WHERE c > 1" % name, (name, q)


class Model:
    """The tables' acknowledged rows: {table: {id: [literal per column]}}."""

    def __init__(self):
        self.rows = {"t0": {}, "t1": {}}
        self.next_id = 1


def dml(r, m):
    """A random statement for a random table, and how it changes the model if acknowledged."""
    t = r.choice(["t0", "t1"])
    rows = m.rows[t]
    op = r.choice(["insert", "insert", "update", "delete"]) if rows else "insert"
    if op == "insert":
        new = {}
        for _ in range(r.randint(1, 6)):
            new[m.next_id] = [rand_val(r, c) for c, _ in COLS]
            m.next_id += 1
        sql = "INSERT INTO %s (id, %s) VALUES %s" % (t, ", ".join(c for c, _ in COLS), ", ".join(
            "(%d, %s)" % (i, ", ".join(v)) for i, v in new.items()))
        return sql, lambda: rows.update(new)
    ids = r.sample(sorted(rows), min(len(rows), r.randint(1, 4)))
    where = "id IN (%s)" % ", ".join(map(str, ids))
    if op == "delete":
        return "DELETE FROM %s WHERE %s" % (t, where), lambda: [rows.pop(i) for i in ids]
    j = r.randrange(len(COLS))
    val = rand_val(r, COLS[j][0])

    def apply():
        for i in ids:
            rows[i][j] = val
    return "UPDATE %s SET %s = %s WHERE %s" % (t, COLS[j][0], val, where), apply


def canon(res):
    out = []
    for row in res.rows:
        vals = []
        for v, oid in zip(row, res.oids):
            if v is not None and dw.family(oid) in ("float4", "float8"):
                v = "%.12g" % (float(v) + 0.0)
            vals.append(v)
        out.append(tuple(vals))
    return sorted(out, key=lambda row: tuple((0, "") if v is None else (1, v) for v in row))


def table_rows_sql(t):
    return "SELECT id, %s FROM %s" % (", ".join(c for c, _ in COLS), t)


class Run:
    def __init__(self, a):
        self.a = a
        self.r = random.Random(a.seed)
        here = os.path.dirname(os.path.abspath(__file__))
        self.exp = dw.Expectations(os.path.join(here, "intended.txt"), os.path.join(here, "known_defects.txt"))
        self.pg = dw.Pg() if a.pg else None
        self.server = dw.Server(a.weir)
        self.model = Model()
        self.views = []          # [name, kind, query, adhoc]
        self.n_views = 0
        self.counts = {"steps": 0, "checks": 0, "lagged": 0, "restarts": 0, "kills": 0, "known": 0, "failed": 0,
                       "verify": 0, "wsteps": 0, "pg_checks": 0}
        self.broken = set()      # views with a reported difference
        self.reported = set()    # (view, diff kind) already reported known, so a defect counts once a view
        self.failures = []

    def q(self, sql):
        res = dw.run(self.server.conn, sql)
        if res.state == "CRASH":
            time.sleep(0.3)
            self.server.reconnect()
        return res

    def difference(self, what, sql, detail, w=None, p=None, name=None):
        """Looks a difference up; records a failure when it is not known. Returns True if known."""
        sig = "query: %s\nweir: %s\npg: -\ndiff: %s\ndata: stream\nweir rows:\n%spg rows:\n%s" % (
            sql, w.describe() if w else "-", what, rows_text(w), rows_text(p))
        hit = self.exp.lookup(sig)
        if name:
            self.broken.add(name)
        if hit:
            key = (name, what.split(":")[0])
            if key not in self.reported:
                self.reported.add(key)
                self.counts["known"] += 1
                dw.log("known (%s %s): %s: %s" % (hit[0], hit[1], what, sql))
            return True
        self.counts["failed"] += 1
        lines = ["DIFFERENCE (seed %d, step %d): %s" % (self.a.seed, self.counts["steps"], what), "-- repro:",
                 "CREATE TABLE t0 (id INT PRIMARY KEY, %s);" % ", ".join("%s %s" % c for c in COLS),
                 "CREATE TABLE t1 (id INT PRIMARY KEY, %s);" % ", ".join("%s %s" % c for c in COLS)]
        for t, rows in self.model.rows.items():
            if rows:
                lines.append("INSERT INTO %s (id, %s) VALUES %s;" % (t, ", ".join(c for c, _ in COLS), ", ".join(
                    "(%d, %s)" % (i, ", ".join(v)) for i, v in sorted(rows.items()))))
        lines += [sql + ";", detail]
        self.failures.append("\n".join(lines))
        print("\n".join("# " + l for l in "\n".join(lines).splitlines()))
        sys.stdout.flush()
        return False

    def create_view(self):
        name = "v%d" % self.n_views
        self.n_views += 1
        g = gen_view(self.r, [(v[0], v[2]) for v in self.views if v[1] == "group"])
        kind, query = g[0], g[1]
        adhoc = query
        upstream = None
        if len(g) == 3:
            up_name, up_q = g[2]
            adhoc = query.replace("FROM %s " % up_name, "FROM (%s) %s " % (up_q, up_name))
            upstream = up_name
        ddl = "CREATE MATERIALIZED VIEW %s AS %s" % (name, query)
        res = self.q(ddl)
        if res.state == "CRASH":
            self.difference("crash: creating a view", ddl, "the server died")
            self.q("DROP MATERIALIZED VIEW IF EXISTS %s CASCADE" % name)
            return
        if not res.ok:
            if res.state != "0A000":
                self.difference("stream: CREATE refused: %s" % res.describe(), ddl, "")
            else:
                dw.log("view refused (0A000, skipped): %s: %s" % (res.msg, query))
            return
        self.views.append([name, kind, query, adhoc, upstream])

    def check_tables(self, when):
        for t, rows in self.model.rows.items():
            res = self.q(table_rows_sql(t))
            want = sorted(tuple([str(i)] + [None if v == "NULL" else v for v in row]) for i, row in rows.items())
            if not res.ok:
                self.difference("stream: table %s unreadable %s" % (t, when), table_rows_sql(t), res.describe())
                continue
            got = [tuple(row) for row in res.rows]
            # Compare ids and NULL-ness only: literals ('1.50', true) print differently from how
            # they were written; the values themselves are what the views are checked against.
            if sorted((g[0], tuple(x is None for x in g)) for g in got) != \
                    sorted((w[0], tuple(x is None for x in w)) for w in want):
                self.difference("stream: table %s lost or kept changes %s" % (t, when), table_rows_sql(t),
                                "-- weir has %d rows, %d acknowledged" % (len(got), len(want)))

    def check_views(self):
        for view in list(self.views):
            name, kind, query, adhoc, _ = view
            self.counts["checks"] += 1
            # A view already reported (known) is not waited for again: its defect stays.
            deadline = time.time() + (0 if name in self.broken else 5)
            first = True
            while True:
                got = self.q("SELECT * FROM %s" % name)
                want = self.q(adhoc)
                same = got.ok and want.ok and canon(got) == canon(want)
                if same or time.time() > deadline or got.state == "CRASH" or want.state == "CRASH":
                    break
                if not got.ok and not want.ok:
                    break
                first = False
                time.sleep(0.1)
            if same:
                if not first:
                    self.counts["lagged"] += 1
                continue
            if not want.ok and not got.ok:
                continue    # both fail: the ad hoc query is not comparable
            detail = "-- view %s (%s): %s\n%s\n-- ad hoc: %s\n%s" % (name, kind, got.describe(), show(got),
                                                                   want.describe(), show(want))
            what = "stream: view %s differs from its query run ad hoc" % kind
            if got.state == "CRASH" or want.state == "CRASH":
                what = "crash: reading view %s" % kind
            self.difference(what, "CREATE MATERIALIZED VIEW %s AS %s" % (name, query), detail, got, want, name)

    def pg_sync(self):
        """PostgreSQL's copy of the tables becomes the model (the acknowledged rows)."""
        for t, rows in self.model.rows.items():
            sql = "DELETE FROM %s" % t
            if rows:
                sql += "; INSERT INTO %s (id, %s) VALUES %s" % (t, ", ".join(c for c, _ in COLS), ", ".join(
                    "(%d, %s)" % (i, ", ".join(v)) for i, v in sorted(rows.items())))
            res = dw.run(self.pg.conn, sql)
            if not res.ok:
                raise RuntimeError("PostgreSQL refused the model: " + res.describe())

    def check_views_pg(self):
        """Each view's rows against the same query in PostgreSQL over the same rows."""
        self.pg_sync()
        for name, kind, query, adhoc, _ in self.views:
            got = self.q("SELECT * FROM %s" % name)
            want = dw.run(self.pg.conn, adhoc)
            if not got.ok or not want.ok:
                if got.ok != want.ok:
                    self.difference("stream-pg: view %s: weir %s, PostgreSQL %s" % (kind, got.describe(), want.describe()),
                                    "CREATE MATERIALIZED VIEW %s AS %s" % (name, query), "", got, want, name)
                continue
            self.counts["pg_checks"] += 1
            if canon(got) != canon(want):
                detail = "-- view %s (%s): %s\n%s\n-- PostgreSQL: %s\n%s" % (name, kind, got.describe(), show(got),
                                                                          want.describe(), show(want))
                self.difference("stream-pg: view %s differs from PostgreSQL" % kind,
                                "CREATE MATERIALIZED VIEW %s AS %s" % (name, query), detail, got, want, name)

    def verify(self):
        for name, kind, query, _, _ in self.views:
            res = self.q("VERIFY MATERIALIZED VIEW %s WITH (report = 'summary')" % name)
            if not res.ok:
                if res.state not in ("0A000",):
                    self.difference("stream: VERIFY failed: %s" % res.describe(),
                                    "CREATE MATERIALIZED VIEW %s AS %s" % (name, query), "")
                continue
            self.counts["verify"] += 1
            row = res.rows[0]        # ..., missing, extra, different, late..., ok
            if row[-1] not in ("t", "true", True):
                self.difference("stream: VERIFY of view %s says not ok" % kind,
                                "CREATE MATERIALIZED VIEW %s AS %s" % (name, query), "-- %s" % (row,), name=name)

    def step(self):
        r = self.r
        sql, apply = dml(r, self.model)
        res = self.q(sql)
        if res.ok:
            apply()
        elif res.state == "CRASH":
            # The culprit is one of the views over the table: the signature names them all, and
            # they are dropped (the DISTINCT ones first) so that the run goes on.
            table = sql.split()[2] if sql.startswith("INSERT") else sql.split()[1 if sql.startswith("UPDATE") else 2]
            over = [v for v in self.views if " %s" % table in v[2]]
            suspects = [v for v in over if v[1] == "distinct"] or over
            self.difference("crash: DML", sql + "\n-- views over %s: %s" % (table, " ;; ".join(
                "%s AS %s" % (v[0], v[2]) for v in over)), "the server died; dropping %s" % ", ".join(
                v[0] for v in suspects))
            for v in suspects:
                self.q("DROP MATERIALIZED VIEW IF EXISTS %s CASCADE" % v[0])
                self.views = [w for w in self.views if w[0] != v[0] and not (len(w) > 4 and w[4] == v[0])]
            self.resync()
        else:
            self.difference("stream: DML refused: %s" % res.describe(), sql, "")
        self.counts["steps"] += 1
        x = r.random()
        if x < self.a.restart_p:
            self.server.restart()
            self.counts["restarts"] += 1
            self.check_tables("after a restart")
        elif x < self.a.restart_p + self.a.kill_p:
            self.server.kill()
            self.counts["kills"] += 1
            self.check_tables("after kill -9")
        if r.random() < 0.08 and len(self.views) < self.a.max_views:
            self.create_view()
        self.check_views()
        if self.pg is not None:
            self.check_views_pg()
        if self.counts["steps"] % 10 == 0:
            self.verify()

    def resync(self):
        """After a crash mid-statement: take the tables' rows from weir (the statement may or may
        not have been applied) as the model."""
        for t in ("t0", "t1"):
            res = self.q(table_rows_sql(t))
            if res.ok:
                self.model.rows[t] = {int(row[0]): [lit(v, c) for v, (_, c) in zip(row[1:], COLS)] for row in res.rows}

    def main(self):
        started = time.time()
        try:
            for t in ("t0", "t1"):
                ddl = "CREATE TABLE %s (id INT PRIMARY KEY, %s)" % (t, ", ".join("%s %s" % c for c in COLS))
                res = self.q(ddl)
                if not res.ok:
                    raise RuntimeError("CREATE TABLE: " + res.describe())
                if self.pg is not None:
                    dw.run(self.pg.conn, ddl)
            for _ in range(3):
                sql, apply = dml(self.r, self.model)
                if self.q(sql).ok:
                    apply()
            for _ in range(self.a.views):
                self.create_view()
            self.check_views()
            for _ in range(self.a.steps):
                if self.a.minutes and time.time() - started > self.a.minutes * 60:
                    break
                self.step()
            self.verify()
            if self.a.window_steps:
                wp = WindowPhase(self)
                wp.setup(self.a.window_views)
                for _ in range(self.a.window_steps):
                    if self.a.minutes and time.time() - started > self.a.minutes * 60:
                        break
                    wp.step()
                    self.counts["wsteps"] += 1
                    x = self.r.random()
                    if x < self.a.restart_p:
                        self.server.restart()
                        self.counts["restarts"] += 1
                        wp.restarted = True
                    elif x < self.a.restart_p + self.a.kill_p:
                        self.server.kill()
                        self.counts["kills"] += 1
                        wp.restarted = True
                    wp.check()
        finally:
            self.server.stop(keep=self.counts["failed"] > 0 and self.a.keep)
            if self.pg is not None:
                self.pg.stop()
        c = self.counts
        dw.log("%d window steps (INSERT INTO sources, FLUSH, compare); %d view checks against PostgreSQL" % (
            c["wsteps"], c["pg_checks"]))
        dw.log("%d steps, %d views, %d view checks (%d needed a retry), %d VERIFY ok, %d restarts, %d kills; "
               "%d known defects seen, %d new differences" % (c["steps"], self.n_views, c["checks"], c["lagged"],
                                                             c["verify"], c["restarts"], c["kills"], c["known"],
                                                             c["failed"]))
        kinds = {}
        for v in self.views:
            kinds[v[1]] = kinds.get(v[1], 0) + 1
        dw.log("views at the end: %s" % ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
        for (kind, name), n in sorted(self.exp.hits.items()):
            dw.log("  %s %s: %d" % (kind, name, n))
        dw.log("%.0f s" % (time.time() - started))
        ok = c["failed"] == 0 and c["checks"] > 0
        print("%s 1 - stream_diff: %d steps, %d new differences" % ("ok" if ok else "not ok", c["steps"], c["failed"]))
        print("1..1")
        return 0 if ok else 1


class WindowPhase:
    """Out-of-order rows INSERTed into a Kafka source, TUMBLE and HOP views with random watermark
    bounds and allowed lateness, compared after every step (FLUSH, then the view) with a Python
    reference of docs/time.md's rules: one partition; the watermark in effect for a row is
    max(ts) - bound over the rows before it; a row counts in a window [start, end) unless
    end + lateness <= that watermark (late: dropped, and counted in weir_views.late_rows once per
    (row, window)); an EMIT CHANGES view keeps every window's row, an EMIT ON WINDOW CLOSE view
    (lateness 0) only those of windows whose end the watermark has reached."""

    BASE = 1767225600           # 2026-01-01 00:00:00 UTC, seconds

    def __init__(self, run):
        self.run, self.r = run, run.r
        self.rows = []          # (k, ts seconds, v) in arrival order
        self.views = []         # (name, size, slide, bound, lateness, query)
        self.t = 0
        self.restarted = False  # since setup()

    def ts_text(self, sec):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.BASE + sec))

    def setup(self, n_views):
        q = self.run.q
        for i in range(n_views):
            bound = self.r.choice([0, 2, 5, 20])
            lateness = self.r.choice([0, 0, 5, 30])
            size = self.r.choice([5, 10, 30])
            slide = size if self.r.random() < 0.5 else size // 5 if size % 5 == 0 and size >= 10 else size
            res = q("CREATE SOURCE ws%d (k INT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '%d' SECOND) "
                    "WITH (connector = 'kafka', topic = 'ws%d')" % (i, bound, i))
            if not res.ok:
                raise RuntimeError("CREATE SOURCE: " + res.describe())
            win = ("TUMBLE(ws%d, ts, INTERVAL '%d' SECOND)" % (i, size) if slide == size else
                   "HOP(ws%d, ts, INTERVAL '%d' SECOND, INTERVAL '%d' SECOND)" % (i, slide, size))
            eowc = self.r.random() < 0.4
            if eowc:
                lateness = 0
            query = "SELECT window_start, k, count(*) AS n, sum(v) AS s FROM %s GROUP BY window_start, k%s%s" % (
                win, " EMIT ON WINDOW CLOSE" if eowc else "",
                " ALLOW LATENESS INTERVAL '%d' SECOND" % lateness if lateness else "")
            res = q("CREATE MATERIALIZED VIEW wv%d AS %s" % (i, query))
            if not res.ok:
                raise RuntimeError("CREATE MATERIALIZED VIEW: " + res.describe())
            self.views.append(("wv%d" % i, size, slide, bound, lateness, query, eowc))

    def reference(self, size, slide, bound, lateness, eowc):
        wm = None
        out, late = {}, 0
        for k, ts, v in self.rows:
            start = ts - ts % slide
            while start > ts - size:
                end = start + size
                if wm is not None and end + lateness <= wm:
                    late += 1
                else:
                    n, s = out.get((start, k), (0, 0))
                    out[(start, k)] = (n + 1, s + v)
                start -= slide
            wm = ts - bound if wm is None else max(wm, ts - bound)
        # EMIT ON WINDOW CLOSE: only the windows the watermark has closed (end <= wm) are rows.
        return {(self.ts_text(st), str(k)): (str(n), str(s)) for (st, k), (n, s) in out.items()
                if not eowc or (wm is not None and st + size <= wm)}, late

    def step(self):
        rows = []
        for _ in range(self.r.randint(1, 6)):
            self.t += self.r.randint(0, 3)
            d = self.r.random()
            delay = 0 if d < 0.5 else self.r.randint(1, 8) if d < 0.9 else self.r.randint(10, 60)
            rows.append((self.r.randint(0, 2), max(0, self.t - delay), self.r.randint(-5, 100)))
        for name, *_ in self.views:
            i = name[2:]
            res = self.run.q("INSERT INTO ws%s (k, v, ts) VALUES %s" % (i, ", ".join(
                "(%d, %d, '%s')" % (k, v, self.ts_text(ts)) for k, ts, v in rows)))
            if not res.ok:
                self.run.difference("stream: INSERT INTO a source refused: %s" % res.describe(), "ws" + i, "")
        self.rows.extend(rows)

    def check(self):
        res = self.run.q("FLUSH")
        if not res.ok:
            self.run.difference("stream: FLUSH failed: %s" % res.describe(), "FLUSH", "")
            return
        for name, size, slide, bound, lateness, query, eowc in self.views:
            self.run.counts["checks"] += 1
            want, late = self.reference(size, slide, bound, lateness, eowc)
            got = self.run.q("SELECT window_start, k, n, s FROM %s" % name)
            lr = self.run.q("SELECT late_rows FROM weir_views WHERE name = '%s'" % name)
            if not got.ok:
                self.run.difference("stream: window view unreadable: %s" % got.describe(), query, "", name=name)
                continue
            have = {(r[0], r[1]): (r[2], r[3]) for r in got.rows}
            n_late = int(lr.rows[0][0]) if lr.ok and lr.rows else None
            if self.restarted:
                # weir_views.late_rows counts since the server started (docs/operations.md: the
                # late-rows metric is a counter since start), and a restarted view replays rows
                # from its last checkpoint: the count is not comparable any more.
                n_late = late
            if have != want or n_late != late:
                diff = sorted(set(have.items()) ^ set(want.items()))[:10]
                detail = "-- %s (bound %d s, lateness %d s): late_rows %s, reference %d; windows that differ " \
                         "(view or reference): %s\n-- rows in arrival order (k, ts, v): %s" % (
                             name, bound, lateness, n_late, late, diff,
                             ", ".join("(%d, '%s', %d)" % (k, self.ts_text(ts), v) for k, ts, v in self.rows))
                self.run.difference("stream: window view differs from the lateness reference",
                                    "CREATE MATERIALIZED VIEW %s AS %s" % (name, query), detail, name=name)


def lit(v, typ):
    if v is None:
        return "NULL"
    if typ in ("INT", "BIGINT"):
        return v
    if typ == "BOOLEAN":
        return "true" if v in ("t", "true") else "false"
    return "'%s'" % v.replace("'", "''")


def rows_text(res):
    if res is None or not res.ok:
        return ""
    return "".join("  %s\n" % " | ".join("NULL" if v is None else v for v in row) for row in res.rows[:200])


def show(res, limit=15):
    if not res.ok:
        return "    " + res.describe()
    rows = canon(res)
    lines = ["    " + " | ".join("NULL" if v is None else v for v in row) for row in rows[:limit]]
    if len(rows) > limit:
        lines.append("    ... %d rows" % len(rows))
    return "\n".join(lines) or "    (no rows)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--views", type=int, default=8, help="views created before the first step")
    ap.add_argument("--max-views", type=int, default=14)
    ap.add_argument("--restart-p", type=float, default=0.06, help="chance of a restart after a step")
    ap.add_argument("--kill-p", type=float, default=0.06, help="chance of a kill -9 after a step")
    ap.add_argument("--window-steps", type=int, default=30, help="steps of the windowed phase (0: none)")
    ap.add_argument("--window-views", type=int, default=4, help="windowed views, each over its own source")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long")
    ap.add_argument("--no-pg", dest="pg", action="store_false",
                    help="do not also compare each view with PostgreSQL over the same rows")
    ap.add_argument("--keep", action="store_true", help="keep the data directory when something failed")
    a = ap.parse_args()
    dw.exit_on_signals()
    sys.exit(Run(a).main())


if __name__ == "__main__":
    main()
