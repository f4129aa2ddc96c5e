/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libpmqos — hold a CPU latency bound through pmqosd, the system's latency
 * broker (bus name org.freedesktop.PMQoS on the system bus).
 *
 * The first program (examples/first-request.c, installed with the
 * documentation; the test suite compiles and runs it, and this text):
 *
 *     pmqos_client *c; // NULL after any failure of pmqos_client_new()
 *     uint32_t cookie;
 *     int r = pmqos_client_new(&c);
 *     if (r >= 0)
 *             r = pmqos_request(c, 50, &cookie);
 *     if (r < 0)
 *             fprintf(stderr, "running without a latency bound: %s\n", pmqos_strerror(r));
 *     run_low_latency_work(); // every CPU wakes within 50 µs if r >= 0
 *     pmqos_client_free(c);   // the bound ends here, or when the process dies
 *
 * Conventions:
 *  - Every function returns 0 (or a count) on success, a negative errno on
 *    failure; nothing aborts, prints, or calls exit(). After a failure,
 *    pmqos_client_last_error() gives the broker's one-sentence reason,
 *    pmqos_strerror() a sentence for the errno.
 *  - Constructors (pmqos_client_new(), pmqos_list_requests(),
 *    pmqos_explain()) set *ret to NULL (and a count to 0) on every failure,
 *    so that the matching free function may be called whatever happened;
 *    a failed request leaves *ret_cookie 0, which is never a cookie.
 *  - Errors: -EACCES the broker (polkit) refused; -EINVAL invalid argument;
 *    -ENOENT no request with that cookie; -EUSERS a per-connection or per-user
 *    limit is reached; -EOPNOTSUPP not supported on this kernel;
 *    -ECONNREFUSED the broker is not running; -EHOSTDOWN the system bus
 *    itself is absent; -EIO the broker could not write to the kernel;
 *    -ENOMEM out of memory.
 *  - Latencies are in microseconds, 0 … 2000000000; -1 means "no bound".
 *  - Threads: there is no global state. Calls on one pmqos_client are
 *    serialized by its own lock (priority-inheriting, so a real-time caller
 *    waiting on it lends its priority); different clients never meet. Never
 *    free a client from its own callback, nor use it in a child after fork().
 *    The only thread the library starts is the helper below: one per client
 *    at most, SCHED_OTHER whatever the policy of the thread that made the
 *    request (explicit attributes), all signals blocked.
 *  - Lifetime: requests made with pmqos_request() and pmqos_request_full()
 *    (without a timeout or PMQOS_REQUEST_PERSISTENT) last as long as the
 *    client: pmqos_client_free(), exit or a crash end them.
 *    pmqos_client_free() returns only once the broker confirmed they are
 *    gone (one round trip; at most 5 s if the broker does not answer).
 *  - Broker restarts: pmqosd re-adopts the requests of clients that stay
 *    connected. The library checks the new broker's listing and issues
 *    again only what it lacks (a stop and start); the cookies it returned
 *    keep working. No call of the application is needed: until the
 *    application calls pmqos_client_get_fd(), a client holding such a
 *    request has a helper thread (signals blocked) serving its connection;
 *    event callbacks may then run on that thread. Once the application
 *    polls the fd, pmqos_client_process() does the same work.
 *
 * Build with: pkg-config --cflags --libs pmqos
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PMQOS_LATENCY_NONE (-1)
#define PMQOS_LATENCY_MAX 2000000000

typedef struct pmqos_client pmqos_client;

/* Connects to the system bus (DBUS_SYSTEM_BUS_ADDRESS is honoured) and
 * checks that the broker answers (starting it if the bus can). On success
 * *ret is a new client for pmqos_client_free(); on failure *ret is NULL
 * (-ECONNREFUSED: pmqosd is not running; -EHOSTDOWN: no system bus). */
int pmqos_client_new(pmqos_client **ret);

/* Disconnects: every request made through c that is neither persistent nor
 * timed ends, and the broker has confirmed it (and so the kernel has it)
 * when this returns. NULL-safe. Returns NULL. */
