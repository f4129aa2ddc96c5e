/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Request bookkeeping: a cookie map, an indexed binary min-heap on the value,
 * a list per owner and a count per uid, so nothing rescans all requests. */

#include "store.h"

#include <errno.h>
#include <stdlib.h>

typedef struct UidCount {
        uint32_t uid; /* first: the map's key points here */
        unsigned n;
} UidCount;

static uint64_t rng_next(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

void store_init(Store *s, uint64_t seed) {
        *s = (Store) { .rng = seed };
        hashmap_init(&s->by_cookie, &hashmap_u32_ops);
        hashmap_init(&s->by_uid, &hashmap_u32_ops);
}

void store_done(Store *s) {
        while (s->all_head)
                store_remove(s, s->all_head);
        hashmap_clear(&s->by_cookie);
        hashmap_clear(&s->by_uid);
        free(s->heap);
        s->heap = NULL;
        s->n_heap = s->heap_cap = 0;
}

Request *request_new(Store *s) {
        Request *r = calloc(1, sizeof(Request));
        if (!r)
                return NULL;

        do
                r->cookie = (uint32_t) rng_next(&s->rng);
        while (r->cookie == 0 || store_get(s, r->cookie));

        r->value = PMQOS_LATENCY_NONE;
        r->heap_idx = SIZE_MAX;
        return r;
}

Request *request_free(Request *r) {
        if (r) {
                free(r->exec);
                free(r->reason);
                free(r->sender);
                free(r);
        }
        return NULL;
}

/* ---- the heap ---- */

static void heap_set(Store *s, size_t i, Request *r) {
        s->heap[i] = r;
        r->heap_idx = i;
}

static void heap_sift_up(Store *s, size_t i) {
        Request *r = s->heap[i];
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (s->heap[parent]->value <= r->value)
                        break;
                heap_set(s, i, s->heap[parent]);
                i = parent;
        }
        heap_set(s, i, r);
}

static void heap_sift_down(Store *s, size_t i) {
        Request *r = s->heap[i];
        for (;;) {
                size_t child = 2 * i + 1;
                if (child >= s->n_heap)
                        break;
                if (child + 1 < s->n_heap && s->heap[child + 1]->value < s->heap[child]->value)
                        child++;
                if (r->value <= s->heap[child]->value)
                        break;
                heap_set(s, i, s->heap[child]);
                i = child;
        }
        heap_set(s, i, r);
}

static int heap_reserve(Store *s) {
        if (s->n_heap < s->heap_cap)
                return 0;
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        Request **h = realloc(s->heap, cap * sizeof(Request *));
        if (!h)
                return -ENOMEM;
        s->heap = h;
        s->heap_cap = cap;
        return 0;
}

static void heap_insert(Store *s, Request *r) {
        /* Room was reserved by the caller. */
        heap_set(s, s->n_heap++, r);
        heap_sift_up(s, r->heap_idx);
}

static void heap_delete(Store *s, Request *r) {
        size_t i = r->heap_idx;
        r->heap_idx = SIZE_MAX;
        Request *last = s->heap[--s->n_heap];
        if (last == r)
                return;
        heap_set(s, i, last);
        heap_sift_up(s, i);
        heap_sift_down(s, last->heap_idx);
}

/* ---- per-uid counts ---- */

static int uid_ref(Store *s, uid_t uid) {
        uint32_t key = uid;
        UidCount *c = hashmap_get(&s->by_uid, &key);
        if (!c) {
                c = calloc(1, sizeof(UidCount));
                if (!c)
                        return -ENOMEM;
                c->uid = uid;
                int r = hashmap_put(&s->by_uid, &c->uid, c);
                if (r < 0) {
                        free(c);
                        return r;
                }
        }
        c->n++;
        return 0;
}

static void uid_unref(Store *s, uid_t uid) {
        uint32_t key = uid;
        UidCount *c = hashmap_get(&s->by_uid, &key);
        if (c && --c->n == 0)
                free(hashmap_remove(&s->by_uid, &key));
}

