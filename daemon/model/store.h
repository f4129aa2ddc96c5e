/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The request store: every live latency request, indexed by cookie, by owner
 * and by value. Pure data, no I/O; every operation is O(1) or O(log n). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dbus/contract.h"
#include "util/hashmap.h"
#include "util/heap.h"

#define PMQOS_LATENCY_NONE PMQOS_CONTRACT_LATENCY_NONE
#define PMQOS_MAX_CPUS 8192u /* the kernel's NR_CPUS ceiling */

typedef enum QosType {
        QOS_TYPE_CPU_DMA,
        QOS_TYPE_CPU_WAKEUP, /* Linux 6.19's /dev/cpu_wakeup_latency: one global bound, no CPU list */
        _QOS_TYPE_MAX,
} QosType;

typedef struct Request Request;

/* What, besides persistence, a timeout or a rule, a request lives as long as. */
typedef enum RequestHold {
        HOLD_NONE,    /* its caller's bus connection (or nothing: persistent, timed, a rule) */
        HOLD_FD,      /* Hold(): any copy of the descriptor it returned being open */
        HOLD_PROCESS, /* RequestFor() on a pidfd: that process */
        HOLD_CGROUP,  /* RequestFor() on a cgroup v2 directory: a process being in it */
        _HOLD_MAX,
} RequestHold;

/* Text shared by many requests (a client's command line), freed with the last. */
typedef struct SharedString {
        unsigned n_ref;
        char text[];
} SharedString;

SharedString *shared_string_new(const char *text);
SharedString *shared_string_ref(SharedString *s);
SharedString *shared_string_unref(SharedString *s);

#define PMQOS_COMM_MAX 16u  /* the kernel's TASK_COMM_LEN, with the terminator */
#define PMQOS_UNIT_MAX 128u /* a systemd unit name, cut, with the terminator */

/* The process a request names, as the ledger shows it: its comm and its
 * systemd unit (the last ".service" or ".scope" of its control group, or
 * ""), read when the request was made (or bound to its target process),
 * never later: by then the pid may be another process's. Printable ASCII;
 * shared by the requests of one client, freed with the last. */
typedef struct Origin {
        unsigned n_ref;
        char comm[PMQOS_COMM_MAX];
        char unit[];
} Origin;

/* comm and unit cut to fit. */
Origin *origin_new(const char *comm, const char *unit);
Origin *origin_ref(Origin *o);
Origin *origin_unref(Origin *o);

/* A per-CPU request sits in one heap per CPU it names. */
typedef struct CpuNode {
        HeapNode node;
        Request *request;
        uint32_t cpu;
} CpuNode;

/* Everything one bus connection holds; embedded in that connection's record. */
typedef struct RequestOwner RequestOwner;
struct RequestOwner {
        const char *name; /* the owner's unique bus name, shown as each request's "sender" */
        Request *head;
        unsigned n_requests;
        /* Called when store_remove() took the owner's last request (also
         * from store_drop_owner()); may be NULL. */
        void (*emptied)(RequestOwner *o);
};

struct Request {
        uint32_t cookie;
        int32_t value; /* PMQOS_LATENCY_NONE or 0 … PMQOS_CONTRACT_LATENCY_MAX */
        uid_t uid;
        pid_t pid;
        pid_t target_pid; /* HOLD_PROCESS: its pid, in pmqosd's namespace */
        /* Small fields packed in one word: a Request is 168 bytes, one
         * 176-byte malloc chunk, the size it had before holds (the bench's
         * memory row); the origin made it 176 bytes, one 192-byte chunk. */
        QosType type : 8;
        RequestHold hold : 8; /* HOLD_NONE, or what ends it: its owner is then that hold's, of this one request */
        bool persistent : 1;
        bool rule : 1;     /* held by pmqosd for a unit rule (exec "rule FILE"): never recorded, never a client's */
        bool inactive : 1; /* listed, but in no heap: a CPU it names is gone (see manager_load_state()) */
        SharedString *exec;
        Origin *origin;       /* NULL: none known (a record of an older pmqosd, a rule) */
        char *reason;         /* NULL when none was given */
        int64_t created_usec; /* CLOCK_REALTIME */
        int64_t expires_usec; /* CLOCK_REALTIME deadline, 0 = never */
        char *target;         /* HOLD_PROCESS: "pid N (exec)"; HOLD_CGROUP: its path; else NULL */
        uint64_t target_key;  /* HOLD_PROCESS: its start time (/proc/PID/stat); HOLD_CGROUP: the cgroup's id */
        uint32_t *cpus;       /* sorted, unique; NULL/0: the global device */
        size_t n_cpus;

