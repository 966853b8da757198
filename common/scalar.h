/*
 * scalar.h: the semantics of every scalar function and operator, one value
 * at a time.
 *
 * The binder resolves an operator or function call to one ScalarFn by its
 * argument types (after implicit casts), so each id has exactly one
 * meaning. scalar_call() is the reference implementation, used for
 * constant folding in the planner and by the runtime for anything it has
 * no vectorized kernel for; the runtime's kernels must agree with it (the
 * runtime tests compare them).
 */
#ifndef WEIR_COMMON_SCALAR_H
#define WEIR_COMMON_SCALAR_H

#include "types.h"

typedef enum ScalarFn {
    FN_NONE = 0,
    /* integer arithmetic (int2/int4/int8; overflow is checked against the result type) */
    FN_ADD_I, FN_SUB_I, FN_MUL_I, FN_DIV_I, FN_MOD_I, FN_NEG_I,
    /* floating point arithmetic */
    FN_ADD_F, FN_SUB_F, FN_MUL_F, FN_DIV_F, FN_NEG_F, FN_POW_F,
    /* time arithmetic */
    FN_TS_ADD_IV, FN_TS_SUB_IV, FN_TS_SUB_TS, FN_IV_ADD_IV, FN_IV_SUB_IV, FN_IV_NEG,
    FN_IV_MUL_F, FN_DATE_ADD_I, FN_DATE_SUB_I, FN_DATE_SUB_DATE,
    /* comparison (both arguments of one type after coercion) */
    FN_EQ, FN_NE, FN_LT, FN_LE, FN_GT, FN_GE,
    /* three-valued logic */
    FN_AND, FN_OR, FN_NOT,
    FN_IS_NULL, FN_IS_NOT_NULL, FN_IS_TRUE, FN_IS_NOT_TRUE, FN_IS_FALSE, FN_IS_NOT_FALSE,
    FN_IS_DISTINCT, FN_IS_NOT_DISTINCT,
    /* text */
    FN_CONCAT, FN_LOWER, FN_UPPER, FN_LENGTH, FN_LIKE, FN_ILIKE,
    /* misc */
    FN_CAST,        /* args[0] to the call's result type */
    FN_CASE,        /* when0, then0, ..., [else]: odd n_args has an else */
    FN_COALESCE,
    FN_ABS_I, FN_ABS_F,
    FN_IN,          /* args[0] IN (args[1..]) */
    FN__COUNT
} ScalarFn;

const char *scalar_fn_name(ScalarFn fn);   /* "+", "=", "lower", ... for EXPLAIN */
bool scalar_fn_is_infix(ScalarFn fn);

/*
 * Computes fn(args[0..n)) as a value of type result. Strings produced are
 * allocated in a. Returns 0, or -1 with err set (22003 overflow, 22012
 * division by zero, 22P02/22007 bad cast input).
 * Functions that are not strict (AND, OR, IS..., COALESCE, CASE) handle
 * NULL arguments themselves; all others return NULL for any NULL argument.
 */
int scalar_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err);

/* Casts v to type t (explicit CAST semantics). */
int scalar_cast(const Value *v, TypeId t, Arena *a, Value *out, WError *err);

/* SQL LIKE matching (with '\' as the escape character). */
bool like_match(const char *s, size_t n, const char *p, size_t m, bool icase);

#endif
