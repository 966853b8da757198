/* test_numeric.c: the NUMERIC core: parse, print, arithmetic, rounding,
 * the 38-digit edges, keys and the Postgres binary format. */
#include "chunk.h"
#include "numeric.h"
#include "row.h"
#include "tap.h"

#include <string.h>

static char out_[8][128];
static int outi_;
static WError err_;

/* Text of op(a, b) (or of a when op is 0), or the SQLSTATE on error. */
static const char *calc(char op, const char *a, const char *b)
{
    char *o = out_[outi_++ % 8];
    Numeric x, y = {0, 0}, r;
    werr_clear(&err_);
    if (num_parse(a, strlen(a), &x, &err_) || (b && num_parse(b, strlen(b), &y, &err_)))
        return strcpy(o, err_.sqlstate);
    int rc = 0;
    switch (op) {
    case '+': rc = num_add(x, y, &r, &err_); break;
    case '-': rc = num_sub(x, y, &r, &err_); break;
    case '*': rc = num_mul(x, y, &r, &err_); break;
    case '/': rc = num_div(x, y, &r, &err_); break;
    case '%': rc = num_mod(x, y, &r, &err_); break;
    default: r = x;
    }
    if (rc)
        return strcpy(o, err_.sqlstate);
    Buf b_ = BUF_INIT;
    num_format(r, &b_);
    snprintf(o, 128, "%s", b_.data);
    buf_free(&b_);
    return o;
}

static const char *fmt(Numeric n)
{
    char *o = out_[outi_++ % 8];
    Buf b_ = BUF_INIT;
    num_format(n, &b_);
    snprintf(o, 128, "%s", b_.data);
    buf_free(&b_);
    return o;
}

static Numeric N(const char *s)
{
    Numeric n = {0, 0};
    WError e = {0};
    num_parse(s, strlen(s), &n, &e);
    return n;
}

static const char *rnd(const char *a, int s, int mode)
{
    Numeric r;
    werr_clear(&err_);
    int rc = mode == 0 ? num_round(N(a), s, &r, &err_) : mode == 1 ? num_trunc(N(a), s, &r, &err_)
             : mode == 2 ? num_floor(N(a), &r, &err_) : num_ceil(N(a), &r, &err_);
    return rc ? err_.sqlstate : fmt(r);
}

static void test_parse_print(void)
{
    is_str(calc(0, "12.340", NULL), "12.340", "scale kept");
    is_str(calc(0, " -0.5 ", NULL), "-0.5", "spaces and sign");
    is_str(calc(0, ".5", NULL), "0.5", "leading dot");
    is_str(calc(0, "5.", NULL), "5", "trailing dot");
    is_str(calc(0, "1.5e3", NULL), "1500", "exponent");
    is_str(calc(0, "1e-3", NULL), "0.001", "negative exponent");
    is_str(calc(0, "-0", NULL), "0", "minus zero");
    is_str(calc(0, "0.000", NULL), "0.000", "zero keeps scale");
    is_str(calc(0, "00012", NULL), "12", "leading zeros");
    is_str(calc(0, "abc", NULL), "22P02", "garbage");
    is_str(calc(0, "1.2.3", NULL), "22P02", "two dots");
    is_str(calc(0, "", NULL), "22P02", "empty");
    is_str(calc(0, "1e", NULL), "22P02", "bare e");
    is_str(calc(0, "NaN", NULL), "0A000", "NaN not supported");
    is_str(calc(0, "99999999999999999999999999999999999999", NULL), "99999999999999999999999999999999999999",
           "38 nines");
    is_str(calc(0, "-99999999999999999999999999999999999999", NULL), "-99999999999999999999999999999999999999",
           "-38 nines");
    is_str(calc(0, "100000000000000000000000000000000000000", NULL), "22003", "39 digits");
    is_str(calc(0, "0.00000000000000000000000000000000000001", NULL), "0.00000000000000000000000000000000000001",
           "scale 38");
    /* Digits past the 38th after the point are rounded away (issue 17 #12). */
    is_str(calc(0, "0.000000000000000000000000000000000000001", NULL), "0.00000000000000000000000000000000000000",
           "scale 39 rounds to 0");
    is_str(calc(0, "0.000000000000000000000000000000000000005", NULL), "0.00000000000000000000000000000000000001",
           "scale 39 rounds half away from zero");
    is_str(calc(0, "-0.000000000000000000000000000000000000005", NULL), "-0.00000000000000000000000000000000000001",
           "negative rounds away from zero");
    is_str(calc(0, "1e-50", NULL), "0.00000000000000000000000000000000000000", "1e-50");
    is_str(calc(0, "0.999999999999999999999999999999999999999", NULL), "22003", "rounds up past 38 digits");
    is_str(calc(0, "5e-39", NULL), "0.00000000000000000000000000000000000001", "5e-39 rounds up");
    is_str(calc(0, "1.00000000000000000000000000000000000000000000001", NULL), "22003",
           "39 significant digits kept");
    is_str(calc(0, "1e38", NULL), "22003", "1e38");
    is_str(calc(0, "1e37", NULL), "10000000000000000000000000000000000000", "1e37");
}

