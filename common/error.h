/*
 * error.h: errors that carry a SQLSTATE, a message and a source position.
 *
 * Compile-time phases (parse, bind, plan) record the first error on a
 * WError and later phases check it once; run-time code returns negative
 * ints and fills a WError when the caller wants to show a message. The
 * position is a 1-based character offset into the statement text (what
 * the Postgres ErrorResponse 'P' field wants), 0 when there is none.
 */
#ifndef WEIR_COMMON_ERROR_H
#define WEIR_COMMON_ERROR_H

#include <stdarg.h>
#include <stdbool.h>

/* SQLSTATEs used across modules. */
#define SQLSTATE_SYNTAX_ERROR        "42601"
#define SQLSTATE_UNDEFINED_TABLE     "42P01"
#define SQLSTATE_UNDEFINED_COLUMN    "42703"
#define SQLSTATE_UNDEFINED_FUNCTION  "42883"
#define SQLSTATE_UNDEFINED_OBJECT    "42704"
#define SQLSTATE_DUPLICATE_COLUMN    "42701"
#define SQLSTATE_INVALID_COLUMN_REFERENCE "42P10"
#define SQLSTATE_INVALID_ROW_COUNT   "2201W"
#define SQLSTATE_DUPLICATE_OBJECT    "42710"
#define SQLSTATE_DUPLICATE_TABLE     "42P07"
#define SQLSTATE_AMBIGUOUS_COLUMN    "42702"
#define SQLSTATE_DATATYPE_MISMATCH   "42804"
#define SQLSTATE_GROUPING_ERROR      "42803"
#define SQLSTATE_INVALID_PARAMETER   "22023"
#define SQLSTATE_INVALID_TEXT        "22P02"
#define SQLSTATE_DATETIME_FORMAT     "22007"  /* invalid_datetime_format: 'abc'::date */
#define SQLSTATE_DATETIME_OVERFLOW   "22008"  /* datetime_field_overflow: '2023-02-30'::date, year 0 */
#define SQLSTATE_NUMERIC_RANGE       "22003"
#define SQLSTATE_DIVISION_BY_ZERO    "22012"
#define SQLSTATE_NOT_SUPPORTED       "0A000"
#define SQLSTATE_PROTOCOL_VIOLATION  "08P01"
#define SQLSTATE_INTERNAL            "XX000"
#define SQLSTATE_DATA_CORRUPTED      "XX001"  /* data_corrupted: a record or stored value that cannot be decoded */
#define SQLSTATE_IO_ERROR            "58030"
#define SQLSTATE_OUT_OF_MEMORY       "53200"
#define SQLSTATE_PROGRAM_LIMIT       "54000"
#define SQLSTATE_INVALID_REGEX       "2201B"
#define SQLSTATE_INVALID_ESCAPE      "22025"  /* invalid_escape_sequence: E'\u12', LIKE ... ESCAPE 'ab' */
#define SQLSTATE_BAD_ENCODING        "22021"  /* character_not_in_repertoire: invalid UTF-8, a zero byte */
#define SQLSTATE_TOO_COMPLEX         "54001"  /* statement_too_complex: nesting or parser stack limit */
#define SQLSTATE_DEPENDENT_OBJECTS   "2BP01"
#define SQLSTATE_WRONG_OBJECT_TYPE   "42809"
#define SQLSTATE_INVALID_NAME        "42602"
#define SQLSTATE_CONNECTION_FAILURE  "08006"
#define SQLSTATE_TXN_RESOLUTION_UNKNOWN "08007" /* sent, but whether it was written is unknown */
#define SQLSTATE_QUERY_CANCELED      "57014"
#define SQLSTATE_OBJECT_NOT_IN_STATE "55000"
#define SQLSTATE_FEATURE_NOT_SUPPORTED SQLSTATE_NOT_SUPPORTED

typedef struct WError {
    bool set;           /* true once an error has been recorded */
    char sqlstate[6];   /* five characters and a NUL */
    int pos;            /* 1-based character position in the SQL text, 0 = none */
    char msg[512];      /* primary message, no trailing period (Postgres style) */
    char detail[512];   /* optional detail, "" when none */
    char hint[256];     /* optional hint, "" when none */
} WError;

/* Clear e so it can be reused. */
void werr_clear(WError *e);

/* Record an error on e unless one is already recorded (the first error wins,
 * as in SQLite). Always returns -1 so callers can write `return werr(...)`. */
int werr(WError *e, const char *sqlstate, int pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int werr_v(WError *e, const char *sqlstate, int pos, const char *fmt, va_list ap);

/* Set the detail or hint of an already-recorded error. */
void werr_detail(WError *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void werr_hint(WError *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
