/* row.c: see row.h. */
#include "row.h"

#include <math.h>
#include "numeric.h"

#include <string.h>

/* Value encoding: tag byte = type id, or 0x80|type for NULL, then the
 * payload: I64 8 bytes, F64 8 bytes, IV 16 bytes, STR u32 length + bytes,
 * NUM the scale byte and the 16-byte coefficient (high half first)
 * (all little-endian host order is avoided: big-endian throughout). */
void row_encode(Buf *out, const Value *vals, int n)
{
    for (int i = 0; i < n; i++) {
        const Value *v = &vals[i];
        unsigned char tmp[16];
        if (v->null) {
            buf_put_u8(out, (uint8_t)(0x80 | v->type));
            continue;
        }
        buf_put_u8(out, (uint8_t)v->type);
        switch (type_phys(v->type)) {
        case PHYS_I64: put_be64(tmp, (uint64_t)v->u.i); buf_append(out, tmp, 8); break;
        case PHYS_F64: {
            uint64_t w;
            memcpy(&w, &v->u.f, 8);
            put_be64(tmp, w);
            buf_append(out, tmp, 8);
            break;
        }
        case PHYS_STR:
            buf_put_u32be(out, v->u.s.len);
            buf_append(out, v->u.s.p, v->u.s.len);
            break;
        case PHYS_IV:
            put_be64(tmp, (uint64_t)v->u.iv.usecs);
            buf_append(out, tmp, 8);
            buf_put_u32be(out, (uint32_t)v->u.iv.days);
            buf_put_u32be(out, (uint32_t)v->u.iv.months);
            break;
        case PHYS_NUM:
            buf_put_u8(out, v->nscale);
            put_be64(tmp, v->u.n.hi);
            buf_append(out, tmp, 8);
            put_be64(tmp, v->u.n.lo);
            buf_append(out, tmp, 8);
            break;
        }
    }
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int row_decode_prefix(const void *vp, size_t len, Value *vals, int n, size_t *used)
{
    const unsigned char *p = vp, *end = p + len;
    for (int i = 0; i < n; i++) {
        if (p >= end)
            return -1;
        uint8_t tag = *p++;
        TypeId t = (TypeId)(tag & 0x7f);
        if (t >= TYPE__COUNT)
            return -1;
        vals[i] = value_null(t);
        if (tag & 0x80)
            continue;
        vals[i].null = false;
        switch (type_phys(t)) {
        case PHYS_I64:
            if (end - p < 8)
                return -1;
            vals[i].u.i = (int64_t)get_be64(p);
            p += 8;
            break;
        case PHYS_F64: {
            if (end - p < 8)
                return -1;
            uint64_t w = get_be64(p);
            memcpy(&vals[i].u.f, &w, 8);
            p += 8;
            break;
        }
        case PHYS_STR: {
            if (end - p < 4)
                return -1;
            uint32_t l = get_be32(p);
            p += 4;
            if ((size_t)(end - p) < l)
                return -1;
            vals[i].u.s.p = (const char *)p;
            vals[i].u.s.len = l;
            p += l;
            break;
        }
        case PHYS_IV:
            if (end - p < 16)
                return -1;
            vals[i].u.iv.usecs = (int64_t)get_be64(p);
            vals[i].u.iv.days = (int32_t)get_be32(p + 8);
            vals[i].u.iv.months = (int32_t)get_be32(p + 12);
            p += 16;
            break;
        case PHYS_NUM:
            if (end - p < 17 || p[0] > NUM_MAX_DIGITS)
                return -1;
            vals[i].nscale = p[0];
            vals[i].u.n.hi = get_be64(p + 1);
            vals[i].u.n.lo = get_be64(p + 9);
            p += 17;
            break;
        }
    }
    *used = (size_t)(p - (const unsigned char *)vp);
    return 0;
}

int row_decode(const void *vp, size_t len, Value *vals, int n)
{
    size_t used;
    if (row_decode_prefix(vp, len, vals, n, &used))
        return -1;
    return used == len ? 0 : -1;
}

/* Key encoding: 0x00 for NULL (sorts first), 0x01 then the payload:
 * I64 big-endian with the sign bit flipped; F64 IEEE bits flipped so that
 * negative numbers sort below positive; STR with 0x00 escaped as 0x00 0xFF
 * and terminated by 0x00 0x00; IV as the 30-day-month total (16 bytes) and
 * then the fields, so equal-comparing intervals stay distinct keys; NUM
 * as num_key_encode of the value without trailing fractional zeros, so
 * 1.5 and 1.50 are one key (one GROUP BY group, one join match) and a
 * decoded key shows the shortest scale. */
/* The interval of span total (microseconds, months of 30 days) as whole
 * months, then days, then microseconds, each with total's sign; iv itself
 * when the months would not fit (spans near the type's limits). */
static Interval interval_canonical(__int128 total, const Interval *iv)
{
    const __int128 month = (__int128)30 * USECS_PER_DAY;
    __int128 m = total / month, rem = total % month;
    if (m > INT32_MAX || m < INT32_MIN)
        return *iv;
    return (Interval){.months = (int32_t)m, .days = (int32_t)(rem / USECS_PER_DAY), .usecs = (int64_t)(rem % USECS_PER_DAY)};
}

void key_encode(Buf *out, const Value *vals, int n)
{
    for (int i = 0; i < n; i++) {
        const Value *v = &vals[i];
        unsigned char tmp[8];
        if (v->null) {
            buf_put_u8(out, 0);
            continue;
        }
        buf_put_u8(out, 1);
        switch (type_phys(v->type)) {
        case PHYS_I64:
            put_be64(tmp, (uint64_t)v->u.i ^ UINT64_C(0x8000000000000000));
            buf_append(out, tmp, 8);
            break;
        case PHYS_F64: {
            /* Equal values encode alike: -0 is 0, and every NaN is one NaN
             * (above +Infinity, as Postgres sorts it). */
            double f = v->u.f == 0 ? 0.0 : isnan(v->u.f) ? NAN : v->u.f;
            uint64_t w;
            memcpy(&w, &f, 8);
            w = (w & UINT64_C(0x8000000000000000)) ? ~w : w | UINT64_C(0x8000000000000000);
            put_be64(tmp, w);
            buf_append(out, tmp, 8);
            break;
        }
        case PHYS_STR:
            for (uint32_t k = 0; k < v->u.s.len; k++) {
                buf_putc(out, v->u.s.p[k]);
                if (v->u.s.p[k] == 0)
                    buf_put_u8(out, 0xff);
            }
            buf_put_u8(out, 0);
            buf_put_u8(out, 0);
            break;
        case PHYS_IV: {
            /* Intervals are equal when their spans are (a month is 30 days,
             * a day 24 hours: '1 day' = '24 hours'), so the key is the span,
             * then the span again as canonical months, days and microseconds
             * (what key_decode gives back). The layout is the one keys had
             * when they held the value's own fields: a canonical interval
             * ('1 day', '5 minutes', '1 mon') keeps the bytes it had. */
            __int128 total = (__int128)v->u.iv.usecs +
                             ((__int128)v->u.iv.days + (__int128)v->u.iv.months * 30) * USECS_PER_DAY;
            Interval c = interval_canonical(total, &v->u.iv);
            put_be64(tmp, (uint64_t)(total >> 64) ^ UINT64_C(0x8000000000000000));
            buf_append(out, tmp, 8);
            put_be64(tmp, (uint64_t)total);
            buf_append(out, tmp, 8);
            put_be64(tmp, (uint64_t)c.usecs ^ UINT64_C(0x8000000000000000));
            buf_append(out, tmp, 8);
            buf_put_u32be(out, (uint32_t)c.days ^ 0x80000000u);
            buf_put_u32be(out, (uint32_t)c.months ^ 0x80000000u);
            break;
        }
        case PHYS_NUM: num_key_encode(num_get(v), out); break;
        }
    }
}

int key_decode(const void *vp, size_t len, const TypeId *types, int n, Arena *a, Value *vals)
{
    const unsigned char *p = vp, *end = p + len;
    for (int i = 0; i < n; i++) {
        if (p >= end)
            return -1;
        vals[i] = value_null(types[i]);
        if (*p++ == 0)
            continue;
        vals[i].null = false;
        switch (type_phys(types[i])) {
        case PHYS_I64:
            if (end - p < 8)
                return -1;
            vals[i].u.i = (int64_t)(get_be64(p) ^ UINT64_C(0x8000000000000000));
            p += 8;
            break;
        case PHYS_F64: {
            if (end - p < 8)
                return -1;
            uint64_t w = get_be64(p);
            w = (w & UINT64_C(0x8000000000000000)) ? w & ~UINT64_C(0x8000000000000000) : ~w;
            memcpy(&vals[i].u.f, &w, 8);
            p += 8;
            break;
        }
        case PHYS_STR: {
            Buf b = BUF_INIT;
            for (;;) {
                if (end - p < 1)
                    return buf_free(&b), -1;
                if (*p == 0) {
                    if (end - p < 2)
                        return buf_free(&b), -1;
                    if (p[1] == 0) {
                        p += 2;
                        break;
                    }
                    buf_putc(&b, 0);
                    p += 2;
                } else {
                    buf_putc(&b, (char)*p++);
                }
            }
            vals[i].u.s.p = arena_strndup(a, b.data ? b.data : "", b.len);
            vals[i].u.s.len = (uint32_t)b.len;
            buf_free(&b);
            break;
        }
        case PHYS_IV:
            if (end - p < 32)
                return -1;
            p += 16;
            vals[i].u.iv.usecs = (int64_t)(get_be64(p) ^ UINT64_C(0x8000000000000000));
            vals[i].u.iv.days = (int32_t)(get_be32(p + 8) ^ 0x80000000u);
            vals[i].u.iv.months = (int32_t)(get_be32(p + 12) ^ 0x80000000u);
            p += 16;
            break;
        case PHYS_NUM: {
            Numeric x;
            size_t used;
            if (num_key_decode(p, (size_t)(end - p), &x, &used))
                return -1;
            num_put(x, &vals[i]);
            p += used;
            break;
        }
        }
    }
    return 0;
}