static void test_arith(void)
{
    is_str(calc('+', "1.5", "2.25"), "3.75", "add scales");
    is_str(calc('-', "1.50", "2"), "-0.50", "sub keeps scale");
    is_str(calc('*', "1.5", "2.25"), "3.375", "mul adds scales");
    is_str(calc('*', "-0.10", "0.10"), "-0.0100", "mul trailing zeros");
    is_str(calc('/', "1", "3"), "0.33333333333333333333", "1/3 (select_div_scale)");
    is_str(calc('/', "10", "4"), "2.5000000000000000", "10/4");
    is_str(calc('/', "2", "3"), "0.66666666666666666667", "2/3 rounds");
    is_str(calc('/', "-2", "3"), "-0.66666666666666666667", "-2/3 rounds away");
    is_str(calc('/', "1000000", "3"), "333333.333333333333", "large/3 (Postgres 15 prints 18 digits)");
    is_str(calc('/', "12345.678", "0.001"), "12345678.000000000000", "div by small");
    is_str(calc('/', "0.001", "7"), "0.00014285714285714286", "small/7");
    is_str(calc('/', "1", "0"), "22012", "division by zero");
    is_str(calc('%', "10.5", "3"), "1.5", "mod");
    is_str(calc('%', "-10.5", "3"), "-1.5", "mod sign follows dividend");
    is_str(calc('%', "1", "0.0"), "22012", "mod by zero");
    is_str(calc('+', "99999999999999999999999999999999999999", "1"), "22003", "add overflow at 38 digits");
    is_str(calc('-', "-99999999999999999999999999999999999999", "1"), "22003", "sub overflow at 38 digits");
    is_str(calc('+', "99999999999999999999999999999999999998", "1"), "99999999999999999999999999999999999999",
           "add to the edge");
    is_str(calc('*', "10000000000000000000", "10000000000000000000"), "22003", "mul overflow");
    is_str(calc('*', "9999999999999999999", "10000000000000000000"), "99999999999999999990000000000000000000",
           "mul to 38 digits");
    is_str(calc('*', "0.0000000000000000001", "0.00000000000000000001"), "22003", "mul scale beyond 38");
    is_str(calc('/', "99999999999999999999999999999999999999", "0.1"), "22003", "div overflow");
    ok(num_cmp(N("1.5"), N("1.50")) == 0, "1.5 = 1.50");
    ok(num_cmp(N("-2"), N("1")) < 0, "-2 < 1");
    ok(num_cmp(N("-2.5"), N("-2.25")) < 0, "-2.5 < -2.25");
    ok(num_cmp(N("99999999999999999999999999999999999999"), N("0.00000000000000000000000000000000000001")) > 0,
       "cmp across extreme scales");
    ok(num_hash(N("1.5"), 7) == num_hash(N("1.50000"), 7), "equal values hash alike");
}

static void test_rounding(void)
{
    is_str(rnd("2.5", 0, 0), "3", "round half up");
    is_str(rnd("-2.5", 0, 0), "-3", "round half away from zero");
    is_str(rnd("2.449", 1, 0), "2.4", "round below half");
    is_str(rnd("1234.5", -2, 0), "1200", "round negative digits");
    is_str(rnd("1250", -2, 0), "1300", "round negative digits half");
    is_str(rnd("1.5", 3, 0), "1.500", "round up the scale");
    is_str(rnd("-2.7", 0, 1), "-2", "trunc");
    is_str(rnd("-2.1", 0, 2), "-3", "floor negative");
    is_str(rnd("2.1", 0, 3), "3", "ceil");
    is_str(rnd("-2.9", 0, 3), "-2", "ceil negative");
    is_str(rnd("4999999999999999999999999999999999999", -37, 0), "0", "round away everything");
    is_str(rnd("99999999999999999999999999999999999999", -1, 0), "22003", "round past 38 digits");
    Numeric r;
    werr_clear(&err_);
    ok(num_typmod(N("123.456"), 5, 2, &r, &err_) == 0 && strcmp(fmt(r), "123.46") == 0, "typmod rounds");
    werr_clear(&err_);
    ok(num_typmod(N("999.995"), 5, 2, &r, &err_) == -1 && strcmp(err_.sqlstate, "22003") == 0 &&
           strstr(err_.detail, "10^3"),
       "typmod overflow after rounding");
    werr_clear(&err_);
    ok(num_typmod(N("-0.5"), 2, 2, &r, &err_) == 0 && strcmp(fmt(r), "-0.50") == 0, "typmod all fraction");
    int64_t i;
    werr_clear(&err_);
    ok(num_to_int(N("2.5"), INT32_MIN, INT32_MAX, TYPE_INT4, &i, &err_) == 0 && i == 3, "to int rounds");
    ok(num_to_int(N("-32768.5"), INT16_MIN, INT16_MAX, TYPE_INT2, &i, &err_) == -1 &&
           strstr(err_.msg, "smallint out of range"),
       "to int2 range");
    werr_clear(&err_);
    ok(num_from_double(0.1, false, &r, &err_) == 0 && strcmp(fmt(r), "0.1") == 0, "from double 15 digits");
    ok(num_from_double(1.0 / 3, true, &r, &err_) == 0 && strcmp(fmt(r), "0.333333") == 0, "from real 6 digits");
    ok(num_to_double(N("0.1")) == 0.1, "to double");
}

