// main.go PORT: Go's database/sql with lib/pq (golang-github-lib-pq-dev) against a running
// weir, run by drivers_test.py (built offline: GOPATH=/usr/share/gocode, GO111MODULE=off).
// lib/pq prepares each parameterized query (Parse, Describe) and sends the parameters as
// text, except []byte in binary when binary_parameters=yes (used here); every common type,
// NULLs, a materialized view, a prepared statement run twice, a transaction, an error that
// leaves the session usable. Prints one "ok - what" / "not ok - what: detail" line per check.
package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/lib/pq"
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

// The test row's values, k first, in column order.
func row(k int64) []interface{} {
	return []interface{}{k, int16(32767), int32(-2147483648), int64(9007199254740993), "12345.6789", 2.5,
		"h\u00e9llo 'quoted'", true, ts, ts, "2024-02-29", "1 day 02:03:04", []byte{0, 0xff}, `{"a": [1, 2]}`}
}

func main() {
	dsn := fmt.Sprintf("host=127.0.0.1 port=%s user=weir dbname=weir sslmode=disable binary_parameters=yes", os.Args[1])
	db, err := sql.Open("postgres", dsn)
	if err == nil {
		err = db.Ping()
	}
	check(err == nil, "lib/pq: connects", err)
	if err != nil {
		os.Exit(1)
	}
	db.SetMaxOpenConns(1)
	attempt("lib/pq: CREATE TABLE and MATERIALIZED VIEW", func() interface{} {
		if _, err := db.Exec(`CREATE TABLE gq (k BIGINT PRIMARY KEY, i2 SMALLINT, i4 INT, i8 BIGINT, n NUMERIC,
			f DOUBLE PRECISION, s TEXT, b BOOLEAN, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, iv INTERVAL, by BYTEA, j JSONB)`); err != nil {
			return err
		}
		_, err := db.Exec("CREATE MATERIALIZED VIEW gq_v AS SELECT k, s, n FROM gq WHERE b")
		return err
	})
	attempt("lib/pq: INSERT with a parameter of every type, and NULLs", func() interface{} {
		q := "INSERT INTO gq VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
		if _, err := db.Exec(q, row(1)...); err != nil {
			return err
		}
		nulls := make([]interface{}, 14)
		nulls[0] = int64(2)
		_, err := db.Exec(q, nulls...)
		return err
	})
	attempt("lib/pq: every type read back equal", func() interface{} {
		var k, i8 int64
		var i2, i4 int32
		var n, s, d, iv, j string
		var f float64
		var b bool
		var t1, t2 time.Time
		var by []byte
		err := db.QueryRow("SELECT * FROM gq WHERE k = $1", 1).Scan(&k, &i2, &i4, &i8, &n, &f, &s, &b, &t1, &t2, &d, &iv, &by, &j)
		if err != nil {
			return err
		}
		got := []interface{}{k, i2, i4, i8, n, f, s, b, t1.UTC(), t2.UTC(), d[:10], iv, by, j}
		want := []interface{}{int64(1), int32(32767), int32(-2147483648), int64(9007199254740993), "12345.6789", 2.5,
			"h\u00e9llo 'quoted'", true, ts, ts, "2024-02-29", "1 day 02:03:04", []byte{0, 0xff}, `{"a": [1, 2]}`}
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("got %v", got)
		}
		return nil
	})
	attempt("lib/pq: a parameter of every type in WHERE", func() interface{} {
		var k int64
		err := db.QueryRow(`SELECT k FROM gq WHERE k = $1 AND i2 = $2 AND i4 = $3 AND i8 = $4 AND n = $5 AND f = $6
			AND s = $7 AND b = $8 AND ts = $9 AND tz = $10 AND d = $11 AND iv = $12 AND by = $13 AND j = $14`, row(1)...).Scan(&k)
		if err != nil {
			return err
		}
		if k != 1 {
			return k
		}
		return nil
	})
	attempt("lib/pq: NULLs read back", func() interface{} {
		var i4 sql.NullInt32
		var s sql.NullString
		var t pq.NullTime
		var by []byte
		if err := db.QueryRow("SELECT i4, s, ts, by FROM gq WHERE k = $1", 2).Scan(&i4, &s, &t, &by); err != nil {
			return err
		}
		if i4.Valid || s.Valid || t.Valid || by != nil {
			return fmt.Sprint(i4, s, t, by)
		}
		return nil
	})
	attempt("lib/pq: a prepared statement on the view, run twice", func() interface{} {
		st, err := db.Prepare("SELECT s FROM gq_v WHERE k = $1 AND n > $2")
		if err != nil {
			return err
		}
		defer st.Close()
		var s string
		if err := st.QueryRow(1, "1.5").Scan(&s); err != nil || s != "h\u00e9llo 'quoted'" {
			return fmt.Sprint(s, err)
		}
		if err := st.QueryRow(2, "1.5").Scan(&s); err != sql.ErrNoRows {
			return fmt.Sprint("second run: ", err)
		}
		return nil
	})
	attempt("lib/pq: a transaction", func() interface{} {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec("INSERT INTO gq (k, s) VALUES ($1, $2)", 3, "txn"); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		var s string
		if err := db.QueryRow("SELECT s FROM gq WHERE k = $1", 3).Scan(&s); err != nil || s != "txn" {
			return fmt.Sprint(s, err)
		}
		return nil
	})
	attempt("lib/pq: errors (42P01, 22012 in a transaction) leave the session usable", func() interface{} {
		var pe *pq.Error
		_, err := db.Query("SELECT * FROM no_such_table WHERE k = $1", 1)
		if !errors.As(err, &pe) || pe.Code != "42P01" {
			return fmt.Sprint("want 42P01: ", err)
		}
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		var x int
		err = tx.QueryRow("SELECT 1 / $1", 0).Scan(&x)
		if !errors.As(err, &pe) || pe.Code != "22012" {
			return fmt.Sprint("want 22012: ", err)
		}
		if err := tx.Rollback(); err != nil {
			return err
		}
		var n int64
		if err := db.QueryRow("SELECT count(*) FROM gq WHERE k < $1", 4).Scan(&n); err != nil || n != 3 {
			return fmt.Sprint(n, err)
		}
		return nil
	})
	db.Close()
	fmt.Println("done") // drivers_test.py: the program ran to its end
}
