/*
 * tokenize.c: the SQL tokenizer, shaped like SQLite's sqlite3GetToken():
 * one call reads one token and returns its length and type. It allocates
 * nothing and never fails: bytes that start no token come back as
 * TK_ILLEGAL, unterminated strings, quoted identifiers and comments as
 * TK_UNTERM_*, and the driver (parse_sql) turns those into errors.
 *
 * A 128-entry class table decides what a leading byte can start. Bytes
 * >= 0x80 are identifier characters, as in Postgres, so UTF-8 names work
 * without decoding; positions are counted in characters by the driver.
 * Keywords are found by binary search in a sorted table.
 */
#include <string.h>

#include "parse.h"
#include "parser_int.h"

/* Character classes of a token's first byte. */
enum {
    CC_SPACE, CC_ALPHA, CC_DIGIT, CC_QUOTE, CC_DQUOTE, CC_E, CC_DOLLAR, CC_MINUS, CC_SLASH,
    CC_LT, CC_GT, CC_EQ, CC_BANG, CC_PIPE, CC_COLON, CC_DOT, CC_COMMA, CC_SEMI, CC_LP, CC_RP,
    CC_PLUS, CC_STAR, CC_PERCENT, CC_CARET, CC_TILDE, CC_NUL, CC_ILLEGAL,
};

static const unsigned char char_class_ascii[128] = {
    /*         x0          x1          x2          x3          x4          x5          x6          x7
     *         x8          x9          xa          xb          xc          xd          xe          xf */
    /* 0x */ CC_NUL,     CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL,
             CC_ILLEGAL, CC_SPACE,   CC_SPACE,   CC_SPACE,   CC_SPACE,   CC_SPACE,   CC_ILLEGAL, CC_ILLEGAL,
    /* 1x */ CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL,
             CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL,
    /* 2x */ CC_SPACE,   CC_BANG,    CC_DQUOTE,  CC_ILLEGAL, CC_DOLLAR,  CC_PERCENT, CC_ILLEGAL, CC_QUOTE,
             CC_LP,      CC_RP,      CC_STAR,    CC_PLUS,    CC_COMMA,   CC_MINUS,   CC_DOT,     CC_SLASH,
    /* 3x */ CC_DIGIT,   CC_DIGIT,   CC_DIGIT,   CC_DIGIT,   CC_DIGIT,   CC_DIGIT,   CC_DIGIT,   CC_DIGIT,
             CC_DIGIT,   CC_DIGIT,   CC_COLON,   CC_SEMI,    CC_LT,      CC_EQ,      CC_GT,      CC_ILLEGAL,
    /* 4x */ CC_ILLEGAL, CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_E,       CC_ALPHA,   CC_ALPHA,
             CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,
    /* 5x */ CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,
             CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ILLEGAL, CC_ILLEGAL, CC_ILLEGAL, CC_CARET,   CC_ALPHA,
    /* 6x */ CC_ILLEGAL, CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_E,       CC_ALPHA,   CC_ALPHA,
             CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,
    /* 7x */ CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ALPHA,
             CC_ALPHA,   CC_ALPHA,   CC_ALPHA,   CC_ILLEGAL, CC_PIPE,    CC_ILLEGAL, CC_TILDE,   CC_ILLEGAL,
};

/* UTF-8 lead and continuation bytes (>= 0x80) are identifier characters. */
#define CHAR_CLASS(c) ((c) < 0x80 ? char_class_ascii[(c)] : CC_ALPHA)