        RequestOwner *owner;
        Request *owner_prev, *owner_next;
        Request *all_prev, *all_next; /* creation order, for listings */
        HeapNode value_node;          /* in Store.values: global, value >= 0 */
        HeapNode expiry_node;         /* in Store.expiries: expires_usec > 0 */
        CpuNode *cpu_nodes;           /* n_cpus of them, in Store.cpu_heaps[cpu] when value >= 0 */
};

typedef struct Store {
        Hashmap by_cookie;
        Hashmap by_uid;     /* uid → UidCount */
        Heap values;        /* global cpu_dma requests by value; PMQOS_LATENCY_NONE stays out */
        Heap wakeup_values; /* cpu_wakeup requests by value */
        Heap expiries;      /* timed requests by deadline */
        Heap *cpu_heaps;    /* per-CPU requests by value, indexed by CPU number */
        uint32_t n_cpu_heaps;
        Request *all_head, *all_tail;
        uint64_t rng;
} Store;

void store_init(Store *s, uint64_t seed);
void store_done(Store *s); /* frees every request */

/* Allocates a request with a fresh random non-zero cookie that no live request uses. */
Request *request_new(Store *s);
Request *request_free(Request *r);
/* Sets the CPUs of a request not yet added (copied, sorted, de-duplicated). */
int request_set_cpus(Request *r, const uint32_t *cpus, size_t n);

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
/* Its first half, for a kernel brought along before the bookkeeping: the
 * owner's requests that die with it leave the heaps of values, so the
 * minima no longer count them; store_drop_owner() does the rest. Returns
 * how many that is. */
unsigned store_unplace_owner(Store *s, const RequestOwner *owner);

/* Every request of from becomes to's (from->emptied is not called): the
 * requests of several owners that end together, dropped as one. */
void store_move_requests(RequestOwner *to, RequestOwner *from);

/* The strictest live value of global cpu_dma requests, or PMQOS_LATENCY_NONE. */
int32_t store_min(const Store *s);
/* The strictest live value of cpu_wakeup requests, or PMQOS_LATENCY_NONE. */
int32_t store_wakeup_min(const Store *s);
/* The strictest live value of requests naming this CPU, or PMQOS_LATENCY_NONE. */
int32_t store_cpu_min(const Store *s, uint32_t cpu);
/* The earliest deadline of a timed request, or 0. */
int64_t store_next_expiry(const Store *s);
/* A request whose deadline is at or before now, or NULL. */
Request *store_first_expired(const Store *s, int64_t now);
size_t store_size(const Store *s);
unsigned store_count_uid(const Store *s, uid_t uid);

static inline const char *request_exec(const Request *r) {
        return r->exec ? r->exec->text : "";
}

static inline const char *request_reason(const Request *r) {
        return r->reason ?: "";
}

/* The unique bus name of the connection that owns r, "" once it left. */
static inline const char *request_sender(const Request *r) {
        return r->owner && r->owner->name ? r->owner->name : "";
}

/* A held request's owner is its hold: when that ends, so does the request,
 * whatever its timeout (an upper bound there). */
static inline bool request_dies_with_owner(const Request *r) {
        return r->hold != HOLD_NONE || (!r->persistent && r->expires_usec == 0);
}

static inline const char *request_target(const Request *r) {
        return r->target ?: "";
}

/* What r lives as long as, as ListRequests says it (bound_to): "connection",
 * "timeout", "persistent", "fd", "process", "cgroup" or "rule". */
const char *request_bound_to(const Request *r);

/* The floor never lowers a bound below itself and never creates one. */
int32_t effective_latency(int32_t min, int32_t floor);

#define STORE_FOREACH(r, s) for (Request *r = (s)->all_head; r; r = r->all_next)