pmqos_client *pmqos_client_free(pmqos_client *c);

/* Asks that every CPU wake within usec µs (0 … PMQOS_LATENCY_MAX, or
 * PMQOS_LATENCY_NONE to be listed without constraining) for as long as c
 * lives. The effective bound is in the kernel before this returns.
 * *ret_cookie identifies the request (never 0; 0 after a failure). */
int pmqos_request(pmqos_client *c, int32_t usec, uint32_t *ret_cookie);

/* Changes a request's value in place (no gap between old and new). */
int pmqos_update(pmqos_client *c, uint32_t cookie, int32_t usec);

/* Ends a request. Another user's request needs authorization. */
int pmqos_cancel(pmqos_client *c, uint32_t cookie);

/* The effective bound the broker asks the kernel for, or PMQOS_LATENCY_NONE. */
int pmqos_get_latency(pmqos_client *c, int32_t *ret_usec);

/* The broker's message for the last failure on c, or NULL. Valid until the
 * next call on c. */
const char *pmqos_client_last_error(pmqos_client *c);

/* A sentence for a negative errno this library returns ("pmqosd is not
 * running" for -ECONNREFUSED), for messages; any other value gets
 * strerror()'s text. Never NULL, static storage. Since LIBPMQOS_1.1. */
const char *pmqos_strerror(int r);

/* How long each later call on c waits for the broker's answer, in µs; 0
 * (the default) is 25 s, or 5 min for calls that may ask for a password
 * (pmqos_client_set_allow_interactive()). A call not answered in time fails
 * with -ETIMEDOUT; the broker may still carry it out (a request made so
 * ends with c all the same). pmqos_client_free() waits the lesser of this
 * and 5 s. Returns 0. Since LIBPMQOS_1.1. */
int pmqos_client_set_timeout(pmqos_client *c, uint64_t timeout_usec);

/* ---- richer requests ---- */

enum {
        /* Survives the caller and broker restarts (needs authorization). */
        PMQOS_REQUEST_PERSISTENT = 1 << 0,
};

/* Like pmqos_request(), with:
 *  reason:      shown in listings (at most 256 bytes of UTF-8), or NULL;
 *  timeout_sec: 0 for none, else the request ends by itself after that many
 *               seconds and does not end with the client;
 *  cpus/n_cpus: the bound applies only to these CPUs (through their
 *               pm_qos_resume_latency_us) when n_cpus > 0;
 *  flags:       PMQOS_REQUEST_PERSISTENT or 0. */
int pmqos_request_full(pmqos_client *c, int32_t usec, const char *reason, uint32_t timeout_sec, const uint32_t *cpus,
                       size_t n_cpus, uint64_t flags, uint32_t *ret_cookie);

/* Hold(): a request that lives while any copy of *ret_fd is open, in this
 * process or any other (children, a process it was passed to), whatever
 * becomes of c. Close every copy to end it; pmqos_cancel() also works.
 * *ret_fd is close-on-exec; clear that to pass it to a command run by exec.
 * Arguments as pmqos_request_full() (timeout_sec an upper bound; persistent
 * is refused). Not issued again after a broker restart: the broker keeps it
 * in systemd's fd store. On failure *ret_cookie = 0, *ret_fd = -1. */
int pmqos_hold_fd(pmqos_client *c, int32_t usec, const char *reason, uint32_t timeout_sec, const uint32_t *cpus,
                  size_t n_cpus, uint32_t *ret_cookie, int *ret_fd);

/* RequestFor(): a request that ends when a workload ends, not with c.
 *  pmqos_request_for_pidfd():  pidfd from pidfd_open(2): ends when that
 *                              process exits;
 *  pmqos_request_for_cgroup(): path of a cgroup v2 directory, opened here
 *                              (O_DIRECTORY) and closed before return: ends
 *                              when the cgroup has no process left or is
 *                              removed;
 *  pmqos_request_for_fd():     either kind of descriptor (the caller opened
 *                              the cgroup itself, e.g. relative to a dirfd).
 * Anything else: -EINVAL. Another user's target needs the action
 * request-latency-for-others. The caller's descriptor stays its own. On
 * failure *ret_cookie = 0. */
