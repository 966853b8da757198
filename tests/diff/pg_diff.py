#!/usr/bin/python3
"""pg_diff.py: ad hoc queries in weir against PostgreSQL 15 over the same random rows.

A seeded generator makes a few tables (an `int` primary key and a random subset of int, bigint,
numeric, double, text with unicode, boolean, date, timestamp, timestamptz and interval columns,
named by kind: i0, b1, n2, d3, s4, f5, dt6, ts7, tz8, iv9), fills them with values from small
pools (so joins match and groups repeat) holding NULLs and extremes, creates the same tables in
weir and in a throwaway PostgreSQL, and runs random queries in weir's dialect (docs/sql.md) in
both: filters, projections with arithmetic, CASE, COALESCE and functions, joins (inner, outer,
comma), GROUP BY aggregates with HAVING, DISTINCT, IN / EXISTS / scalar subqueries, UNION /
INTERSECT / EXCEPT [ALL], ORDER BY over every output column with LIMIT / OFFSET, and bare number
literals in arithmetic, extract and date_part, each with its pg_typeof. Results are
compared as text per column type (floats to 12 significant digits, everything else exactly),
as multisets unless the query is ordered; errors by SQLSTATE class. Every difference is looked
up in intended.txt (documented) and known_defects.txt (open defects); any other fails the run
and is printed with a repro (tables, rows, query, both answers). tests/diff/README.md.
"""
import argparse
import decimal
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import difflib_weir as dw  # noqa: E402

KINDS = ["int", "bigint", "numeric", "double", "text", "bool", "date", "timestamp", "timestamptz", "interval"]
PREFIX = {"int": "i", "bigint": "b", "numeric": "n", "double": "d", "text": "s", "bool": "f", "date": "dt",
          "timestamp": "ts", "timestamptz": "tz", "interval": "iv"}
SQLTYPE = {"int": "INT", "bigint": "BIGINT", "numeric": "NUMERIC(12,2)", "double": "DOUBLE PRECISION",
           "text": "TEXT", "bool": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP",
           "timestamptz": "TIMESTAMPTZ", "interval": "INTERVAL"}
POOL = {
    "int": ["0", "1", "-1", "2", "3", "7", "42", "-100", "2147483647", "-2147483648"],
    "bigint": ["0", "1", "2", "3", "-5", "1000000000000", "9223372036854775807", "-9223372036854775808"],
    "numeric": ["'0.00'", "'1.50'", "'-2.25'", "'3.00'", "'100.10'", "'9999999999.99'", "'-9999999999.99'", "'0.01'"],
    "double": ["'0'", "'1.5'", "'-2.25'", "'3'", "'0.1'", "'1e300'", "'-1e-300'", "'123456.789'", "'2.5'"],
    "text": ["''", "'a'", "'b'", "'abc'", "'héllo'", "'Ünïcode'", "'日本語'", "'😀'", "'a b'", "'A'", "'z%_'"],
    "bool": ["true", "false"],
    "date": ["'2024-02-29'", "'1970-01-01'", "'2000-01-01'", "'1999-12-31'", "'0001-01-01'", "'9999-12-31'",
             "'2024-03-31'"],
    "timestamp": ["'2024-02-29 12:34:56.789012'", "'1970-01-01 00:00:00'", "'2000-01-01 00:00:00'",
                  "'2024-03-31 02:30:00'", "'1999-12-31 23:59:59.999999'", "'0001-01-01 00:00:00'",
                  "'9999-12-31 23:59:59'"],
    "timestamptz": ["'2024-03-31 00:30:00+00'", "'2024-10-27 01:30:00+00'", "'2000-01-01 00:00:00+05:30'",
                    "'1970-01-01 00:00:00+00'", "'2024-07-01 12:00:00-07'", "'9999-12-31 00:00:00+00'"],
    "interval": ["'1 day'", "'24 hours'", "'1 mon'", "'30 days'", "'-3 hours'", "'1 year 2 mons 3 days 04:05:06.789'",
                 "'00:00:00'", "'00:00:01.5'", "'-1 days +02:00:00'"],
}
# Bare number literals as PostgreSQL types them: integers that fit int4, int8 or neither (numeric),
# and decimals (a point or an exponent: numeric, whatever their value).
LIT_INTEGERS = ["0", "1", "2", "7", "-3", "10", "100", "2147483647", "2147483648", "9223372036854775807",
                "9223372036854775808", "12345678901234567890"]
LIT_DECIMALS = ["7.0", "0.908", "1.5", "2.25", "0.1", "1.50", "100.000", "1e3", "1.5e1", "2.5E-3", ".5", "5.",
                "0.0", "3.14159", "1E+2", "0.001", "-0.5", "123456789.123456789"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]
NUMERIC_KINDS = ("int", "bigint", "numeric", "double")
ORDERABLE = [k for k in KINDS if k != "bool"]
SETOPS = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]


