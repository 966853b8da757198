// main.go PORT: pgx v4 (golang-github-jackc-pgx-v4-dev), Go's native Postgres driver, against
// a running weir, run by drivers_test.py (built offline: GOPATH=/usr/share/gocode,
// GO111MODULE=off). pgx prepares every query with arguments (Parse, Describe) and encodes
// each argument in binary by the type ParameterDescription gives it, so each check depends on
// weir inferring parameter types from their context: every common type, NULLs, a materialized
// view, a prepared statement run twice, a transaction, an error that leaves the session
// usable. Prints one "ok - what" / "not ok - what: detail" line per check.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgtype"
	"github.com/jackc/pgx/v4"
)

func check(ok bool, what string, detail interface{}) {
	if ok {
		fmt.Printf("ok - %s\n", what)
		return
	}
	d := fmt.Sprint(detail)
	if len(d) > 300 {
		d = d[:300]
	}
	fmt.Printf("not ok - %s: %s\n", what, d)
}

// attempt runs a step: nil means it passed, anything else says what went wrong.
func attempt(what string, step func() interface{}) {
	r := step()
	if e, ok := r.(error); ok {
		r = e.Error()
	}
	check(r == nil, what, r)
}

var ts = time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.UTC)
var day = time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)
var iv = pgtype.Interval{Days: 1, Microseconds: (2*3600 + 3*60 + 4) * 1000000, Status: pgtype.Present}

// The test row's values, k first, in column order.
func row(k int64) []interface{} {
	return []interface{}{k, int16(32767), int32(-2147483648), int64(9007199254740993), "12345.6789", 2.5,
		"h\u00e9llo 'quoted'", true, ts, ts, day, iv, []byte{0, 0xff}, map[string]interface{}{"a": []int{1, 2}}}
}