static void test_keys_and_wire(void)
{
    const char *vals[] = {"-1000", "-2.5", "-2.25", "-0.001", "0", "0.00000000000000000000000000000000000001",
                          "0.5", "1", "1.05", "1.5", "10", "99999999999999999999999999999999999999"};
    int n = (int)(sizeof vals / sizeof vals[0]);
    Buf prev = BUF_INIT, cur = BUF_INIT;
    bool ordered = true, round = true;
    for (int k = 0; k < n; k++) {
        buf_reset(&cur);
        Value v = value_numeric(N(vals[k]));
        key_encode(&cur, &v, 1);
        if (k > 0) {
            size_t m = prev.len < cur.len ? prev.len : cur.len;
            int c = memcmp(prev.data, cur.data, m);
            if (c > 0 || (c == 0 && prev.len >= cur.len))
                ordered = false, diag("key order broken at %s", vals[k]);
        }
        Value back;
        TypeId t = TYPE_NUMERIC;
        if (key_decode(cur.data, cur.len, &t, 1, NULL, &back) || num_cmp(num_get(&back), N(vals[k])) != 0)
            round = false, diag("key roundtrip broken at %s", vals[k]);
        buf_reset(&prev);
        buf_append(&prev, cur.data, cur.len);
    }
    ok(ordered, "key encoding sorts in value order");
    ok(round, "key encoding round trips");
    Value a = value_numeric(N("1.5")), b = value_numeric(N("1.500"));
    buf_reset(&prev);
    buf_reset(&cur);
    key_encode(&prev, &a, 1);
    key_encode(&cur, &b, 1);
    ok(prev.len == cur.len && memcmp(prev.data, cur.data, prev.len) == 0, "1.5 and 1.500 are one key");

    /* row encoding keeps the display scale */
    Value rv[2] = {value_numeric(N("-12.340")), value_null(TYPE_NUMERIC)}, rb[2];
    buf_reset(&cur);
    row_encode(&cur, rv, 2);
    ok(row_decode(cur.data, cur.len, rb, 2) == 0 && strcmp(fmt(num_get(&rb[0])), "-12.340") == 0 && rb[1].null,
       "row encoding round trips with scale");

    /* Postgres binary: 12345.678 = ndigits 3, weight 1, sign 0, dscale 3, digits 1 2345 6780 */
    buf_reset(&cur);
    num_to_pgbinary(N("12345.678"), &cur);
    static const unsigned char want[] = {0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c};
    ok(cur.len == sizeof want && memcmp(cur.data, want, sizeof want) == 0, "binary 12345.678");
    const char *bv[] = {"0", "0.00", "-0.0001", "100000000", "-99999999999999999999999999999999999999",
                        "0.00000000000000000000000000000000000001", "123.4500"};
    bool brt = true;
    for (size_t k = 0; k < sizeof bv / sizeof bv[0]; k++) {
        buf_reset(&cur);
        num_to_pgbinary(N(bv[k]), &cur);
        Numeric r;
        werr_clear(&err_);
        if (num_from_pgbinary((const unsigned char *)cur.data, cur.len, &r, &err_) || strcmp(fmt(r), bv[k]))
            brt = false, diag("binary roundtrip %s: %s", bv[k], err_.msg);
    }
    ok(brt, "binary format round trips");
    static const unsigned char nan[] = {0, 0, 0, 0, 0xc0, 0, 0, 0};
    werr_clear(&err_);
    Numeric r;
    ok(num_from_pgbinary(nan, sizeof nan, &r, &err_) == -1 && strcmp(err_.sqlstate, "0A000") == 0, "binary NaN");
    static const unsigned char bad[] = {0, 1, 0, 0, 0, 0, 0, 0, 0x27, 0x10};
    werr_clear(&err_);
    ok(num_from_pgbinary(bad, sizeof bad, &r, &err_) == -1 && strcmp(err_.sqlstate, "22P02") == 0,
       "binary digit 10000 rejected");
    buf_free(&prev);
    buf_free(&cur);
}

static void test_value_size(void)
{
    ok(sizeof(Value) == 24, "Value stays 24 bytes");
    Arena *a = arena_new(0);
    TypeId t = TYPE_NUMERIC;
    Chunk *c = chunk_new(a, 1, &t, 4);
    Value v = value_numeric(N("-7.25")), back;
    chunk_append(c, OP_INSERT, &v);
    chunk_get(c, 0, 0, &back);
    is_str(fmt(num_get(&back)), "-7.25", "chunk cell round trip");
    arena_free(a);
}

int main(void)
{
    test_parse_print();
    test_arith();
    test_rounding();
    test_keys_and_wire();
    test_value_size();
    return tap_done();
}