class Table:
    def __init__(self, name, cols, rows):
        self.name, self.cols, self.rows = name, cols, rows   # cols: [(name, kind)]; rows: {id: [literal]}

    def ddl(self):
        return "CREATE TABLE %s (id INT PRIMARY KEY%s)" % (
            self.name, "".join(", %s %s" % (c, SQLTYPE[k]) for c, k in self.cols))

    def insert(self, ids=None):
        ids = sorted(self.rows) if ids is None else ids
        if not ids:
            return None
        return "INSERT INTO %s (id%s) VALUES %s" % (
            self.name, "".join(", " + c for c, _ in self.cols),
            ", ".join("(%d%s)" % (i, "".join(", " + v for v in self.rows[i])) for i in ids))


ALIASES = ("'24 hours'", "'30 days'")   # equal to '1 day' and '1 mon' in PostgreSQL


def gen_schema(rng, n_tables, n_rows, aliases):
    """Tables with random columns and rows; without aliases no two interval values in the pool are
    equal but spelled differently, so a difference there cannot be issue 17's item 6."""
    pool = dict(POOL)
    if not aliases:
        pool["interval"] = [v for v in POOL["interval"] if v not in ALIASES]
    tables = []
    for t in range(n_tables):
        kinds = rng.sample(KINDS, rng.randint(4, len(KINDS)))
        if "int" not in kinds:
            kinds.append("int")
        cols = [("%s%d" % (PREFIX[k], j), k) for j, k in enumerate(kinds)]
        rows = {}
        for r in range(rng.randint(0, n_rows) if rng.random() < 0.1 else n_rows):
            rows[r + 1] = ["NULL" if rng.random() < 0.15 else rng.choice(pool[k]) for _, k in cols]
        tables.append(Table("t%d" % t, cols, rows))
    return tables


