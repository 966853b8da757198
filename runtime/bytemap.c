/* bytemap.c: see bytemap.h. Linear probing, power-of-two slots, load <= 1/2. */
#include "bytemap.h"

#include <string.h>

#include "types.h"

void bytemap_init(ByteMap *m, Arena *a)
{
    memset(m, 0, sizeof *m);
    m->a = a;
}

static void grow(ByteMap *m)
{
    int cap = m->cap ? m->cap * 2 : 64;
    int *slots = arena_zalloc(m->a, sizeof(int) * (size_t)cap);
    for (int i = 0; i < m->n; i++) {
        uint64_t h = m->entries[i].hash;
        int s = (int)(h & (uint64_t)(cap - 1));
        while (slots[s])
            s = (s + 1) & (cap - 1);
        slots[s] = i + 1;
    }
    m->slots = slots;
    m->cap = cap;
}

ByteMapEntry *bytemap_get(ByteMap *m, const void *key, size_t klen, int create, int *created)
{
    if (created)
        *created = 0;
    if (m->cap == 0) {
        if (!create)
            return NULL;
        grow(m);
    }
    uint64_t h = hash_bytes(key, klen, 0x77);
    int s = (int)(h & (uint64_t)(m->cap - 1));
    while (m->slots[s]) {
        ByteMapEntry *e = &m->entries[m->slots[s] - 1];
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
        s = (s + 1) & (m->cap - 1);
    }
    if (!create)
        return NULL;
    if ((m->n + 1) * 2 > m->cap) {
        grow(m);
        return bytemap_get(m, key, klen, create, created);
    }
    if (m->n == m->ecap) {
        int ecap = m->ecap ? m->ecap * 2 : 32;
        ByteMapEntry *ne = arena_alloc(m->a, sizeof *ne * (size_t)ecap);
        if (m->n)
            memcpy(ne, m->entries, sizeof *ne * (size_t)m->n);
        m->entries = ne;
        m->ecap = ecap;
    }
    ByteMapEntry *e = &m->entries[m->n];
    memset(e, 0, sizeof *e);
    e->hash = h;
    e->key = arena_strndup(m->a, key, klen);
    e->klen = klen;
    m->slots[s] = ++m->n;
    if (created)
        *created = 1;
    return e;
}