int pmqos_request_for_fd(pmqos_client *c, int32_t usec, int target_fd, const char *reason, uint32_t timeout_sec,
                         const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie);
int pmqos_request_for_pidfd(pmqos_client *c, int32_t usec, int pidfd, const char *reason, uint32_t timeout_sec,
                            const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie);
int pmqos_request_for_cgroup(pmqos_client *c, int32_t usec, const char *path, const char *reason, uint32_t timeout_sec,
                             const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie);

/* Request types (since LIBPMQOS_1.4). Every call without one asks for
 * cpu_dma; these ask for the type given. */
typedef enum pmqos_type {
        PMQOS_TYPE_CPU_DMA = 0,    /* /dev/cpu_dma_latency */
        PMQOS_TYPE_CPU_WAKEUP = 1, /* /dev/cpu_wakeup_latency (Linux 6.19); -EOPNOTSUPP where pmqosd has none */
} pmqos_type;

/* pmqos_request_for_fd() for a request of type (another value: -EINVAL).
 * Since LIBPMQOS_1.4. */
int pmqos_request_for_fd_type(pmqos_client *c, pmqos_type type, int32_t usec, int target_fd, const char *reason,
                              uint32_t timeout_sec, const uint32_t *cpus, size_t n_cpus, uint32_t *ret_cookie);
/* GetLatency(type): what the broker asks of that type's device (the
 * requests and the floor together), or PMQOS_LATENCY_NONE. For cpu_dma the
 * same as pmqos_get_latency(). Since LIBPMQOS_1.4. */
int pmqos_get_latency_type(pmqos_client *c, pmqos_type type, int32_t *ret_usec);

/* Allows the broker to ask the user for a password (through a polkit agent)
 * when an action needs it. Off by default: such calls then fail with
 * -EACCES. Returns 0. */
int pmqos_client_set_allow_interactive(pmqos_client *c, bool allow);

/* ---- state of the broker ---- */

int pmqos_get_kernel_latency(pmqos_client *c, int32_t *ret_usec);  /* all holders of the device */
int pmqos_get_minimum_latency(pmqos_client *c, int32_t *ret_usec); /* the floor, or PMQOS_LATENCY_NONE */
int pmqos_set_minimum_latency(pmqos_client *c, int32_t usec);      /* PMQOS_LATENCY_NONE removes it */
int pmqos_get_request_count(pmqos_client *c, uint32_t *ret_count);

typedef struct pmqos_request_info {
        uint32_t cookie;
        int32_t value;
        uint32_t uid; /* who asked (and whose limits it counts against) */
        uint32_t pid; /* who asked; for bound_to "process", that process */
        char *exec;   /* the command line of the process pid names */
        char *reason;
        char *sender;         /* unique bus name, "" when its owner left */
        int64_t created_usec; /* µs since the epoch */
        int64_t expires_usec; /* µs since the epoch, 0 = never */
        bool persistent;
        uint32_t *cpus; /* NULL when the request is global */
        size_t n_cpus;
        char *type;     /* "cpu_dma", or "cpu_wakeup" (Linux 6.19's /dev/cpu_wakeup_latency) */
        char *bound_to; /* what it lives as long as: "connection", "timeout", "persistent", "fd", "process",
                         * "cgroup" or "rule" ("" from a broker that does not say) */
        char *target;   /* for "process": "pid N (exec)"; for "cgroup": its path; else "" */
} pmqos_request_info;

/* All live requests of every client, oldest first, read a page at a time
 * (ListRequestsPage; ListRequests from an older broker) so that no single
 * reply holds them all. Free with pmqos_request_info_free() (*ret NULL and
 * *ret_n 0 after a failure). Pages that do not move on: -EBADMSG.
 * A listing that is not one the broker sends (an entry without "cookie" or
 * with a key twice: -EBADMSG) or one too large to be real (more than 100,000
 * entries: -E2BIG; more than 8192 CPUs in an entry: -EBADMSG) is refused
 * whole, so a hostile process that took the broker's name cannot make the
 * caller leak or grow without bound. */
