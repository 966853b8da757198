// JdbcClient.java PORT: pgjdbc (libpostgresql-jdbc-java) against a running weir, run by
// drivers_test.py. PreparedStatement with every common type (prepareThreshold=1: server-side
// named statements from the first use, binary transfer where pgjdbc uses it), NULLs, a
// materialized view, setFetchSize (Execute with a row limit, PortalSuspended), the
// DatabaseMetaData calls a BI tool such as DBeaver makes on connect (getTables, getColumns), a
// transaction, an error that leaves the session usable. Prints one "ok - what" /
// "not ok - what: detail" line per check.
import java.math.BigDecimal;
import java.sql.*;
import java.time.*;
import java.util.*;

public class JdbcClient {
    interface Step { Object run() throws Exception; }

    static void check(boolean ok, String what, Object detail) {
        String d = detail == null ? "" : String.valueOf(detail);
        if (d.length() > 300) d = d.substring(0, 300);
        System.out.println((ok ? "ok" : "not ok") + " - " + what + (ok || d.isEmpty() ? "" : ": " + d));
        System.out.flush();
    }

    // A step returns Boolean.TRUE (or null) when it passed, anything else says what went wrong.
    static void attempt(String what, Step s) {
        try {
            Object r = s.run();
            check(r == null || Boolean.TRUE.equals(r), what, r);
        } catch (Exception e) {
            check(false, what, e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    static final LocalDateTime TS = LocalDateTime.of(2024, 2, 29, 13, 14, 15, 123456000);
    static final OffsetDateTime TZ = OffsetDateTime.of(TS, ZoneOffset.UTC);

    // Binds the test row's values (k, then every type) from parameter index 1.
    static void bindRow(PreparedStatement ps, long k) throws SQLException {
        ps.setLong(1, k);
        ps.setShort(2, (short) 32767);
        ps.setInt(3, Integer.MIN_VALUE);
        ps.setLong(4, 9007199254740993L);
        ps.setBigDecimal(5, new BigDecimal("12345.6789"));
        ps.setDouble(6, 2.5);
        ps.setString(7, "h\u00e9llo 'quoted'");
        ps.setBoolean(8, true);
        ps.setObject(9, TS);
        ps.setObject(10, TZ);
        ps.setObject(11, LocalDate.of(2024, 2, 29));
        ps.setObject(12, new org.postgresql.util.PGInterval(0, 0, 1, 2, 3, 4));
        ps.setBytes(13, new byte[] {0, (byte) 0xff});
        org.postgresql.util.PGobject j = new org.postgresql.util.PGobject();
        j.setType("jsonb");
        j.setValue("{\"a\": [1, 2]}");
        ps.setObject(14, j);
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/weir?user=weir&prepareThreshold=1"
            + Objects.toString(System.getenv("WEIR_JDBC_URL_EXTRA"), "");   // e.g. &loggerLevel=TRACE
        Connection c = DriverManager.getConnection(url);
        check(true, "jdbc: connects", null);
        Statement st = c.createStatement();
        attempt("jdbc: CREATE TABLE and MATERIALIZED VIEW", () -> {
            st.execute("CREATE TABLE jd (k BIGINT PRIMARY KEY, i2 SMALLINT, i4 INT, i8 BIGINT, n NUMERIC, "
                       + "f DOUBLE PRECISION, s TEXT, b BOOLEAN, ts TIMESTAMP, tz TIMESTAMPTZ, d DATE, "
                       + "iv INTERVAL, by BYTEA, j JSONB)");
            st.execute("CREATE MATERIALIZED VIEW jd_v AS SELECT k, s, n FROM jd WHERE b");
            return true;
        });
        attempt("jdbc: PreparedStatement INSERT with every type, and NULLs (setNull)", () -> {
            PreparedStatement ps = c.prepareStatement("INSERT INTO jd VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
            for (long k = 1; k <= 2; k++) {   // twice: the second run uses the named server-side statement
                bindRow(ps, k * 100);
                ps.executeUpdate();
            }
            ps.setLong(1, 2);
            int[] types = {Types.SMALLINT, Types.INTEGER, Types.BIGINT, Types.NUMERIC, Types.DOUBLE, Types.VARCHAR,
                           Types.BOOLEAN, Types.TIMESTAMP, Types.TIMESTAMP_WITH_TIMEZONE, Types.DATE, Types.OTHER,
                           Types.BINARY, Types.OTHER};
            for (int i = 0; i < types.length; i++)
                ps.setNull(i + 2, types[i]);
            return ps.executeUpdate() == 1;
        });
        attempt("jdbc: every type read back equal", () -> {
            PreparedStatement ps = c.prepareStatement("SELECT * FROM jd WHERE k = ?");
            ps.setLong(1, 100);
            ResultSet rs = ps.executeQuery();
            if (!rs.next()) return "no row";
            List<String> bad = new ArrayList<>();
            if (rs.getShort("i2") != 32767) bad.add("i2 " + rs.getShort("i2"));
            if (rs.getInt("i4") != Integer.MIN_VALUE) bad.add("i4");
            if (rs.getLong("i8") != 9007199254740993L) bad.add("i8 " + rs.getLong("i8"));
            if (rs.getBigDecimal("n").compareTo(new BigDecimal("12345.6789")) != 0) bad.add("n " + rs.getBigDecimal("n"));
            if (rs.getDouble("f") != 2.5) bad.add("f");
            if (!"h\u00e9llo 'quoted'".equals(rs.getString("s"))) bad.add("s " + rs.getString("s"));
            if (!rs.getBoolean("b")) bad.add("b");
            if (!TS.equals(rs.getObject("ts", LocalDateTime.class))) bad.add("ts " + rs.getObject("ts", LocalDateTime.class));
            if (!TZ.isEqual(rs.getObject("tz", OffsetDateTime.class))) bad.add("tz " + rs.getObject("tz", OffsetDateTime.class));
            if (!LocalDate.of(2024, 2, 29).equals(rs.getObject("d", LocalDate.class))) bad.add("d");
            if (!new org.postgresql.util.PGInterval(0, 0, 1, 2, 3, 4).equals(rs.getObject("iv"))) bad.add("iv " + rs.getString("iv"));
            if (!Arrays.equals(new byte[] {0, (byte) 0xff}, rs.getBytes("by"))) bad.add("by " + rs.getString("by"));
            if (!"{\"a\": [1, 2]}".equals(rs.getString("j"))) bad.add("j " + rs.getString("j"));
            return bad.isEmpty() ? true : bad;
        });
        attempt("jdbc: a parameter of every type in WHERE", () -> {
            PreparedStatement ps = c.prepareStatement("SELECT k FROM jd WHERE k = ? AND i2 = ? AND i4 = ? AND i8 = ? "
                + "AND n = ? AND f = ? AND s = ? AND b = ? AND ts = ? AND tz = ? AND d = ? AND iv = ? AND by = ? AND j = ?");
            List<Long> got = new ArrayList<>();
            for (int run = 0; run < 2; run++) {
                bindRow(ps, 100);
                ResultSet rs = ps.executeQuery();
                while (rs.next()) got.add(rs.getLong(1));
            }
            return got.equals(List.of(100L, 100L)) ? true : got;
        });
        attempt("jdbc: NULLs read back", () -> {
            PreparedStatement ps = c.prepareStatement("SELECT i4, s, ts, by FROM jd WHERE k = ?");
            ps.setLong(1, 2);
            ResultSet rs = ps.executeQuery();
            if (!rs.next()) return "no row";
            rs.getInt(1);
            boolean n1 = rs.wasNull();
            return n1 && rs.getString(2) == null && rs.getObject(3) == null && rs.getBytes(4) == null;
        });
        attempt("jdbc: the view, with parameters", () -> {
            PreparedStatement ps = c.prepareStatement("SELECT s FROM jd_v WHERE k = ? AND n > ?");
            ps.setLong(1, 200);
            ps.setBigDecimal(2, new BigDecimal("1.5"));
            ResultSet rs = ps.executeQuery();
            return rs.next() && "h\u00e9llo 'quoted'".equals(rs.getString(1)) && !rs.next();
        });
        attempt("jdbc: setFetchSize reads a query in batches", () -> {
            PreparedStatement ins = c.prepareStatement("INSERT INTO jd (k, s) VALUES (?, ?)");
            for (int k = 1000; k < 1025; k++) {
                ins.setLong(1, k);
                ins.setString(2, "r" + k);
                ins.addBatch();
            }
            ins.executeBatch();
            c.setAutoCommit(false);   // pgjdbc fetches in batches only inside a transaction
            PreparedStatement ps = c.prepareStatement("SELECT k FROM jd WHERE k >= ? ORDER BY k");
            ps.setFetchSize(10);
            ps.setLong(1, 1000);
            ResultSet rs = ps.executeQuery();
            long want = 1000;
            while (rs.next())
                if (rs.getLong(1) != want++) return "row " + rs.getLong(1) + " for " + (want - 1);
            c.commit();
            c.setAutoCommit(true);
            return want == 1025 ? true : "rows: " + (want - 1000);
        });
        attempt("jdbc: DatabaseMetaData.getTables and getColumns (as DBeaver calls them)", () -> {
            DatabaseMetaData md = c.getMetaData();
            Set<String> tables = new TreeSet<>();
            ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE", "VIEW", "MATERIALIZED VIEW"});
            while (rs.next()) tables.add(rs.getString("TABLE_NAME"));
            List<String> cols = new ArrayList<>();
            rs = md.getColumns(null, "public", "jd", "%");
            while (rs.next()) cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
            boolean ok = tables.contains("jd") && tables.contains("jd_v") && cols.size() == 14
                && cols.get(0).equals("k:int8") && cols.get(13).equals("j:jsonb");
            return ok ? true : tables + " " + cols;
        });
        attempt("jdbc: a transaction (setAutoCommit(false), commit)", () -> {
            c.setAutoCommit(false);
            PreparedStatement ps = c.prepareStatement("INSERT INTO jd (k, s) VALUES (?, ?)");
            ps.setLong(1, 3);
            ps.setString(2, "txn");
            ps.executeUpdate();
            c.commit();
            c.setAutoCommit(true);
            PreparedStatement q = c.prepareStatement("SELECT s FROM jd WHERE k = ?");
            q.setLong(1, 3);
            ResultSet rs = q.executeQuery();
            return rs.next() && "txn".equals(rs.getString(1));
        });
        attempt("jdbc: an error (42P01) leaves the session usable", () -> {
            try {
                PreparedStatement ps = c.prepareStatement("SELECT * FROM no_such_table WHERE k = ?");
                ps.setLong(1, 1);
                ps.executeQuery();
                return "no error";
            } catch (SQLException e) {
                if (!"42P01".equals(e.getSQLState())) return "SQLSTATE " + e.getSQLState();
            }
            c.setAutoCommit(false);
            try {
                PreparedStatement ps = c.prepareStatement("SELECT 1 / ?");
                ps.setInt(1, 0);
                ps.executeQuery();
                return "no error";
            } catch (SQLException e) {
                if (!"22012".equals(e.getSQLState())) return "SQLSTATE " + e.getSQLState();
                c.rollback();
            }
            c.setAutoCommit(true);
            PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM jd WHERE k < ?");
            ps.setLong(1, 4);
            ResultSet rs = ps.executeQuery();
            return rs.next() && rs.getLong(1) == 2;
        });
        c.close();
        System.out.println("done");   // drivers_test.py: the program ran to its end
    }
}