class Gen:
    """Random expressions of a kind over a scope of (qualified column, kind)."""

    def __init__(self, rng, aliases):
        self.r = rng
        self.pool = dict(POOL)
        if not aliases:
            self.pool["interval"] = [v for v in POOL["interval"] if v not in ALIASES]

    def lit(self, kind):
        if kind in ("int",):
            return self.r.choice(["0", "1", "2", "3", "7", "-1", "100"])
        if kind == "bigint":
            return self.r.choice(["3000000000", "CAST(2 AS BIGINT)"])
        if kind == "bool":
            return self.r.choice(["true", "false"])
        if kind == "numeric":
            return "CAST(%s AS NUMERIC(12,2))" % self.r.choice(POOL["numeric"])
        if kind == "text" and self.r.random() < 0.08:
            return self.r.choice(["E'caf\\u00e9'", "E'\\u65e5\\u672c'", "E'tab\\there'"])
        if kind == "double":
            return "CAST(%s AS DOUBLE PRECISION)" % self.r.choice(POOL["double"])
        return "%s %s" % ({"text": "TEXT", "date": "DATE", "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ",
                           "interval": "INTERVAL"}[kind], self.r.choice(self.pool[kind]))

    def col(self, scope, kind):
        c = [n for n, k in scope if k == kind]
        return self.r.choice(c) if c else None

    def expr(self, scope, kind, depth=0):
        r = self.r
        c = self.col(scope, kind)
        if depth >= 2 or r.random() < 0.45:
            if c is not None and r.random() < 0.85:
                return c
            if kind == "bool" or c is None:
                return self.compound(scope, kind, depth) if depth < 3 else self.lit(kind)
            return self.lit(kind)
        return self.compound(scope, kind, depth)

    def compound(self, scope, kind, depth):
        r = self.r
        e = lambda k: self.expr(scope, k, depth + 1)  # noqa: E731
        generic = [
            lambda: "CASE WHEN %s THEN %s ELSE %s END" % (e("bool"), e(kind), e(kind)),
            lambda: "COALESCE(%s, %s)" % (e(kind), e(kind)),
        ]
        opts = {
            "int": [lambda: "(%s %s %s)" % (e("int"), r.choice("+-*/%"), e("int")),
                    lambda: "abs(%s)" % e("int"), lambda: "length(%s)" % e("text"),
                    lambda: "(%s - %s)" % (e("date"), e("date")), lambda: "CAST(%s AS INT)" % e("bool"),
                    lambda: "NULLIF(%s, %s)" % (e("int"), e("int"))],
            "bigint": [lambda: "(%s %s %s)" % (e("bigint"), r.choice("+-*/"), e(r.choice(["int", "bigint"]))),
                       lambda: "CAST(%s AS BIGINT)" % e("int"), lambda: "abs(%s)" % e("bigint")],
            "numeric": [lambda: "(%s %s %s)" % (e("numeric"), r.choice("+-*"), e(r.choice(["int", "numeric"]))),
                        lambda: "(%s / %s)" % (e("numeric"), e("numeric")),
                        lambda: "round(%s, %d)" % (e("numeric"), r.randint(0, 2)),
                        lambda: "CAST(%s AS NUMERIC)" % e("int"), lambda: "abs(%s)" % e("numeric")],
            "double": [lambda: "(%s %s %s)" % (e("double"), r.choice("+-*/"), e(r.choice(["int", "double"]))),
                       lambda: "CAST(%s AS DOUBLE PRECISION)" % e(r.choice(["int", "bigint"])),
                       lambda: "sqrt(abs(%s))" % e("double"), lambda: "floor(%s)" % e("double")],
            "text": [lambda: "(%s || %s)" % (e("text"), e("text")), lambda: "upper(%s)" % e("text"),
                     lambda: "lower(%s)" % e("text"), lambda: "substr(%s, %d, %d)" % (e("text"), r.randint(0, 3), r.randint(0, 3)),
                     lambda: "replace(%s, 'a', 'é')" % e("text"), lambda: "left(%s, %d)" % (e("text"), r.randint(-2, 3)),
                     lambda: "CAST(%s AS TEXT)" % e(r.choice(["int", "bigint", "numeric", "double", "date",
                                                             "timestamp", "timestamptz", "interval"])),
                     lambda: "CAST(%s AS TEXT)" % self.col(scope, "bool") if self.col(scope, "bool")
                     else self.lit("text"),
                     lambda: "reverse(%s)" % e("text"), lambda: "lpad(%s, 4, '*')" % e("text")],
            "bool": [lambda: self.cmp(scope, depth), lambda: self.cmp(scope, depth),
                     lambda: "(%s IS %sNULL)" % (e(r.choice(KINDS)), r.choice(["", "NOT "])),
                     lambda: "(NOT %s)" % e("bool"),
                     lambda: "(%s %s %s)" % (e("bool"), r.choice(["AND", "OR"]), e("bool")),
                     lambda: "(%s LIKE %s)" % (e("text"), r.choice(["'a%'", "'%b%'", "'_'", "'h_llo'", "''"])),
                     lambda: self.between(scope, depth), lambda: self.inlist(scope, depth)],
            "date": [lambda: "(%s %s %s)" % (e("date"), r.choice("+-"), e("int")),
                     lambda: "CAST(%s AS DATE)" % e("timestamp")],
            "timestamp": [lambda: "(%s %s %s)" % (e("timestamp"), r.choice("+-"), e("interval")),
                          lambda: "date_trunc('%s', %s)" % (r.choice(["hour", "day", "month", "year"]), e("timestamp")),
                          lambda: "CAST(%s AS TIMESTAMP)" % e("date"), lambda: "(%s + %s)" % (e("date"), e("interval"))],
            "timestamptz": [lambda: "(%s %s %s)" % (e("timestamptz"), r.choice("+-"), e("interval")),
                            lambda: "date_trunc('%s', %s)" % (r.choice(["hour", "day", "month"]), e("timestamptz")),
                            lambda: "CAST(%s AS TIMESTAMPTZ)" % e("timestamp"),
                            lambda: "make_timestamptz(2024, %d, %d, %d, 30, 0)" % (
                                r.choice([3, 7, 10]), r.choice([1, 27, 31]), r.choice([0, 2, 12, 23]))],
            "interval": [lambda: "(%s %s %s)" % (e("interval"), r.choice("+-"), e("interval")),
                         lambda: "(%s * %s)" % (e("interval"), r.choice(["2", "-1", "0"])),
                         lambda: "(%s - %s)" % (e("timestamp"), e("timestamp")), lambda: "(- %s)" % e("interval")]
            + ([lambda: "(%s / 4)" % e("interval")] if r.random() < 0.1 else []),
        }
        cands = opts[kind] + (generic if kind != "bool" else [generic[0]])
        return r.choice(cands)()

    def cmp(self, scope, depth):
        k = self.r.choice(ORDERABLE + ["bool"])
        if k in NUMERIC_KINDS and self.r.random() < 0.3:
            k2 = self.r.choice(["int", "bigint"])
        else:
            k2 = k
        return "(%s %s %s)" % (self.expr(scope, k, depth + 1), self.r.choice(["=", "<>", "<", "<=", ">", ">=",
                                                                             "IS DISTINCT FROM"]),
                               self.expr(scope, k2, depth + 1))

    def between(self, scope, depth):
        k = self.r.choice(ORDERABLE)
        return "(%s %sBETWEEN %s AND %s)" % (self.expr(scope, k, depth + 1), self.r.choice(["", "NOT "]),
                                             self.lit(k), self.lit(k))

    def inlist(self, scope, depth):
        k = self.r.choice(["int", "bigint", "text", "date", "numeric"])
        return "(%s %sIN (%s))" % (self.expr(scope, k, depth + 1), self.r.choice(["", "NOT "]),
                                   ", ".join(self.r.choice(POOL[k]) if k != "numeric" else self.lit(k)
                                             for _ in range(self.r.randint(1, 4))))


def scope_of(t, alias):
    return [("%s.%s" % (alias, c), k) for c, k in t.cols] + [("%s.id" % alias, "int")]


