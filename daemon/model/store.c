/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Request bookkeeping: a cookie map, an indexed binary min-heap on the value,
 * a list per owner and a count per uid, so nothing rescans all requests. */

#include "model/store.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        *s = (Store){ .rng = seed };
        hashmap_init(&s->by_cookie, &hashmap_u32_ops);
        hashmap_init(&s->by_uid, &hashmap_u32_ops);
}

void store_done(Store *s) {
        while (s->all_head)
                store_remove(s, s->all_head);
        hashmap_clear(&s->by_cookie);
        hashmap_clear(&s->by_uid);
        heap_done(&s->values);
        heap_done(&s->wakeup_values);
        heap_done(&s->expiries);
        for (uint32_t i = 0; i < s->n_cpu_heaps; i++)
                heap_done(&s->cpu_heaps[i]);
        free(s->cpu_heaps);
        s->cpu_heaps = NULL;
        s->n_cpu_heaps = 0;
}

SharedString *shared_string_new(const char *text) {
        size_t n = strlen(text);
        SharedString *s = malloc(sizeof(SharedString) + n + 1);
        if (!s)
                return NULL;
        s->n_ref = 1;
        memcpy(s->text, text, n + 1);
        return s;
}

SharedString *shared_string_ref(SharedString *s) {
        if (s)
                s->n_ref++;
        return s;
}

SharedString *shared_string_unref(SharedString *s) {
        if (s && --s->n_ref == 0)
                free(s);
        return NULL;
}

Origin *origin_new(const char *comm, const char *unit) {
        size_t n = strnlen(unit, PMQOS_UNIT_MAX - 1);
        Origin *o = malloc(sizeof(Origin) + n + 1);
        if (!o)
                return NULL;
        o->n_ref = 1;
        snprintf(o->comm, sizeof(o->comm), "%s", comm);
        memcpy(o->unit, unit, n);
        o->unit[n] = 0;
        return o;
}

Origin *origin_ref(Origin *o) {
        if (o)
                o->n_ref++;
        return o;
}

Origin *origin_unref(Origin *o) {
        if (o && --o->n_ref == 0)
                free(o);
        return NULL;
}

Request *request_new(Store *s) {
        Request *r = calloc(1, sizeof(Request));
        if (!r)
                return NULL;

        do
                r->cookie = (uint32_t) rng_next(&s->rng);
        while (r->cookie == 0 || store_get(s, r->cookie));

        r->value = PMQOS_LATENCY_NONE;
        r->value_node = (HeapNode) HEAP_NODE_INIT;
        r->expiry_node = (HeapNode) HEAP_NODE_INIT;
        return r;
}

Request *request_free(Request *r) {
        if (r) {
                shared_string_unref(r->exec);
                origin_unref(r->origin);
                free(r->reason);
                free(r->target);
                free(r->cpus);
                free(r->cpu_nodes);
                free(r);
        }
        return NULL;
}