func main() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://weir@127.0.0.1:%s/weir?sslmode=disable", os.Args[1]))
	check(err == nil, "pgx: connects", err)
	if err != nil {
		os.Exit(1)
	}
	attempt("pgx: CREATE TABLE and MATERIALIZED VIEW", func() interface{} {
		if _, err := conn.Exec(ctx, `CREATE TABLE px (k BIGINT PRIMARY KEY, i2 SMALLINT, i4 INT, i8 BIGINT, n NUMERIC,
			f DOUBLE PRECISION, s TEXT, b BOOLEAN, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, iv INTERVAL, by BYTEA, j JSONB)`); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, "CREATE MATERIALIZED VIEW px_v AS SELECT k, s, n FROM px WHERE b")
		return err
	})
	attempt("pgx: parameter types described from their context", func() interface{} {
		sd, err := conn.Prepare(ctx, "types", "SELECT k FROM px WHERE k = $1 AND i2 = $2 AND ts > $3 LIMIT $4")
		if err != nil {
			return err
		}
		want := []uint32{pgtype.Int8OID, pgtype.Int2OID, pgtype.TimestampOID, pgtype.Int8OID}
		if fmt.Sprint(sd.ParamOIDs) != fmt.Sprint(want) {
			return fmt.Sprint(sd.ParamOIDs)
		}
		return nil
	})
	attempt("pgx: INSERT with a binary parameter of every type, and NULLs", func() interface{} {
		q := "INSERT INTO px VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
		if _, err := conn.Exec(ctx, q, row(1)...); err != nil {
			return err
		}
		nulls := make([]interface{}, 14)
		nulls[0] = int64(2)
		_, err := conn.Exec(ctx, q, nulls...)
		return err
	})
	attempt("pgx: every type read back equal", func() interface{} {
		var k, i8 int64
		var i2 int16
		var i4 int32
		var n pgtype.Numeric
		var f float64
		var s string
		var b bool
		var t1, t2, d time.Time
		var gotIv pgtype.Interval
		var by []byte
		var j map[string]interface{}
		err := conn.QueryRow(ctx, "SELECT * FROM px WHERE k = $1", 1).Scan(&k, &i2, &i4, &i8, &n, &f, &s, &b, &t1, &t2, &d, &gotIv, &by, &j)
		if err != nil {
			return err
		}
		var nf float64
		n.AssignTo(&nf)
		got := fmt.Sprint(k, i2, i4, i8, nf, f, s, b, t1.UTC(), t2.UTC(), d.UTC(), gotIv.Days, gotIv.Microseconds, by, j)
		want := fmt.Sprint(int64(1), int16(32767), int32(-2147483648), int64(9007199254740993), 12345.6789, 2.5,
			"h\u00e9llo 'quoted'", true, ts, ts, day, iv.Days, iv.Microseconds, []byte{0, 0xff},
			map[string]interface{}{"a": []interface{}{float64(1), float64(2)}})
		if got != want {
			return "got " + got
		}
		return nil
	})
	attempt("pgx: a parameter of every type in WHERE", func() interface{} {
		var k int64
		err := conn.QueryRow(ctx, `SELECT k FROM px WHERE k = $1 AND i2 = $2 AND i4 = $3 AND i8 = $4 AND n = $5 AND f = $6
			AND s = $7 AND b = $8 AND ts = $9 AND tz = $10 AND d = $11 AND iv = $12 AND by = $13 AND j = $14`, row(1)...).Scan(&k)
		if err != nil {
			return err
		}
		if k != 1 {
			return k
		}
		return nil
	})
	attempt("pgx: NULLs read back", func() interface{} {
		var i4 *int32
		var s *string
		var t *time.Time
		var by []byte
		if err := conn.QueryRow(ctx, "SELECT i4, s, ts, by FROM px WHERE k = $1", 2).Scan(&i4, &s, &t, &by); err != nil {
			return err
		}
		if i4 != nil || s != nil || t != nil || by != nil {
			return fmt.Sprint(i4, s, t, by)
		}
		return nil
	})
	attempt("pgx: a prepared statement on the view, run twice", func() interface{} {
		if _, err := conn.Prepare(ctx, "onview", "SELECT s FROM px_v WHERE k = $1 AND n > $2"); err != nil {
			return err
		}
		var s string
		if err := conn.QueryRow(ctx, "onview", 1, 1.5).Scan(&s); err != nil || s != "h\u00e9llo 'quoted'" {
			return fmt.Sprint(s, err)
		}
		if err := conn.QueryRow(ctx, "onview", 2, 1.5).Scan(&s); err != pgx.ErrNoRows {
			return fmt.Sprint("second run: ", err)
		}
		return nil
	})
	attempt("pgx: $1 + 1 is an integer, $1::bigint a bigint", func() interface{} {
		var a int32
		var b int64
		if err := conn.QueryRow(ctx, "SELECT $1 + 1, $2::bigint * 2", 41, int64(1)<<40).Scan(&a, &b); err != nil {
			return err
		}
		if a != 42 || b != int64(1)<<41 {
			return fmt.Sprint(a, b)
		}
		return nil
	})
	attempt("pgx: a transaction", func() interface{} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO px (k, s) VALUES ($1, $2)", 3, "txn"); err != nil {
			tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		var s string
		if err := conn.QueryRow(ctx, "SELECT s FROM px WHERE k = $1", 3).Scan(&s); err != nil || s != "txn" {
			return fmt.Sprint(s, err)
		}
		return nil
	})
	attempt("pgx: errors (42P01, 22012 in a transaction) leave the session usable", func() interface{} {
		var pe *pgconn.PgError
		var x int
		err := conn.QueryRow(ctx, "SELECT k FROM no_such_table WHERE k = $1", 1).Scan(&x)
		if !errors.As(err, &pe) || pe.Code != "42P01" {
			return fmt.Sprint("want 42P01: ", err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, "SELECT 1 / $1", 0).Scan(&x)
		if !errors.As(err, &pe) || pe.Code != "22012" {
			return fmt.Sprint("want 22012: ", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			return err
		}
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM px WHERE k < $1", 4).Scan(&n); err != nil || n != 3 {
			return fmt.Sprint(n, err)
		}
		return nil
	})
	conn.Close(ctx)
	fmt.Println("done") // drivers_test.py: the program ran to its end
}
