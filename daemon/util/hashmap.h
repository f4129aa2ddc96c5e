/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A small open-addressing hash map from a borrowed key to a value pointer.
 * Keys live inside the values (a cookie in its request, a name in its client). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct HashmapOps {
        uint64_t (*hash)(const void *key);
        bool (*equal)(const void *a, const void *b);
} HashmapOps;

/* The hash is kept: a probe compares it before calling equal(), and
 * deleting or growing never hashes again (a client of a thousand requests
 * leaving is a thousand deletions). */
typedef struct HashmapEntry {
        const void *key;
        void *value;
        uint64_t hash;
} HashmapEntry;

typedef struct Hashmap {
        const HashmapOps *ops;
        HashmapEntry *entries; /* key == NULL marks a free slot */
        size_t n_buckets;      /* 0 or a power of two */
        size_t n_entries;
} Hashmap;

extern const HashmapOps hashmap_u32_ops;    /* key points to a uint32_t */
extern const HashmapOps hashmap_string_ops; /* key is a NUL-terminated string */
extern const HashmapOps hashmap_ptr_ops;    /* the key is the pointer itself (an object's identity) */

void hashmap_init(Hashmap *h, const HashmapOps *ops);
void hashmap_clear(Hashmap *h); /* frees the table, not the values */

/* Returns 0, -EEXIST if the key is present, or -ENOMEM. */
int hashmap_put(Hashmap *h, const void *key, void *value);
void *hashmap_get(const Hashmap *h, const void *key);
/* Returns the removed value, or NULL. */
void *hashmap_remove(Hashmap *h, const void *key);

static inline size_t hashmap_size(const Hashmap *h) {
        return h->n_entries;
}

/* Iteration: for (size_t i = 0; hashmap_next(h, &i, &v);) — do not modify while iterating. */
bool hashmap_next(const Hashmap *h, size_t *state, void **ret_value);