int pmqos_list_requests(pmqos_client *c, pmqos_request_info **ret, size_t *ret_n);
void pmqos_request_info_free(pmqos_request_info *infos, size_t n);
/* One page of the listing: the requests whose cookie is greater than after,
 * in ascending cookie order, at most max of them (0: 256; more than 1024 is
 * taken as 1024); *ret_next: the cookie of the last one when more follow,
 * else 0. after = 0, then after = *ret_next until it is 0, lists every
 * request once. Free as pmqos_list_requests()'s. A pmqosd without
 * ListRequestsPage answers UnknownMethod: -EBADR. Since LIBPMQOS_1.3. */
int pmqos_list_requests_page(pmqos_client *c, uint32_t after, uint32_t max, pmqos_request_info **ret, size_t *ret_n,
                             uint32_t *ret_next);

/* ---- Explain(): what sets the bound, who else holds the device ---- */

typedef struct pmqos_cstate_info {
        char *name;            /* cpuidle's name of the state ("C1E") */
        uint32_t latency_usec; /* its exit latency on this CPU */
        bool allowed;          /* the exit latency is within the CPU's bound */
        bool disabled;         /* switched off in sysfs ("disable") */
        uint64_t usage;        /* times entered, since boot */
        uint64_t time_usec;    /* time spent in it, since boot */
} pmqos_cstate_info;

typedef struct pmqos_cpu_info {
        uint32_t cpu;
        int32_t bound;        /* the lower of the kernel's global value and this CPU's own; -1: none */
        char *resume_latency; /* its pm_qos_resume_latency_us as read ("0": none, "n/a": 0 µs) */
        bool foreign;         /* that file holds a value pmqosd did not write */
        pmqos_cstate_info *cstates;
        size_t n_cstates;
} pmqos_cpu_info;

/* CPUs that look the same (pmqos_explain_folded()): the same bound,
 * resume_latency, foreign and C-states (name, latency, allowed, disabled, in
 * order); usage and time are those of the group's CPUs summed. */
typedef struct pmqos_cpu_group_info {
        uint32_t *cpus; /* ascending */
        size_t n_cpus;
        int32_t bound;
        char *resume_latency;
        bool foreign;
        pmqos_cstate_info *cstates;
        size_t n_cstates;
} pmqos_cpu_group_info;

typedef struct pmqos_holder_info {
        uint32_t pid;
        uint32_t uid;
        char *exec; /* its command line, cleaned like a request's */
} pmqos_holder_info;

typedef struct pmqos_unscanned_info {
        uint32_t uid;
        uint32_t processes; /* of this uid not looked at (or not to their end): the scan's bound per user */
} pmqos_unscanned_info;

typedef struct pmqos_rule_info {
        char *file; /* the rule file, /etc/pmqos/rules.d/NAME.conf */
        char *unit; /* the systemd unit it follows */
        int32_t latency;
        uint32_t *cpus; /* NULL: the global device */
        size_t n_cpus;
        char *state; /* the unit's ActiveState as pmqosd last saw it; "" unknown */
        bool holds;  /* its request is held now */
} pmqos_rule_info;