class QueryGen:
    def __init__(self, rng, tables, aliases):
        self.r, self.tables, self.g = rng, tables, Gen(rng, aliases)

    def where(self, scope, p=0.7):
        return " WHERE %s" % self.g.expr(scope, "bool", 1) if self.r.random() < p else ""

    def proj(self, scope, n=None):
        n = n or self.r.randint(1, 4)
        items, kinds = [], []
        for j in range(n):
            k = self.r.choice(KINDS)
            items.append("%s AS c%d" % (self.g.expr(scope, k), j))
            kinds.append(k)
        return items, kinds

    def order(self, n, p=0.35):
        if self.r.random() >= p:
            return "", False
        keys = []
        for j in self.r.sample(range(1, n + 1), n):
            keys.append("%d%s%s" % (j, self.r.choice(["", " ASC", " DESC"]),
                                    self.r.choice(["", "", " NULLS FIRST", " NULLS LAST"])))
        s = " ORDER BY " + ", ".join(keys)
        if self.r.random() < 0.05:
            s += " LIMIT ALL"
        elif self.r.random() < 0.7:
            s += " LIMIT %d" % self.r.randint(0, 6)
            if self.r.random() < 0.4:
                s += " OFFSET %d" % self.r.randint(0, 4)
        return s, True

    def query(self):
        shape = self.r.choice(["filter", "filter", "distinct", "group", "group", "agg", "join", "join", "join",
                               "subq", "subq", "setop", "setop", "fromsub", "literal", "literal", "datepart"])
        return getattr(self, "q_" + shape)()

    def q_filter(self):
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a")
        items, _ = self.proj(sc)
        o, ordered = self.order(len(items))
        return "SELECT %s FROM %s a%s%s" % (", ".join(items), t.name, self.where(sc), o), ordered

    def q_distinct(self):
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a")
        items, _ = self.proj(sc, self.r.randint(1, 2))
        o, ordered = self.order(len(items))
        return "SELECT DISTINCT %s FROM %s a%s%s" % (", ".join(items), t.name, self.where(sc, 0.4), o), ordered

    def aggs(self, sc):
        out = []
        for j in range(self.r.randint(1, 3)):
            k = self.r.choice(KINDS)
            c = self.g.col(sc, k) or "a.id"
            k = k if self.g.col(sc, k) else "int"
            choices = ["count(*)", "count(%s)" % c, "count(DISTINCT %s)" % c]
            if k in NUMERIC_KINDS:
                choices += ["sum(%s)" % c, "sum(%s)" % c]
                if k in ("numeric", "double"):
                    choices.append("avg(%s)" % c)
            if k in ORDERABLE:
                choices += ["min(%s)" % c, "max(%s)" % c]
            if k == "bool":
                choices += ["bool_and(%s)" % c, "bool_or(%s)" % c]
            a = self.r.choice(choices)
            if self.r.random() < 0.15:
                a += " FILTER (WHERE %s)" % self.g.expr(sc, "bool", 1)
            out.append("%s AS a%d" % (a, j))
        return out

    def q_group(self):
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a")
        gcols = self.r.sample([c for c, _ in sc if not c.endswith(".id")], self.r.randint(1, 2))
        items = ["%s AS g%d" % (c, j) for j, c in enumerate(gcols)] + self.aggs(sc)
        having = " HAVING count(*) > %d" % self.r.randint(0, 2) if self.r.random() < 0.3 else ""
        o, ordered = self.order(len(items))
        return "SELECT %s FROM %s a%s GROUP BY %s%s%s" % (", ".join(items), t.name, self.where(sc, 0.4),
                                                          ", ".join(gcols), having, o), ordered

    def num(self, scope, depth=0):
        """A random number expression built from bare literals (integer literals that fit int4, int8
        or neither, decimal literals with a point or an exponent: PostgreSQL's literal typing) and
        number columns, with + - * /, unary minus, round, abs and casts: the class of issue 17's
        "7.0 / 2" (each result's type is compared as well as its value)."""
        r = self.r
        if depth >= 2 or r.random() < 0.3:
            x = r.random()
            if x < 0.45:
                return r.choice(LIT_DECIMALS)
            if x < 0.7:
                return r.choice(LIT_INTEGERS)
            c = self.g.col(scope, r.choice(NUMERIC_KINDS)) if scope else None
            return c or r.choice(LIT_DECIMALS)
        e = lambda: self.num(scope, depth + 1)  # noqa: E731
        return r.choice([
            lambda: "(%s %s %s)" % (e(), r.choice("+-*/"), e()),
            lambda: "(%s %s %s)" % (e(), r.choice("+-*/"), e()),
            lambda: "(- %s)" % e(),
            lambda: "round(%s)" % e(),
            lambda: "round(CAST(%s AS NUMERIC), %d)" % (e(), r.randint(-1, 3)),
            lambda: "round(%s, %d)" % (r.choice(LIT_DECIMALS), r.randint(0, 3)),
            lambda: "abs(%s)" % e(),
            lambda: "CAST(%s AS DOUBLE PRECISION)" % e(),
            lambda: "CAST(%s AS NUMERIC(12,3))" % e(),
            lambda: "CASE WHEN %s THEN %s ELSE %s END" % (self.g.expr(scope, "bool", 2) if scope else
                                                          r.choice(["true", "false"]), e(), e()),
        ])()

    def q_literal(self):
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a") if self.r.random() < 0.6 else []
        n = self.r.randint(1, 2)
        items = []
        for j in range(n):
            x = self.num(sc)
            items += ["%s AS c%d" % (x, j), "CAST(pg_typeof(%s) AS TEXT) AS t%d" % (x, j)]
        if not sc:
            return "SELECT %s" % ", ".join(items), False
        where = " WHERE %s %s %s" % (self.num(sc), self.r.choice(["<", ">", "="]), self.r.choice(LIT_DECIMALS)) \
            if self.r.random() < 0.3 else ""
        return "SELECT %s FROM %s a%s" % (", ".join(items), t.name, where), False

    def q_datepart(self):
        """extract (numeric since PostgreSQL 14) and date_part (double precision) with their types."""
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a")
        src = self.g.col(sc, self.r.choice(["timestamp", "timestamptz", "date", "interval"])) or self.g.lit("timestamp")
        kind = [k for c, k in sc if c == src]
        # The fields each type has (another is an error in both engines, weir's at planning: over
        # no rows PostgreSQL would not raise it).
        fields = {"date": ["year", "month", "day", "dow", "doy", "quarter", "epoch"],
                  "interval": ["year", "month", "day", "hour", "minute", "second", "epoch", "quarter",
                               "millisecond"]}.get(kind[0] if kind else "timestamp",
                                                   ["year", "month", "day", "hour", "minute", "second", "epoch",
                                                    "dow", "doy", "quarter", "millisecond"])
        f = self.r.choice(fields)
        items = ["extract(%s FROM %s) AS c0" % (f, src), "CAST(pg_typeof(extract(%s FROM %s)) AS TEXT) AS t0" % (f, src)]
        if not kind or kind[0] != "date":
            items += ["date_part('%s', %s) AS c1" % (f, src),
                      "CAST(pg_typeof(date_part('%s', %s)) AS TEXT) AS t1" % (f, src)]
        return "SELECT %s FROM %s a" % (", ".join(items), t.name), False

    def q_agg(self):
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a")
        return "SELECT %s FROM %s a%s" % (", ".join(self.aggs(sc)), t.name, self.where(sc, 0.5)), False

    def join_pair(self):
        t1, t2 = self.r.choice(self.tables), self.r.choice(self.tables)
        s1, s2 = scope_of(t1, "a"), scope_of(t2, "b")
        common = sorted({k for _, k in s1} & {k for _, k in s2} - {"double"})
        k = self.r.choice(common)
        return t1, t2, s1, s2, self.g.col(s1, k), self.g.col(s2, k)

    def q_join(self):
        t1, t2, s1, s2, c1, c2 = self.join_pair()
        sc = s1 + s2
        kind = self.r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "comma"])
        on_extra = " AND %s" % self.g.expr(sc, "bool", 1) if self.r.random() < 0.25 and kind == "JOIN" else ""
        if kind == "comma":
            frm = "%s a, %s b WHERE %s = %s" % (t1.name, t2.name, c1, c2)
            w = self.where(sc, 0.4).replace(" WHERE ", " AND ", 1)
        else:
            frm = "%s a %s %s b ON %s = %s%s" % (t1.name, kind, t2.name, c1, c2, on_extra)
            w = self.where(sc, 0.4 if kind == "JOIN" else 0.2)
        if self.r.random() < 0.3:
            g = self.r.choice([c for c, _ in sc])
            items = ["%s AS g0" % g] + self.aggs(sc)
            return "SELECT %s FROM %s%s GROUP BY %s" % (", ".join(items), frm, w, g), False
        items, _ = self.proj(sc)
        o, ordered = self.order(len(items))
        return "SELECT %s FROM %s%s%s" % (", ".join(items), frm, w, o), ordered

    def q_subq(self):
        t1, t2, s1, s2, c1, c2 = self.join_pair()
        items, _ = self.proj(s1)
        form = self.r.choice(["in", "exists", "scalar"])
        if form == "in":
            cond = "%s %sIN (SELECT %s FROM %s b%s)" % (c1, self.r.choice(["", "NOT "]), c2, t2.name,
                                                        self.where(s2, 0.5))
        elif form == "exists":
            inner = " AND %s" % self.g.expr(s2, "bool", 1) if self.r.random() < 0.5 else ""
            cond = "%sEXISTS (SELECT 1 FROM %s b WHERE %s = %s%s)" % (self.r.choice(["", "NOT "]), t2.name, c2, c1,
                                                                      inner)
        else:
            k = self.r.choice(["int", "bigint", "numeric", "text", "date"])
            v = self.g.col(s2, k) or "b.id"
            agg = self.r.choice(["count(*)", "max(%s)" % v, "min(%s)" % v])
            corr = " WHERE %s = %s" % (c2, c1) if self.r.random() < 0.6 else ""
            items.append("(SELECT %s FROM %s b%s) AS sq" % (agg, t2.name, corr))
            cond = self.g.expr(s1, "bool", 1) if self.r.random() < 0.5 else "true"
        o, ordered = self.order(len(items))
        return "SELECT %s FROM %s a WHERE %s%s" % (", ".join(items), t1.name, cond, o), ordered

    def q_setop(self):
        t1, t2 = self.r.choice(self.tables), self.r.choice(self.tables)
        s1, s2 = scope_of(t1, "a"), scope_of(t2, "b")
        n = self.r.randint(1, 2)
        kinds = [self.r.choice(KINDS) for _ in range(n)]
        left = ", ".join("%s AS c%d" % (self.g.expr(s1, k), j) for j, k in enumerate(kinds))
        right = ", ".join(self.g.expr(s2, k) for k in kinds)
        o, ordered = self.order(n)
        return "SELECT %s FROM %s a%s %s SELECT %s FROM %s b%s%s" % (
            left, t1.name, self.where(s1, 0.5), self.r.choice(SETOPS), right, t2.name, self.where(s2, 0.5), o), ordered

    def q_fromsub(self):
        t = self.r.choice(self.tables)
        sc = scope_of(t, "a")
        items, kinds = self.proj(sc, self.r.randint(1, 3))
        inner = "SELECT %s FROM %s a%s" % (", ".join(items), t.name, self.where(sc, 0.5))
        xs = [("x.c%d" % j, k) for j, k in enumerate(kinds)]
        if self.r.random() < 0.5:
            g = xs[0][0]
            # count() of every column, so that PostgreSQL evaluates them all as weir does.
            outer = ["%s AS g0" % g, "count(*) AS n"] + ["count(%s) AS n%d" % (c, j) for j, (c, _) in enumerate(xs[1:])]
            nk = [x for x in xs[1:] if x[1] in NUMERIC_KINDS]
            if nk:
                outer.append("max(%s) AS m" % nk[0][0])
            return "SELECT %s FROM (%s) x GROUP BY %s" % (", ".join(outer), inner, g), False
        o, ordered = self.order(len(xs))
        return "SELECT %s FROM (%s) x%s%s" % (", ".join(c for c, _ in xs), inner, self.where(xs, 0.5), o), ordered


