/*
 * scalar_int.h: the pieces of scalar_call() that live in their own files
 * (text in scalar_text.c, date/time in scalar_time.c, JSON in jsonpath.c).
 * Private to common/; everyone else calls scalar_call().
 *
 * Each *_call has scalar_call's contract, is reached only for its own
 * function ids, and may assume strictness has been handled (no NULL
 * argument reaches a strict function). *out arrives as a non-NULL value of
 * type result.
 */
#ifndef WEIR_COMMON_SCALAR_INT_H
#define WEIR_COMMON_SCALAR_INT_H

#include "scalar.h"

int scalar_text_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err);
int scalar_time_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err);
int scalar_json_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err);
int scalar_regex_call(ScalarFn fn, TypeId result, int n, const Value *args, Arena *a, Value *out, WError *err);
/* to_char and date_format (scalar_format.c): args are (timestamp[tz], pattern). */
int scalar_format_call(ScalarFn fn, const Value *args, Arena *a, Value *out, WError *err);

/* Sets out to the string p[0..len), which the caller has allocated in the
 * call's arena or borrowed from an argument. */
static inline void scalar_set_str(Value *out, const char *p, size_t len)
{
    out->u.s.p = p;
    out->u.s.len = (uint32_t)len;
}

#endif
