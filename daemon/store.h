/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The request store: every live latency request, indexed by cookie, by owner
 * and by value. Pure data, no I/O; every operation is O(1) or O(log n). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hashmap.h"

#define PMQOS_LATENCY_MAX_US 2000000000 /* also the kernel's "no constraint" */
#define PMQOS_LATENCY_NONE (-1)          /* listed, never constrains */

typedef enum QosType {
        QOS_TYPE_CPU_DMA,
        _QOS_TYPE_MAX,
} QosType;

typedef struct Request Request;

/* Everything one bus connection holds; embedded in that connection's record. */
typedef struct RequestOwner {
        Request *head;
        unsigned n_requests;
} RequestOwner;

struct Request {
        uint32_t cookie;
        int32_t value; /* PMQOS_LATENCY_NONE or 0 … PMQOS_LATENCY_MAX_US */
        QosType type;
        uid_t uid;
        pid_t pid;
        char *exec;
        char *reason;
        char *sender;         /* unique bus name while the owner is connected, else NULL */
        int64_t created_usec; /* CLOCK_REALTIME */
        int64_t expires_usec; /* CLOCK_REALTIME deadline, 0 = never */
        bool persistent;

        RequestOwner *owner;
        Request *owner_prev, *owner_next;
        Request *all_prev, *all_next; /* creation order, for listings */
        size_t heap_idx;              /* position in the value heap, or SIZE_MAX */
};

typedef struct Store {
        Hashmap by_cookie;
        Hashmap by_uid; /* uid → UidCount */
        Request **heap; /* min-heap on value; requests of PMQOS_LATENCY_NONE stay out */
        size_t n_heap, heap_cap;
        Request *all_head, *all_tail;
        uint64_t rng;
} Store;

void store_init(Store *s, uint64_t seed);
void store_done(Store *s); /* frees every request */

/* Allocates a request with a fresh random non-zero cookie that no live request uses. */
Request *request_new(Store *s);
Request *request_free(Request *r);

/* Takes ownership of r. owner may be NULL (the request belongs to nobody on the bus). */
int store_add(Store *s, Request *r, RequestOwner *owner);
/* Unlinks and frees r. */
void store_remove(Store *s, Request *r);
/* Returns 0, or -ENOMEM with r unchanged. */
int store_update(Store *s, Request *r, int32_t value);
Request *store_get(const Store *s, uint32_t cookie);

/* The owner left the bus: frees its requests that die with it, detaches the
 * others (persistent or timed). Returns how many requests were freed or detached. */
unsigned store_drop_owner(Store *s, RequestOwner *owner);

/* The strictest live value, or PMQOS_LATENCY_NONE. */
int32_t store_min(const Store *s);
size_t store_size(const Store *s);
unsigned store_count_uid(const Store *s, uid_t uid);

static inline bool request_dies_with_owner(const Request *r) {
        return !r->persistent && r->expires_usec == 0;
}

/* The floor never lowers a bound below itself and never creates one. */
int32_t effective_latency(int32_t min, int32_t floor);

#define STORE_FOREACH(r, s) for (Request *r = (s)->all_head; r; r = r->all_next)