# --- comparison -----------------------------------------------------------------------------

_IV_PART = re.compile(r"([+-]?\d+) (year|mon|day)s?")
_IV_TIME = re.compile(r"([+-])?(\d+):(\d\d):(\d\d(?:\.\d+)?)")


def interval_key(s):
    """An interval's text as Postgres compares it: months as 30 days, days as 24 hours."""
    us = 0
    for n, unit in _IV_PART.findall(s):
        us += int(n) * {"year": 360, "mon": 30, "day": 1}[unit] * 86400 * 10**6
    m = _IV_TIME.search(s)
    if m:
        t = (int(m.group(2)) * 3600 + int(m.group(3)) * 60) * 10**6 + int(decimal.Decimal(m.group(4)) * 10**6)
        us += -t if m.group(1) == "-" else t
    return "iv:%d" % us


def canon(v, fw, fp, peer=False):
    """The text compared for one value: a column of families fw (weir) and fp (PostgreSQL)."""
    if v is None:
        return None
    fams = {fw, fp}
    if fams <= {"float4", "float8"}:
        try:
            return "%.12g" % (float(v) + 0.0)   # -0 and 0 are equal (max may pick either)
        except ValueError:
            return v
    if len(fams) > 1 and fams <= {"int2", "int4", "int8", "numeric", "float4", "float8"}:
        try:
            return "%.9g" % float(v)
        except ValueError:
            return v
    if peer and "interval" in fams:
        return interval_key(v)
    if peer and "numeric" in fams:
        try:
            return str(decimal.Decimal(v).normalize())
        except decimal.InvalidOperation:
            return v
    return v