/* Bytes that may continue an identifier: letters, digits, '_', '$', >= 0x80. */
static int is_ident_char(unsigned char c)
{
    int cc = CHAR_CLASS(c);
    return cc == CC_ALPHA || cc == CC_E || cc == CC_DIGIT || cc == CC_DOLLAR;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* A dollar-quoted string, $$...$$ or $tag$...$tag$ (the tag an identifier
 * without '$'), as in Postgres: nothing inside is an escape. Returns its
 * length with *type TK_STRING, or TK_UNTERM_STRING to the end of input. */
static int dollar_quoted(const unsigned char *z, int *type)
{
    int t = 1;
    while (z[t] && z[t] != '$' && is_ident_char(z[t]) && !(t == 1 && is_digit(z[t])))
        t++;
    if (z[t] != '$') {
        *type = TK_ILLEGAL;
        return 1;
    }
    t++; /* the opening delimiter is z[0..t) */
    for (int i = t; z[i]; i++)
        if (z[i] == '$' && strncmp((const char *)z + i, (const char *)z, (size_t)t) == 0) {
            *type = TK_STRING;
            return i + t;
        }
    *type = TK_UNTERM_STRING;
    return (int)strlen((const char *)z);
}

/* Keywords, sorted by name (ASCII upper case) for binary search. The plural
 * interval units (DAYS, MINUTES, ...) are the same tokens as the singular:
 * Flink SQL writes INTERVAL '10' MINUTES. */
static const struct {
    const char *name;
    int code;
} keywords[] = {
    {"ABORT", TK_ABORT}, {"ALL", TK_ALL}, {"ALLOW", TK_ALLOW}, {"ALTER", TK_ALTER},
    {"ANALYZE", TK_ANALYZE}, {"AND", TK_AND}, {"APPEND", TK_APPEND}, {"AS", TK_AS}, {"ASC", TK_ASC}, {"AT", TK_AT},
    {"BEGIN", TK_BEGIN}, {"BETWEEN", TK_BETWEEN}, {"BOTH", TK_BOTH}, {"BY", TK_BY}, {"CASCADE", TK_CASCADE},
    {"CASE", TK_CASE}, {"CAST", TK_CAST}, {"CHANGES", TK_CHANGES}, {"CHARACTER", TK_CHARACTER},
    {"CHECKPOINT", TK_CHECKPOINT}, {"CLOSE", TK_CLOSE}, {"COMMIT", TK_COMMIT}, {"COPY", TK_COPY},
    {"CREATE", TK_CREATE}, {"CROSS", TK_CROSS}, {"CURRENT_DATE", TK_CURRENT_DATE}, {"CURRENT_TIMESTAMP", TK_CURRENT_TIMESTAMP}, {"CURSOR", TK_CURSOR},
    {"DAY", TK_DAY}, {"DAYS", TK_DAY}, {"DECLARE", TK_DECLARE}, {"DEFAULT", TK_DEFAULT}, {"DELETE", TK_DELETE}, {"DESC", TK_DESC},
    {"DISTINCT", TK_DISTINCT}, {"DOUBLE", TK_DOUBLE}, {"DROP", TK_DROP}, {"ELSE", TK_ELSE},
    {"EMIT", TK_EMIT}, {"ENCODE", TK_ENCODE}, {"END", TK_END}, {"ESCAPE", TK_ESCAPE},
    {"EXCEPT", TK_EXCEPT}, {"EXISTS", TK_EXISTS}, {"EXPLAIN", TK_EXPLAIN},
    {"EXTRACT", TK_EXTRACT}, {"FALSE", TK_FALSE}, {"FETCH", TK_FETCH}, {"FILTER", TK_FILTER}, {"FIRST", TK_FIRST},
    {"FLUSH", TK_FLUSH}, {"FOR", TK_FOR}, {"FORMAT", TK_FORMAT}, {"FROM", TK_FROM},
    {"FULL", TK_FULL}, {"GROUP", TK_GROUP}, {"HAVING", TK_HAVING}, {"HOUR", TK_HOUR}, {"HOURS", TK_HOUR},
    {"IF", TK_IF}, {"ILIKE", TK_ILIKE}, {"IN", TK_IN}, {"INCLUDE", TK_INCLUDE},
    {"INNER", TK_INNER}, {"INSERT", TK_INSERT}, {"INTERSECT", TK_INTERSECT},
    {"INTERVAL", TK_INTERVAL}, {"INTO", TK_INTO}, {"IS", TK_IS}, {"JOIN", TK_JOIN},
    {"KEY", TK_KEY}, {"LAST", TK_LAST}, {"LATE", TK_LATE}, {"LATENESS", TK_LATENESS},
    {"LEADING", TK_LEADING},
    {"LEFT", TK_LEFT}, {"LIKE", TK_LIKE}, {"LIMIT", TK_LIMIT}, {"LOCAL", TK_LOCAL}, {"LOCALTIMESTAMP", TK_LOCALTIMESTAMP},
    {"MATERIALIZED", TK_MATERIALIZED}, {"MINUTE", TK_MINUTE}, {"MINUTES", TK_MINUTE}, {"MONTH", TK_MONTH}, {"MONTHS", TK_MONTH},
    {"NOT", TK_NOT}, {"NULL", TK_NULL}, {"NULLS", TK_NULLS}, {"OF", TK_OF},
    {"OFFSET", TK_OFFSET}, {"ON", TK_ON}, {"ONLY", TK_ONLY}, {"OR", TK_OR},
    {"ORDER", TK_ORDER}, {"OUTER", TK_OUTER}, {"OVER", TK_OVER}, {"PARTITION", TK_PARTITION}, {"PASSWORD", TK_PASSWORD},
    {"PRECISION", TK_PRECISION}, {"PRIMARY", TK_PRIMARY}, {"RECURSIVE", TK_RECURSIVE},
    {"RENAME", TK_RENAME}, {"REPLACE", TK_REPLACE},
    {"RESET", TK_RESET}, {"RESTRICT", TK_RESTRICT}, {"RIGHT", TK_RIGHT},
    {"ROLLBACK", TK_ROLLBACK}, {"ROWS", TK_ROWS}, {"SAVEPOINT", TK_SAVEPOINT}, {"SECOND", TK_SECOND}, {"SECONDS", TK_SECOND},
    {"SELECT", TK_SELECT},
    {"SESSION", TK_SESSION}, {"SET", TK_SET}, {"SHOW", TK_SHOW}, {"SIMILAR", TK_SIMILAR}, {"SINK", TK_SINK},
    {"SOURCE", TK_SOURCE}, {"START", TK_START}, {"STDOUT", TK_STDOUT},
    {"STREAM", TK_STREAM}, {"SUBSCRIBE", TK_SUBSCRIBE}, {"SYSTEM", TK_SYSTEM},
    {"SYSTEM_TIME", TK_SYSTEM_TIME}, {"TABLE", TK_TABLE}, {"THEN", TK_THEN}, {"TIME", TK_TIME},
    {"TO", TK_TO}, {"TRAILING", TK_TRAILING}, {"TRANSACTION", TK_TRANSACTION}, {"TRUE", TK_TRUE}, {"UNION", TK_UNION},
    {"UNKNOWN", TK_UNKNOWN}, {"UPDATE", TK_UPDATE}, {"USER", TK_USER}, {"USING", TK_USING}, {"VALUES", TK_VALUES},
    {"VARYING", TK_VARYING}, {"VERIFY", TK_VERIFY}, {"VIEW", TK_VIEW}, {"WATERMARK", TK_WATERMARK}, {"WHEN", TK_WHEN},
    {"WHERE", TK_WHERE}, {"WINDOW", TK_WINDOW}, {"WITH", TK_WITH}, {"WITHOUT", TK_WITHOUT},
    {"WORK", TK_WORK}, {"YEAR", TK_YEAR}, {"YEARS", TK_YEAR}, {"ZONE", TK_ZONE},
};

#define N_KEYWORDS ((int)(sizeof keywords / sizeof keywords[0]))
#define MAX_KEYWORD_LEN 17   /* CURRENT_TIMESTAMP */

int parse_keyword_code(const char *z, int n)
{
    char up[MAX_KEYWORD_LEN + 1];
    if (n > MAX_KEYWORD_LEN)
        return TK_ID;
    for (int i = 0; i < n; i++) {
        char ch = z[i];
        up[i] = (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
    }
    up[n] = 0;
    int lo = 0, hi = N_KEYWORDS - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(up, keywords[mid].name);
        if (c == 0)
            return keywords[mid].code;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return TK_ID;
}

/* A quoted run starting at z[0] == q; doubled quotes escape. With
 * backslashes (E'...'), a backslash escapes the next byte. Returns the length
 * including both quotes, or -length with *type set when unterminated. */
static int quoted(const unsigned char *z, unsigned char q, int backslashes)
{
    int i = 1;
    for (;;) {
        unsigned char c = z[i];
        if (c == 0)
            return -i;
        if (backslashes && c == '\\') {
            if (z[i + 1] == 0)
                return -(i + 1);
            i += 2;
            continue;
        }
        if (c == q) {
            if (z[i + 1] == q) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i++;
    }
}

static int number(const unsigned char *z, int *type)
{
    int i = 0;
    *type = TK_INTEGER;
    while (is_digit(z[i]))
        i++;
    if (z[i] == '.' && !(z[i + 1] == '.')) {
        i++;
        *type = TK_FLOAT;
        while (is_digit(z[i]))
            i++;
    }
    if ((z[i] == 'e' || z[i] == 'E') &&
        (is_digit(z[i + 1]) || ((z[i + 1] == '+' || z[i + 1] == '-') && is_digit(z[i + 2])))) {
        i += 2;
        *type = TK_FLOAT;
        while (is_digit(z[i]))
            i++;
    }
    return i;
}

int parse_get_token(const unsigned char *z, int *type)
{
    int i, n;
    switch (CHAR_CLASS(*z)) {
    case CC_NUL:
        *type = TK_SPACE;
        return 0;
    case CC_SPACE:
        for (i = 1; CHAR_CLASS(z[i]) == CC_SPACE; i++) {
        }
        *type = TK_SPACE;
        return i;
    case CC_MINUS:
        if (z[1] == '-') {
            for (i = 2; z[i] && z[i] != '\n'; i++) {
            }
            *type = TK_SPACE;
            return i;
        }
        if (z[1] == '>') {   /* the JSON operators -> and ->> */
            *type = z[2] == '>' ? TK_ARROW2 : TK_ARROW;
            return z[2] == '>' ? 3 : 2;
        }
        *type = TK_MINUS;
        return 1;
    case CC_SLASH:
        if (z[1] == '*') {
            int depth = 1;   /* comments nest, as in Postgres */
            for (i = 2; depth > 0; i++) {
                if (z[i] == 0) {
                    *type = TK_UNTERM_COMMENT;
                    return i;
                }
                if (z[i] == '*' && z[i + 1] == '/') {
                    depth--;
                    i++;
                } else if (z[i] == '/' && z[i + 1] == '*') {
                    depth++;
                    i++;
                }
            }
            *type = TK_SPACE;
            return i;
        }
        *type = TK_SLASH;
        return 1;
    case CC_QUOTE:
        n = quoted(z, '\'', 0);
        *type = n > 0 ? TK_STRING : TK_UNTERM_STRING;
        return n > 0 ? n : -n;
    case CC_DQUOTE:
        n = quoted(z, '"', 0);
        *type = n > 0 ? TK_ID : TK_UNTERM_IDENT;
        return n > 0 ? n : -n;
    case CC_E:
        if (z[1] == '\'') {
            n = quoted(z + 1, '\'', 1);
            *type = n > 0 ? TK_STRING : TK_UNTERM_STRING;
            return 1 + (n > 0 ? n : -n);
        }
        /* fall through */
    case CC_ALPHA:
        for (i = 1; is_ident_char(z[i]); i++) {
        }
        *type = parse_keyword_code((const char *)z, i);
        return i;
    case CC_DIGIT:
        return number(z, type);
    case CC_DOT:
        if (is_digit(z[1]))
            return number(z, type);
        *type = TK_DOT;
        return 1;
    case CC_DOLLAR:
        if (is_digit(z[1])) {
            for (i = 1; is_digit(z[i]); i++) {
            }
            *type = TK_PARAM;
            return i;
        }
        return dollar_quoted(z, type);
    case CC_LT:
        if (z[1] == '=') {
            *type = TK_LE;
            return 2;
        }
        if (z[1] == '>') {
            *type = TK_NE;
            return 2;
        }
        *type = TK_LT;
        return 1;
    case CC_GT:
        if (z[1] == '=') {
            *type = TK_GE;
            return 2;
        }
        *type = TK_GT;
        return 1;
    case CC_EQ:
        *type = TK_EQ;
        return 1;
    case CC_BANG:
        if (z[1] == '=') {
            *type = TK_NE;
            return 2;
        }
        if (z[1] == '~') {   /* the regular expression operators !~ and !~* */
            *type = z[2] == '*' ? TK_NTILDE_STAR : TK_NTILDE;
            return z[2] == '*' ? 3 : 2;
        }
        *type = TK_ILLEGAL;
        return 1;
    case CC_TILDE:   /* ~ and ~* */
        *type = z[1] == '*' ? TK_TILDE_STAR : TK_TILDE;
        return z[1] == '*' ? 2 : 1;
    case CC_PIPE:
        if (z[1] == '|') {
            *type = TK_CONCAT;
            return 2;
        }
        *type = TK_ILLEGAL;
        return 1;
    case CC_COLON:
        if (z[1] == ':') {
            *type = TK_DCOLON;
            return 2;
        }
        *type = TK_ILLEGAL;
        return 1;
    case CC_COMMA: *type = TK_COMMA; return 1;
    case CC_SEMI: *type = TK_SEMI; return 1;
    case CC_LP: *type = TK_LP; return 1;
    case CC_RP: *type = TK_RP; return 1;
    case CC_PLUS: *type = TK_PLUS; return 1;
    case CC_STAR: *type = TK_STAR; return 1;
    case CC_PERCENT: *type = TK_REM; return 1;
    case CC_CARET: *type = TK_CARET; return 1;
    default:
        *type = TK_ILLEGAL;
        return 1;
    }
}
