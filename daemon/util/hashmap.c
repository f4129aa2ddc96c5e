/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Linear probing with backward-shift deletion: no tombstones, so lookups stay
 * short however many requests come and go. */

#include "util/hashmap.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HASHMAP_MIN_BUCKETS 16u

static uint64_t mix64(uint64_t x) {
        /* splitmix64 finaliser: spreads sequential and random cookies alike. */
        x ^= x >> 30;
        x *= UINT64_C(0xbf58476d1ce4e5b9);
        x ^= x >> 27;
        x *= UINT64_C(0x94d049bb133111eb);
        x ^= x >> 31;
        return x;
}

static uint64_t u32_hash(const void *key) {
        return mix64(*(const uint32_t *) key);
}

static bool u32_equal(const void *a, const void *b) {
        return *(const uint32_t *) a == *(const uint32_t *) b;
}

static uint64_t string_hash(const void *key) {
        /* FNV-1a; keys are bus names we were given by the bus daemon. */
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        for (const unsigned char *p = key; *p; p++) {
                h ^= *p;
                h *= UINT64_C(0x100000001b3);
        }
        return mix64(h);
}

static bool string_equal(const void *a, const void *b) {
        return strcmp(a, b) == 0;
}

static uint64_t ptr_hash(const void *key) {
        return mix64((uint64_t) (uintptr_t) key);
}

static bool ptr_equal(const void *a, const void *b) {
        return a == b;
}

const HashmapOps hashmap_u32_ops = { u32_hash, u32_equal };
const HashmapOps hashmap_ptr_ops = { ptr_hash, ptr_equal };
const HashmapOps hashmap_string_ops = { string_hash, string_equal };

void hashmap_init(Hashmap *h, const HashmapOps *ops) {
        *h = (Hashmap){ .ops = ops };
}

void hashmap_clear(Hashmap *h) {
        free(h->entries);
        h->entries = NULL;
        h->n_buckets = h->n_entries = 0;
}

static size_t find_slot(const Hashmap *h, const void *key, uint64_t hash) {
        size_t mask = h->n_buckets - 1;
        for (size_t i = hash & mask;; i = (i + 1) & mask) {
                const HashmapEntry *e = &h->entries[i];
                if (!e->key || (e->hash == hash && h->ops->equal(e->key, key)))
                        return i;
        }
}

static int resize(Hashmap *h, size_t n_buckets) {
        HashmapEntry *old = h->entries;
        size_t old_n = h->n_buckets;

        HashmapEntry *entries = calloc(n_buckets, sizeof(HashmapEntry));
        if (!entries)
                return -ENOMEM;

        h->entries = entries;
        h->n_buckets = n_buckets;
        for (size_t i = 0; i < old_n; i++)
                if (old[i].key)
                        h->entries[find_slot(h, old[i].key, old[i].hash)] = old[i];
        free(old);
        return 0;
}

int hashmap_put(Hashmap *h, const void *key, void *value) {
        assert(h && h->ops && key);
        /* Keep the load factor at or below 3/4: short probes, little memory. */
        if ((h->n_entries + 1) * 4 > h->n_buckets * 3) {
                size_t n = h->n_buckets ? h->n_buckets * 2 : HASHMAP_MIN_BUCKETS;
                int r = resize(h, n);
                if (r < 0)
                        return r;
        }

        uint64_t hash = h->ops->hash(key);
        size_t i = find_slot(h, key, hash);
        if (h->entries[i].key)
                return -EEXIST;

        h->entries[i] = (HashmapEntry){ .key = key, .value = value, .hash = hash };
        h->n_entries++;
        return 0;
}

void *hashmap_get(const Hashmap *h, const void *key) {
        assert(h && key);
        if (h->n_entries == 0)
                return NULL;

        size_t i = find_slot(h, key, h->ops->hash(key));
        return h->entries[i].key ? h->entries[i].value : NULL;
}

void *hashmap_remove(Hashmap *h, const void *key) {
        assert(h && key);
        if (h->n_entries == 0)
                return NULL;

        size_t mask = h->n_buckets - 1;
        size_t i = find_slot(h, key, h->ops->hash(key));
        if (!h->entries[i].key)
                return NULL;

        void *value = h->entries[i].value;

        /* Shift later members of the probe run back into the hole, as long as
         * that does not move one before its home bucket. */
        for (size_t j = (i + 1) & mask; h->entries[j].key; j = (j + 1) & mask) {
                size_t home = h->entries[j].hash & mask;
                bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
                if (movable) {
                        h->entries[i] = h->entries[j];
                        i = j;
                }
        }
        h->entries[i] = (HashmapEntry){};
        h->n_entries--;

        /* Give memory back after a burst (shrinking can fail harmlessly). */
        if (h->n_buckets > HASHMAP_MIN_BUCKETS && h->n_entries * 8 < h->n_buckets)
                (void) resize(h, h->n_buckets / 2);
        return value;
}

bool hashmap_next(const Hashmap *h, size_t *state, void **ret_value) {
        for (size_t i = *state; i < h->n_buckets; i++)
                if (h->entries[i].key) {
                        *state = i + 1;
                        *ret_value = h->entries[i].value;
                        return true;
                }
        *state = h->n_buckets;
        return false;
}