def canon_rows(res, fams_w, fams_p, peer=False):
    return [tuple(canon(v, fw, fp, peer) for v, fw, fp in zip(row, fams_w, fams_p)) for row in res.rows]


def sort_key(row):
    return tuple((0, "") if v is None else (1, v) for v in row)


def compare(w, p, ordered, query):
    """The differences between weir's Result w and PostgreSQL's p, as signature lines."""
    if w.state == "CRASH":
        return ["crash: %s" % w.msg]
    if not w.ok or not p.ok:
        if w.ok != p.ok:
            if not w.ok and w.state == "0A000":
                return ["unsupported: weir 0A000 %s" % w.msg]
            return ["error: weir=%s | pg=%s" % (w.describe(), p.describe())]
        if w.state[:2] != p.state[:2]:
            return ["error-class: weir=%s | pg=%s" % (w.describe(), p.describe())]
        return []
    out = []
    if len(w.oids) != len(p.oids):
        return ["columns: weir %d, pg %d" % (len(w.oids), len(p.oids))]
    fw = [dw.family(o) for o in w.oids]
    fp = [dw.family(o) for o in p.oids]
    for j, (a, b) in enumerate(zip(fw, fp)):
        if a != b:
            out.append("type: column %d weir=%s pg=%s" % (j + 1, a, b))
    limited = ordered and re.search(r"\b(LIMIT|OFFSET) \d+\s*$", query)
    rw, rp = canon_rows(w, fw, fp), canon_rows(p, fw, fp)
    if ordered:
        # Peers (1.5 and 1.50, '1 day' and '24 hours') may come in either order.
        if canon_rows(w, fw, fp, True) != canon_rows(p, fw, fp, True):
            out.append("order: rows differ in order or content")
        elif not limited and sorted(rw, key=sort_key) != sorted(rp, key=sort_key):
            out.append("rows: same order of peers, different values")
    elif sorted(rw, key=sort_key) != sorted(rp, key=sort_key):
        # min() and max() over peers (1.5 and 1.50, '1 day' and '24 hours') may return either.
        peers_only = re.search(r"\b(min|max)\(", query) and \
            sorted(canon_rows(w, fw, fp, True), key=sort_key) == sorted(canon_rows(p, fw, fp, True), key=sort_key)
        if not peers_only:
            out.append("rows: multisets differ (weir %d rows, pg %d rows)" % (len(rw), len(rp)))
    return out