typedef struct pmqos_explanation {
        int32_t effective;        /* what pmqosd asks of the kernel; -1: nothing */
        int32_t kernel;           /* what the kernel reports for all holders together */
        int32_t floor;            /* the floor in force (for both types); -1: none */
        int32_t wakeup_effective; /* what pmqosd asks of /dev/cpu_wakeup_latency; -1: nothing or no such device */
        int32_t wakeup_kernel;    /* what that device reports; -1 without it */
        /* What sets the kernel's value: "request", "floor", "default-floor",
         * "battery-floor", "external" (another holder asks for less) or "none". */
        char *bound_by;
        pmqos_request_info *binding; /* the request that sets it (bound_by "request"), else NULL */
        pmqos_holder_info *holders;  /* other processes holding /dev/cpu_dma_latency, root's first */
        size_t n_holders;
        bool holders_complete; /* false: some processes could not be looked at, or a bound was reached */
        pmqos_cpu_info *cpus;  /* every online CPU */
        size_t n_cpus;
        bool kernel_ignores_writes; /* a write was read back as having had no effect */
        pmqos_rule_info *rules;     /* the unit rules (pmqosd(8)) */
        size_t n_rules;
        bool rules_followed; /* systemd is on the bus and followed: without it no rule holds */
        /* Added with LIBPMQOS_1.2 (only the library allocates this struct):
         * holders found but not listed (the list keeps root's first), and
         * the users whose processes the scan's bound kept it from looking at. */
        uint32_t holders_left_out;
        pmqos_unscanned_info *holders_unscanned;
        size_t n_holders_unscanned;
        /* Added with LIBPMQOS_1.3: from pmqos_explain_folded(), each group
         * of identical CPUs, by its lowest CPU (cpus is then NULL). */
        pmqos_cpu_group_info *cpu_groups;
        size_t n_cpu_groups;
        /* Added with LIBPMQOS_1.5: from pmqos_explain(), what the bounds
         * cost on each CPU since pmqosd started, cpu_costs[i] for cpus[i]
         * (NULL, 0 from a pmqosd without the ledger, and from
         * pmqos_explain_folded(): costs differ from CPU to CPU, so groups
         * neither fold on them nor carry them; nor the writers below).
         * Who wrote each CPU's knobs: pmqos_explanation_custody(). */
        struct pmqos_cpu_cost_info *cpu_costs;
        size_t n_cpu_costs;
} pmqos_explanation;

/* The broker's Explain(), computed when asked. Free with
 * pmqos_explanation_free() (*ret is NULL after a failure). An answer that is not one the broker sends (a key
 * twice, more than 8192 CPUs, 64 C-states per CPU, 4096 holders or unscanned users, or 1024 rules) is
 * refused whole: -EBADMSG. */
int pmqos_explain(pmqos_client *c, pmqos_explanation **ret);
/* The broker's ExplainFolded(): the same, but cpu_groups for cpus — small
 * on a machine of many CPUs (more than 8192 CPUs in all groups together is
 * refused as -EBADMSG too). A pmqosd without it answers UnknownMethod:
 * -EBADR (then pmqos_explain() gives the per-CPU figures). Since
 * LIBPMQOS_1.3. */
int pmqos_explain_folded(pmqos_client *c, pmqos_explanation **ret);
pmqos_explanation *pmqos_explanation_free(pmqos_explanation *e);

/* ---- the ledger: what the bounds cost (since LIBPMQOS_1.5) ---- */

/* One CPU's, from the kernel's cpuidle counters: a state is blocked when
 * its exit latency exceeds the bound the kernel applies on that CPU. */
typedef struct pmqos_cpu_cost_info {
        uint32_t cpu;
        uint64_t shallow_idle_usec; /* idle time spent while a state was blocked */
        uint64_t blocked_entries;   /* entries into blocked states meanwhile: 0 when the kernel obeys */
        bool verified;              /* a state is blocked and none was entered since the bound took effect */
} pmqos_cpu_cost_info;

/* One holder that has bound a CPU (Ledger()). */
typedef struct pmqos_ledger_row {
        char *kind;         /* "request", "floor", "battery-floor", "rule", "external" or "other" (older rows folded) */
        uint32_t uid;       /* 4294967295: not known */
        char *comm;         /* its process name; "" if not known */
        char *unit;         /* its systemd unit; "" if none */
        uint32_t cookie;    /* its last request's; 0 for others */
        bool active;        /* it binds a CPU with a state blocked now */
        uint64_t held_usec; /* wall time it bound, summed over CPUs */
        uint64_t shallow_idle_usec; /* summed over CPUs */
        uint64_t blocked_entries;
} pmqos_ledger_row;

