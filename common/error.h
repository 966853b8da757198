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

/*
 * Every SQLSTATE weir reports, in one list: code here, never a string
 * literal in a .c file (tests/check_sqlstates.sh fails the build's tests on
 * one). Each is PostgreSQL's code for the condition (the comment gives
 * PostgreSQL's condition name, errcodes.txt), so clients that switch on
 * codes see what they would from PostgreSQL. Names that predate this list
 * keep their shorter spelling; new ones use the condition name.
 */

/* Class 00: successful completion (a NoticeResponse carries it). */
#define SQLSTATE_SUCCESSFUL_COMPLETION "00000"     /* successful_completion */
/* Class 08: connection exception. */
#define SQLSTATE_CONNECTION_FAILURE  "08006"       /* connection_failure */
#define SQLSTATE_TXN_RESOLUTION_UNKNOWN "08007"    /* transaction_resolution_unknown: sent, but whether it was written is unknown */
#define SQLSTATE_PROTOCOL_VIOLATION  "08P01"       /* protocol_violation */
/* Class 0A: feature not supported. */
#define SQLSTATE_NOT_SUPPORTED       "0A000"       /* feature_not_supported */
#define SQLSTATE_FEATURE_NOT_SUPPORTED SQLSTATE_NOT_SUPPORTED
/* Class 21: cardinality violation. */
#define SQLSTATE_CARDINALITY_VIOLATION "21000"     /* cardinality_violation: a scalar subquery with two rows */
/* Class 22: data exception. */
#define SQLSTATE_DATA_EXCEPTION      "22000"       /* data_exception */
#define SQLSTATE_NUMERIC_RANGE       "22003"       /* numeric_value_out_of_range */
#define SQLSTATE_DATETIME_FORMAT     "22007"       /* invalid_datetime_format: 'abc'::date */
#define SQLSTATE_DATETIME_OVERFLOW   "22008"       /* datetime_field_overflow: '2023-02-30'::date, year 0 */
#define SQLSTATE_SUBSTRING_ERROR     "22011"       /* substring_error */
#define SQLSTATE_DIVISION_BY_ZERO    "22012"       /* division_by_zero */
#define SQLSTATE_INVALID_ARGUMENT_FOR_LOG "2201E"  /* invalid_argument_for_logarithm */
#define SQLSTATE_INVALID_ARGUMENT_FOR_POWER "2201F" /* invalid_argument_for_power_function */
#define SQLSTATE_INVALID_REGEX       "2201B"       /* invalid_regular_expression */
#define SQLSTATE_INVALID_ROW_COUNT   "2201W"       /* invalid_row_count_in_limit_clause */
#define SQLSTATE_BAD_ENCODING        "22021"       /* character_not_in_repertoire: invalid UTF-8, a zero byte */
#define SQLSTATE_INVALID_PARAMETER   "22023"       /* invalid_parameter_value */
#define SQLSTATE_INVALID_ESCAPE      "22025"       /* invalid_escape_sequence: E'\u12', LIKE ... ESCAPE 'ab' */
#define SQLSTATE_INVALID_TEXT        "22P02"       /* invalid_text_representation */
#define SQLSTATE_INVALID_BINARY_REPRESENTATION "22P03" /* invalid_binary_representation */
#define SQLSTATE_UNTRANSLATABLE_CHARACTER "22P05"  /* untranslatable_character */
/* Class 23: integrity constraint violation. */
#define SQLSTATE_INTEGRITY_CONSTRAINT_VIOLATION "23000" /* integrity_constraint_violation */
#define SQLSTATE_NOT_NULL_VIOLATION  "23502"       /* not_null_violation */
#define SQLSTATE_FOREIGN_KEY_VIOLATION "23503"     /* foreign_key_violation */
#define SQLSTATE_UNIQUE_VIOLATION    "23505"       /* unique_violation */
#define SQLSTATE_CHECK_VIOLATION     "23514"       /* check_violation */
/* Class 25: invalid transaction state. */
#define SQLSTATE_READ_ONLY_SQL_TRANSACTION "25006" /* read_only_sql_transaction */
#define SQLSTATE_NO_ACTIVE_SQL_TRANSACTION "25P01" /* no_active_sql_transaction */
#define SQLSTATE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT "25P03" /* idle_in_transaction_session_timeout */
/* Class 26: invalid SQL statement name. */
#define SQLSTATE_INVALID_SQL_STATEMENT_NAME "26000" /* invalid_sql_statement_name: no such prepared statement */
/* Class 28: invalid authorization specification. */
#define SQLSTATE_INVALID_AUTHORIZATION "28000"     /* invalid_authorization_specification */
#define SQLSTATE_INVALID_PASSWORD    "28P01"       /* invalid_password */
/* Class 2B: dependent privilege descriptors still exist. */
#define SQLSTATE_DEPENDENT_OBJECTS   "2BP01"       /* dependent_objects_still_exist */
/* Class 34: invalid cursor name. */
#define SQLSTATE_INVALID_CURSOR_NAME "34000"       /* invalid_cursor_name: no such cursor or portal */
/* Class 40: transaction rollback. */
#define SQLSTATE_SERIALIZATION_FAILURE "40001"     /* serialization_failure: a cluster rebalance under a read; retry */
/* Class 42: syntax error or access rule violation. */
#define SQLSTATE_SYNTAX_ERROR        "42601"       /* syntax_error */
#define SQLSTATE_INVALID_NAME        "42602"       /* invalid_name */
#define SQLSTATE_DUPLICATE_COLUMN    "42701"       /* duplicate_column */
#define SQLSTATE_AMBIGUOUS_COLUMN    "42702"       /* ambiguous_column */
#define SQLSTATE_UNDEFINED_COLUMN    "42703"       /* undefined_column */
#define SQLSTATE_UNDEFINED_OBJECT    "42704"       /* undefined_object */
#define SQLSTATE_DUPLICATE_OBJECT    "42710"       /* duplicate_object */
#define SQLSTATE_DUPLICATE_ALIAS     "42712"       /* duplicate_alias */
#define SQLSTATE_GROUPING_ERROR      "42803"       /* grouping_error */
#define SQLSTATE_DATATYPE_MISMATCH   "42804"       /* datatype_mismatch */
#define SQLSTATE_WRONG_OBJECT_TYPE   "42809"       /* wrong_object_type */
#define SQLSTATE_UNDEFINED_FUNCTION  "42883"       /* undefined_function */
#define SQLSTATE_GENERATED_ALWAYS    "428C9"       /* generated_always */
#define SQLSTATE_UNDEFINED_TABLE     "42P01"       /* undefined_table */
#define SQLSTATE_UNDEFINED_PARAMETER "42P02"       /* undefined_parameter: $n past the statement's parameters */
#define SQLSTATE_DUPLICATE_CURSOR    "42P03"       /* duplicate_cursor: also a duplicate portal */
#define SQLSTATE_DUPLICATE_PREPARED_STATEMENT "42P05" /* duplicate_prepared_statement */
#define SQLSTATE_DUPLICATE_TABLE     "42P07"       /* duplicate_table */
#define SQLSTATE_INVALID_COLUMN_REFERENCE "42P10"  /* invalid_column_reference */
#define SQLSTATE_INVALID_TABLE_DEFINITION "42P16"  /* invalid_table_definition */
#define SQLSTATE_INVALID_OBJECT_DEFINITION "42P17" /* invalid_object_definition */
#define SQLSTATE_INVALID_RECURSION   "42P19"       /* invalid_recursion */
#define SQLSTATE_WINDOWING_ERROR     "42P20"       /* windowing_error */
/* Class 53: insufficient resources. */
#define SQLSTATE_DISK_FULL           "53100"       /* disk_full */
#define SQLSTATE_OUT_OF_MEMORY       "53200"       /* out_of_memory */
#define SQLSTATE_TOO_MANY_CONNECTIONS "53300"      /* too_many_connections */
/* Class 54: program limit exceeded (common/weir_limits.h). */
#define SQLSTATE_PROGRAM_LIMIT       "54000"       /* program_limit_exceeded: a size over a limit */
#define SQLSTATE_TOO_COMPLEX         "54001"       /* statement_too_complex: nesting or parser stack limit */
/* Class 55: object not in prerequisite state. */
#define SQLSTATE_OBJECT_NOT_IN_STATE "55000"       /* object_not_in_prerequisite_state */
#define SQLSTATE_OBJECT_IN_USE       "55006"       /* object_in_use */
#define SQLSTATE_LOCK_NOT_AVAILABLE  "55P03"       /* lock_not_available */
/* Class 57: operator intervention. */
#define SQLSTATE_QUERY_CANCELED      "57014"       /* query_canceled */
#define SQLSTATE_ADMIN_SHUTDOWN      "57P01"       /* admin_shutdown */
#define SQLSTATE_CANNOT_CONNECT_NOW  "57P03"       /* cannot_connect_now: a key group of a view has no live node */
#define SQLSTATE_IDLE_SESSION_TIMEOUT "57P05"      /* idle_session_timeout */
/* Class 58: system error (errors external to weir). */
#define SQLSTATE_IO_ERROR            "58030"       /* io_error */
/* Class XX: internal error. */
#define SQLSTATE_INTERNAL            "XX000"       /* internal_error */
#define SQLSTATE_DATA_CORRUPTED      "XX001"       /* data_corrupted */

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