def signature(query, w, p, d, data=""):
    """The text intended.txt and known_defects.txt match: the query, both outcomes, the difference
    and both engines' rows (one per line, values joined by ' | ')."""
    rows = lambda r: "".join("  %s\n" % " | ".join("NULL" if v is None else v for v in row)  # noqa: E731
                             for row in (r.rows or [])[:200])
    return "query: %s\nweir: %s\npg: %s\ndiff: %s\ndata: %s\nweir rows:\n%spg rows:\n%s" % (
        query, w.describe(), p.describe(), d, data, rows(w), rows(p))


def show_rows(res, limit=12):
    if not res.ok:
        return "  " + res.describe()
    lines = ["  | ".join("NULL" if v is None else v for v in r) for r in res.rows[:limit]]
    if len(res.rows) > limit:
        lines.append("... %d rows" % len(res.rows))
    return "\n".join("    " + (l or "(empty row)") for l in lines) if lines else "    (no rows)"


# --- driver ---------------------------------------------------------------------------------

def tables_in(query, tables):
    return [t for t in tables if re.search(r"\b%s\b" % t.name, query)]


def setup(server, pg, tables, zone):
    for conn in (server.conn, pg.conn):
        r = dw.run(conn, "SET TIME ZONE '%s'" % zone)
        if not r.ok:
            raise RuntimeError("SET TIME ZONE: " + r.describe())
    for t in tables:
        for sql in (t.ddl(), t.insert()):
            if sql is None:
                continue
            rp, rw = dw.run(pg.conn, sql), dw.run(server.conn, sql)
            if not rp.ok:
                raise RuntimeError("PostgreSQL refused %s: %s" % (sql[:200], rp.describe()))
            if not rw.ok:
                raise RuntimeError("weir refused %s: %s" % (sql[:200], rw.describe()))


def both(server, pg, query):
    w = dw.run(server.conn, query)
    if w.state == "CRASH":
        server.reconnect()
        dw.run(server.conn, "SET TIME ZONE '%s'" % server.zone)
    p = dw.run(pg.conn, query)
    if p.state == "CRASH":
        pg.conn = pg.connect()
        dw.run(pg.conn, "SET TIME ZONE '%s'" % server.zone)
        dw.run(pg.conn, "SET statement_timeout = '10s'")
    return w, p


def pg_skipped_rows(pg, query, w, p):
    """True when weir's data error w comes from rows PostgreSQL's plan (answer p) never evaluates:
    a WHERE without columns it checks once before reading (a One-Time Filter that was false: p
    has no rows), an outer WHERE it pushed into a subquery in FROM (fenced with OFFSET 0,
    PostgreSQL then raises the same class of error), or min/max read from the primary key's
    index and stopped at the first row that passes (an InitPlan; without index scans
    PostgreSQL raises the same class of error). SQL leaves that order open; both answers are
    right."""
    e = dw.run(pg.conn, "EXPLAIN " + query)
    if e.ok and not p.rows and any("One-Time Filter:" in r[0] for r in e.rows):
        return True
    if e.ok and any("InitPlan" in r[0] for r in e.rows) and any("Index" in r[0] for r in e.rows):
        dw.run(pg.conn, "SET enable_indexscan = off")
        dw.run(pg.conn, "SET enable_indexonlyscan = off")
        dw.run(pg.conn, "SET enable_bitmapscan = off")
        try:
            f = dw.run(pg.conn, query)
        finally:
            for g in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
                dw.run(pg.conn, "RESET " + g)
        if not f.ok and f.state[:2] == w.state[:2]:
            return True
    if ") x" in query:
        f = dw.run(pg.conn, query.replace(") x", " OFFSET 0) x", 1))
        return not f.ok and f.state[:2] == w.state[:2]
    return False