unsigned store_count_uid(const Store *s, uid_t uid) {
        uint32_t key = uid;
        const UidCount *c = hashmap_get(&s->by_uid, &key);
        return c ? c->n : 0;
}

/* ---- requests ---- */

static void owner_link(RequestOwner *o, Request *r) {
        r->owner = o;
        r->owner_prev = NULL;
        r->owner_next = o->head;
        if (o->head)
                o->head->owner_prev = r;
        o->head = r;
        o->n_requests++;
}

static void owner_unlink(Request *r) {
        RequestOwner *o = r->owner;
        if (!o)
                return;
        if (r->owner_prev)
                r->owner_prev->owner_next = r->owner_next;
        else
                o->head = r->owner_next;
        if (r->owner_next)
                r->owner_next->owner_prev = r->owner_prev;
        r->owner = NULL;
        r->owner_prev = r->owner_next = NULL;
        o->n_requests--;
}

int store_add(Store *s, Request *r, RequestOwner *owner) {
        int k;

        /* Reserve everything first so that a failure leaves the store untouched. */
        if (r->value >= 0) {
                k = heap_reserve(s);
                if (k < 0)
                        return k;
        }
        k = uid_ref(s, r->uid);
        if (k < 0)
                return k;
        k = hashmap_put(&s->by_cookie, &r->cookie, r);
        if (k < 0) {
                uid_unref(s, r->uid);
                return k;
        }

        if (r->value >= 0)
                heap_insert(s, r);
        if (owner)
                owner_link(owner, r);

        r->all_next = NULL;
        r->all_prev = s->all_tail;
        if (s->all_tail)
                s->all_tail->all_next = r;
        else
                s->all_head = r;
        s->all_tail = r;
        return 0;
}

void store_remove(Store *s, Request *r) {
        hashmap_remove(&s->by_cookie, &r->cookie);
        if (r->heap_idx != SIZE_MAX)
                heap_delete(s, r);
        owner_unlink(r);
        uid_unref(s, r->uid);

        if (r->all_prev)
                r->all_prev->all_next = r->all_next;
        else
                s->all_head = r->all_next;
        if (r->all_next)
                r->all_next->all_prev = r->all_prev;
        else
                s->all_tail = r->all_prev;

        request_free(r);
}

int store_update(Store *s, Request *r, int32_t value) {
        int32_t old = r->value;

        /* Joining the heap may need memory: reserve before touching anything. */
        if (r->heap_idx == SIZE_MAX && value >= 0 && heap_reserve(s) < 0)
                return -ENOMEM;

        r->value = value;
        if (r->heap_idx != SIZE_MAX) {
                if (value < 0)
                        heap_delete(s, r);
                else if (value < old)
                        heap_sift_up(s, r->heap_idx);
                else
                        heap_sift_down(s, r->heap_idx);
        } else if (value >= 0)
                heap_insert(s, r);
        return 0;
}

Request *store_get(const Store *s, uint32_t cookie) {
        return hashmap_get(&s->by_cookie, &cookie);
}

unsigned store_drop_owner(Store *s, RequestOwner *owner) {
        unsigned n = 0;

        while (owner->head) {
                Request *r = owner->head;
                if (request_dies_with_owner(r))
                        store_remove(s, r);
                else {
                        owner_unlink(r);
                        free(r->sender);
                        r->sender = NULL;
                }
                n++;
        }
        return n;
}

int32_t store_min(const Store *s) {
        return s->n_heap > 0 ? s->heap[0]->value : PMQOS_LATENCY_NONE;
}

size_t store_size(const Store *s) {
        return hashmap_size(&s->by_cookie);
}

int32_t effective_latency(int32_t min, int32_t floor) {
        if (min < 0)
                return PMQOS_LATENCY_NONE;
        return floor > min ? floor : min;
}