const char *request_bound_to(const Request *r) {
        static const char *const holds[_HOLD_MAX] = {
                [HOLD_FD] = "fd",
                [HOLD_PROCESS] = "process",
                [HOLD_CGROUP] = "cgroup",
        };
        if (r->rule)
                return "rule";
        if (r->persistent)
                return "persistent";
        if (r->hold != HOLD_NONE && r->hold < _HOLD_MAX)
                return holds[r->hold];
        return r->expires_usec > 0 ? "timeout" : "connection";
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

int request_set_cpus(Request *r, const uint32_t *cpus, size_t n) {
        assert(r && (cpus || n == 0));
        uint32_t *copy = NULL;
        CpuNode *nodes = NULL;

        if (n > 0) {
                copy = malloc(n * sizeof(uint32_t));
                nodes = calloc(n, sizeof(CpuNode));
                if (!copy || !nodes) {
                        free(copy);
                        free(nodes);
                        return -ENOMEM;
                }
                memcpy(copy, cpus, n * sizeof(uint32_t));
                qsort(copy, n, sizeof(uint32_t), cmp_u32);
                size_t k = 0;
                for (size_t i = 0; i < n; i++)
                        if (k == 0 || copy[k - 1] != copy[i])
                                copy[k++] = copy[i];
                n = k;
                for (size_t i = 0; i < n; i++)
                        nodes[i] = (CpuNode){ .node = HEAP_NODE_INIT, .request = r, .cpu = copy[i] };
        }
        free(r->cpus);
        free(r->cpu_nodes);
        r->cpus = copy;
        r->cpu_nodes = nodes;
        r->n_cpus = n;
        return 0;
}

/* ---- the heaps a request belongs to ---- */

static int cpu_heaps_grow(Store *s, uint32_t cpu) {
        if (cpu < s->n_cpu_heaps)
                return 0;
        if (cpu >= PMQOS_MAX_CPUS)
                return -EINVAL;
        uint32_t n = cpu + 1;
        Heap *heaps = realloc(s->cpu_heaps, n * sizeof(Heap));
        if (!heaps)
                return -ENOMEM;
        for (uint32_t i = s->n_cpu_heaps; i < n; i++)
                heaps[i] = (Heap){};
        s->cpu_heaps = heaps;
        s->n_cpu_heaps = n;
        return 0;
}

/* The heap of r's type for global requests. */
static Heap *global_heap(Store *s, const Request *r) {
        return r->type == QOS_TYPE_CPU_WAKEUP ? &s->wakeup_values : &s->values;
}

/* Reserves room in every heap r will join with this value, so joining cannot fail. */
static int reserve_value_heaps(Store *s, const Request *r, int32_t value) {
        int k;

        if (value < 0 || r->inactive)
                return 0;
        if (r->n_cpus == 0)
                return heap_contains(&r->value_node) ? 0 : heap_reserve(global_heap(s, r));
        for (size_t i = 0; i < r->n_cpus; i++) {
                k = cpu_heaps_grow(s, r->cpus[i]);
                if (k < 0)
                        return k;
                if (!heap_contains(&r->cpu_nodes[i].node)) {
                        k = heap_reserve(&s->cpu_heaps[r->cpus[i]]);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

static void place_in_heap(Heap *h, HeapNode *node, int32_t value) {
        if (value < 0) {
                if (heap_contains(node))
                        heap_delete(h, node);
        } else if (heap_contains(node))
                heap_set_key(h, node, value);
        else {
                node->key = value;
                heap_insert(h, node);
        }
}

static void place_value(Store *s, Request *r, int32_t value) {
        if (r->inactive)
                value = PMQOS_LATENCY_NONE;
        if (r->n_cpus == 0)
                place_in_heap(global_heap(s, r), &r->value_node, value);
        else
                for (size_t i = 0; i < r->n_cpus; i++)
                        /* A heap not grown for it (no value yet, or inactive) cannot hold it. */
                        if (r->cpus[i] < s->n_cpu_heaps)
                                place_in_heap(&s->cpu_heaps[r->cpus[i]], &r->cpu_nodes[i].node, value);
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
        assert(s && r && !r->owner && r->cookie != 0);
        int k;

        /* Reserve everything first so that a failure leaves the store untouched. */
        k = reserve_value_heaps(s, r, r->value);
        if (k < 0)
                return k;
        if (r->expires_usec > 0) {
                k = heap_reserve(&s->expiries);
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

        place_value(s, r, r->value);
        if (r->expires_usec > 0) {
                r->expiry_node.key = r->expires_usec;
                heap_insert(&s->expiries, &r->expiry_node);
        }
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
        assert(s && r);
        RequestOwner *owner = r->owner;

        hashmap_remove(&s->by_cookie, &r->cookie);
        place_value(s, r, PMQOS_LATENCY_NONE);
        if (heap_contains(&r->expiry_node))
                heap_delete(&s->expiries, &r->expiry_node);
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
        if (owner && owner->n_requests == 0 && owner->emptied)
                owner->emptied(owner);
}

int store_update(Store *s, Request *r, int32_t value) {
        assert(s && r && (value == PMQOS_LATENCY_NONE || (value >= 0 && value <= PMQOS_CONTRACT_LATENCY_MAX)));
        int k = reserve_value_heaps(s, r, value);
        if (k < 0)
                return k;
        r->value = value;
        place_value(s, r, value);
        return 0;
}

Request *store_get(const Store *s, uint32_t cookie) {
        return hashmap_get(&s->by_cookie, &cookie);
}

unsigned store_drop_owner(Store *s, RequestOwner *owner) {
        unsigned n = 0;

        while (owner->head) {
                Request *r = owner->head;
                /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): store_remove() unlinked the last one */
                if (request_dies_with_owner(r))
                        store_remove(s, r);
                else
                        owner_unlink(r);
                n++;
        }
        return n;
}

void store_move_requests(RequestOwner *to, RequestOwner *from) {
        while (from->head) {
                Request *r = from->head;
                owner_unlink(r);
                owner_link(to, r);
        }
}

unsigned store_unplace_owner(Store *s, const RequestOwner *owner) {
        unsigned n = 0;

        for (Request *r = owner->head; r; r = r->owner_next)
                if (request_dies_with_owner(r)) {
                        place_value(s, r, PMQOS_LATENCY_NONE);
                        n++;
                }
        return n;
}

int32_t store_min(const Store *s) {
        const HeapNode *top = heap_top(&s->values);
        return top ? (int32_t) top->key : PMQOS_LATENCY_NONE;
}

int32_t store_wakeup_min(const Store *s) {
        const HeapNode *top = heap_top(&s->wakeup_values);
        return top ? (int32_t) top->key : PMQOS_LATENCY_NONE;
}

int32_t store_cpu_min(const Store *s, uint32_t cpu) {
        const HeapNode *top = cpu < s->n_cpu_heaps ? heap_top(&s->cpu_heaps[cpu]) : NULL;
        return top ? (int32_t) top->key : PMQOS_LATENCY_NONE;
}

int64_t store_next_expiry(const Store *s) {
        const HeapNode *top = heap_top(&s->expiries);
        return top ? top->key : 0;
}

Request *store_first_expired(const Store *s, int64_t now) {
        HeapNode *top = heap_top(&s->expiries);
        if (!top || top->key > now)
                return NULL;
        return (Request *) ((char *) top - offsetof(Request, expiry_node));
}

size_t store_size(const Store *s) {
        return hashmap_size(&s->by_cookie);
}

int32_t effective_latency(int32_t min, int32_t floor) {
        if (min < 0)
                return PMQOS_LATENCY_NONE;
        return floor > min ? floor : min;
}