/* The broker's Ledger(): every holder's row (at most a few dozen), as of
 * the call. Free with pmqos_ledger_free(). A pmqosd without it answers
 * UnknownMethod: -EBADR. */
int pmqos_ledger(pmqos_client *c, pmqos_ledger_row **ret, size_t *ret_n);
pmqos_ledger_row *pmqos_ledger_free(pmqos_ledger_row *rows, size_t n);

/* ---- custody of the per-CPU idle knobs: who wrote them (since LIBPMQOS_1.6) ---- */

/* The last process other than pmqosd that wrote one of a CPU's files since
 * pmqosd started (pmqosd watches them with fanotify; ForeignWrites= in
 * pmqosd.conf(5)). pid 0: nobody did, or pmqosd cannot watch (the other
 * fields are then 0 and ""). */
typedef struct pmqos_writer_info {
        uint32_t pid;
        char *comm;        /* its process name */
        char *unit;        /* its systemd unit, "" if none */
        char *value;       /* what the file held at its write */
        int64_t when_usec; /* µs since the epoch */
} pmqos_writer_info;

typedef struct pmqos_cpu_custody_info {
        uint32_t cpu;
        pmqos_writer_info foreign_writer; /* of its power/pm_qos_resume_latency_us */
        pmqos_writer_info *disabled_by;   /* of each C-state's cpuidle/stateK/disable, for cstates[k] */
        size_t n_disabled_by;             /* the CPU's n_cstates */
} pmqos_cpu_custody_info;

/* The writers of e->cpus[i]'s files (Explain()'s foreign_writer and
 * disabled_by), or NULL: i out of range, a pmqosd that does not say, or an
 * explanation of pmqos_explain_folded() (its groups carry no writers). It
 * lives as long as e. A function rather than a field of pmqos_cpu_info, which
 * old programs index by its size, or of pmqos_explanation: a program that
 * reads it gets a loader error naming LIBPMQOS_1.6 on an older library
 * instead of reading past the struct that library allocated. */
const pmqos_cpu_custody_info *pmqos_explanation_custody(const pmqos_explanation *e, size_t i);

/* ---- change notifications and event loops ---- */

typedef enum pmqos_event {
        PMQOS_EVENT_LATENCY_CHANGED,  /* usec: the new effective bound */
        PMQOS_EVENT_REQUESTS_CHANGED, /* the request set changed */
        PMQOS_EVENT_BROKER_LOST,      /* pmqosd left the bus */
        PMQOS_EVENT_BROKER_RESTARTED, /* pmqosd is back; this client's requests were issued again */
} pmqos_event;

typedef void (*pmqos_event_callback)(pmqos_client *c, pmqos_event event, int32_t usec, void *userdata);

/* Subscribes to changes; callback runs from pmqos_client_process() (and from
 * other calls on c). NULL unsubscribes. */
int pmqos_client_set_event_callback(pmqos_client *c, pmqos_event_callback callback, void *userdata);

/* An fd to poll for the events in pmqos_client_get_events() (POLLIN, …);
 * when it is ready, call pmqos_client_process(). The fd belongs to c.
 * Asking for it says the application serves c from now on: the library's
 * helper thread ends.
 * The loop is: pmqos_client_process(); poll(fd, pmqos_client_get_events());
 * get_events() is 0 only when messages are already queued, so process first. */
int pmqos_client_get_fd(pmqos_client *c);
int pmqos_client_get_events(pmqos_client *c);

/* Handles everything pending without blocking: signals, broker restarts.
 * Returns 0, or a negative errno if the bus connection is lost. */
int pmqos_client_process(pmqos_client *c);

/* Waits up to timeout_usec (UINT64_MAX: forever) for something to process,
 * then processes it. For programs without an event loop of their own. */
int pmqos_client_wait(pmqos_client *c, uint64_t timeout_usec);

#ifdef __cplusplus
}
#endif