def shrink(server, pg, tables, query, ordered, still_fails):
    """Deletes rows of the query's tables one at a time (in both engines) while the difference
    persists; returns the rows left per table. Bounded: at most 120 tries."""
    tries = 0
    for t in tables_in(query, tables):
        for rid in sorted(t.rows):
            if tries >= 120:
                return
            tries += 1
            sql = "DELETE FROM %s WHERE id = %d" % (t.name, rid)
            if not (dw.run(server.conn, sql).ok and dw.run(pg.conn, sql).ok):
                continue
            w, p = both(server, pg, query)
            if still_fails(w, p, compare(w, p, ordered, query)):
                del t.rows[rid]
            else:
                ins = t.insert([rid])
                dw.run(server.conn, ins)
                dw.run(pg.conn, ins)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weir", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--queries", type=int, default=500, help="queries per round")
    ap.add_argument("--rounds", type=int, default=8, help="rounds, each with a new schema and rows")
    ap.add_argument("--tables", type=int, default=3)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=0, help="stop starting rounds after this long")
    ap.add_argument("--no-shrink", action="store_true", help="print failing queries over all rows")
    ap.add_argument("--only", type=int, default=None, help="run only query number N of each round (a repro)")
    ap.add_argument("--verbose", action="store_true", help="print every query and known difference")
    a = ap.parse_args()
    dw.exit_on_signals()

    here = os.path.dirname(os.path.abspath(__file__))
    exp = dw.Expectations(os.path.join(here, "intended.txt"), os.path.join(here, "known_defects.txt"))
    started = time.time()
    pg = dw.Pg()
    server = None
    counts = {"queries": 0, "same": 0, "intended": 0, "known": 0, "failed": 0, "both_error": 0, "pg_plan_error": 0,
              "pg_elided": 0}
    failures = []
    try:
        for rnd in range(a.rounds):
            if a.minutes and time.time() - started > a.minutes * 60:
                break
            seed = a.seed + rnd
            rng = random.Random(seed)
            aliases = rng.random() < 0.5
            tables = gen_schema(rng, a.tables, a.rows, aliases)
            zone = rng.choice(ZONES)
            data = "interval aliases" if aliases else "no interval aliases"
            db = "r%d" % rnd
            dw.run(pg.conn, "DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public")
            if server is not None:
                server.stop()
            server = dw.Server(a.weir)
            server.zone = zone
            dw.run(pg.conn, "SET statement_timeout = '10s'")
            setup(server, pg, tables, zone)
            dw.log("round %d: seed %d, zone %s, tables %s" % (rnd, seed, zone,
                                                             "; ".join(t.ddl()[13:] for t in tables)))
            qg = QueryGen(rng, tables, aliases)
            for qi in range(a.queries):
                query, ordered = qg.query()
                if a.only is not None and qi != a.only:
                    continue
                counts["queries"] += 1
                w, p = both(server, pg, query)
                if not w.ok and not p.ok:
                    counts["both_error"] += 1
                diffs = compare(w, p, ordered, query)
                if diffs and w.ok and not p.ok and p.state.startswith("22"):
                    # PostgreSQL folds constant expressions when it plans: an error raised there
                    # says nothing about the rows, so weir (which evaluates per row) may rightly
                    # not raise it.
                    e = dw.run(pg.conn, "EXPLAIN " + query)
                    if e.state == p.state:
                        counts["pg_plan_error"] += 1
                        continue
                if diffs and p.ok and not w.ok and w.state.startswith("22") and pg_skipped_rows(pg, query, w, p):
                    counts["pg_elided"] += 1
                    continue
                if not diffs:
                    counts["same"] += 1
                    continue
                verdicts = []
                for d in diffs:
                    sig = signature(query, w, p, d, data)
                    verdicts.append((d, exp.lookup(sig)))
                unexplained = [d for d, v in verdicts if v is None]
                if not unexplained:
                    kind = "known" if any(v[0] == "known" for _, v in verdicts) else "intended"
                    counts[kind] += 1
                    if a.verbose:
                        dw.log("%s (%s): %s" % (kind, ", ".join(v[1] for _, v in verdicts), query))
                    continue
                counts["failed"] += 1
                repro_tables = [(t.name, t.ddl(), dict(t.rows)) for t in tables_in(query, tables)]
                if not a.no_shrink and server.alive() and len(failures) < 5:
                    key = unexplained[0].split(":")[0]
                    shrink(server, pg, tables, query, ordered,
                           lambda w, p, ds: any(d.split(":")[0] == key and exp.lookup(
                               signature(query, w, p, d, data)) is None for d in ds))
                    w, p = both(server, pg, query)
                    shrunk = [(t.name, t.ddl(), dict(t.rows)) for t in tables_in(query, tables)]
                    # Put the deleted rows back for the queries that follow.
                    for name, _, rows in repro_tables:
                        t = [x for x in tables if x.name == name][0]
                        missing = sorted(set(rows) - set(t.rows))
                        t.rows.update({i: rows[i] for i in missing})
                        ins = t.insert(missing)
                        if ins:
                            dw.run(server.conn, ins)
                            dw.run(pg.conn, ins)
                    repro_tables = shrunk
                lines = ["DIFFERENCE (round %d, seed %d, query %d): %s" % (rnd, seed, qi, "; ".join(unexplained)),
                         "-- repro (session time zone %s):" % zone, "SET TIME ZONE '%s';" % zone]
                for name, ddl, rows in repro_tables:
                    lines.append(ddl + ";")
                    t = Table(name, [x for x in tables if x.name == name][0].cols, rows)
                    ins = t.insert()
                    if ins:
                        lines.append(ins + ";")
                lines += [query + ";", "-- weir: " + w.describe(), show_rows(w), "-- postgres: " + p.describe(),
                          show_rows(p)]
                failures.append("\n".join(lines))
                print("\n".join("# " + l for l in "\n".join(lines).splitlines()))
                sys.stdout.flush()
    finally:
        if server is not None:
            server.stop()
        pg.stop()
    dw.log("%(queries)d queries: %(same)d same (%(both_error)d of them errors in both), %(intended)d intended "
           "differences, %(known)d known defects, %(failed)d new differences, %(pg_plan_error)d skipped (an error "
           "PostgreSQL raised when planning), %(pg_elided)d skipped (rows PostgreSQL's plan never evaluated)" % counts)
    for (kind, name), n in sorted(exp.hits.items()):
        dw.log("  %s %s: %d" % (kind, name, n))
    dw.log("%.0f s" % (time.time() - started))
    ok = counts["failed"] == 0 and (counts["same"] > counts["queries"] // 2 or a.only is not None)
    print("%s 1 - pg_diff: %d queries, %d new differences" % ("ok" if ok else "not ok", counts["queries"],
                                                              counts["failed"]))
    print("1..1")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
