/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the files of libpmqos share: the client object and the helpers every
 * call goes through. Not installed; nothing here is exported. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "dbus/contract.h"
#include "pmqos.h"
#include "util/macro.h" /* _cleanup_ */

#define _public_ __attribute__((visibility("default")))

#define BUS_NAME PMQOS_BUS_NAME
#define OBJECT_PATH PMQOS_OBJECT_PATH
#define NATIVE_IFACE PMQOS_NATIVE_INTERFACE
#define QOS_IFACE PMQOS_QOS_INTERFACE

/* pmqos.h is self-contained for users; it must say what the contract says. */
/* NOLINTNEXTLINE(misc-redundant-expression): equal is the point */
_Static_assert(PMQOS_LATENCY_MAX == PMQOS_CONTRACT_LATENCY_MAX, "pmqos.h and the contract disagree");
/* NOLINTNEXTLINE(misc-redundant-expression) */
_Static_assert(PMQOS_LATENCY_NONE == PMQOS_CONTRACT_LATENCY_NONE, "pmqos.h and the contract disagree");
#define INTERACTIVE_TIMEOUT_USEC (5ull * 60 * 1000000) /* a person typing a password */

/* A request made through this client, kept to issue it again after a restart. */
typedef struct Entry Entry;
struct Entry {
        uint32_t cookie;        /* what the caller holds, forever */
        uint32_t broker_cookie; /* what the current broker calls it */
        int32_t value;
        char *reason;
        uint64_t deadline_usec; /* CLOCK_MONOTONIC, 0: none */
        uint32_t *cpus;
        size_t n_cpus;
        bool persistent;
        bool kept; /* the broker that came back still has it (see reissue_all()) */
        Entry *next;
};

struct pmqos_client {
        sd_bus *bus;
        char *last_error;
        bool interactive;
        uint64_t call_timeout_usec; /* pmqos_client_set_timeout(); 0: sd-bus's default */
        bool broker_gone;           /* between NameOwnerChanged "left" and "back" */
        char *broker;               /* the broker's unique name: only its signals count */
        Entry *entries;
        sd_bus_slot *owner_slot;
        sd_bus_slot *latency_slot;
        sd_bus_slot *requests_slot;
        pmqos_event_callback callback;
        void *userdata;

        /* Calls on c and the helper thread take turns (recursive: a callback
         * may call back in). */
        pthread_mutex_t lock;
        /* The helper thread keeps the connection served while the
         * application does not (it never asked for the fd): a broker
         * restart is then handled without any call of the application. */
        pthread_t helper;
        bool helper_created, helper_stop;
        bool integrated; /* the application polls pmqos_client_get_fd() itself */
        int wake_fd;     /* eventfd: wakes the helper, or -1 */
};

/* What a request asks for, as it goes to the broker. */
typedef struct RequestArgs {
        int32_t value;
        const char *reason;
        uint32_t timeout_sec;
        const uint32_t *cpus;
        size_t n_cpus;
        bool persistent;
} RequestArgs;

/* The requests made through c (libpmqos-issue.c). */
int client_append_options(sd_bus_message *m, const RequestArgs *a);
Entry *client_entry_free(Entry *e);
Entry *client_find_entry(pmqos_client *c, uint32_t cookie, Entry ***ret_link);
/* Native Request(); *ret_cookie is the broker's cookie. */
int client_issue(pmqos_client *c, const RequestArgs *a, uint32_t *ret_cookie);
/* The broker's unique name; its NameOwnerChanged handler (a restart
 * re-issues what the new broker lacks). */
void client_set_broker(pmqos_client *c, const char *unique);
int client_on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* CLOCK_MONOTONIC in µs. */
uint64_t client_now_usec(void);
/* What pmqos_client_last_error() says from now on (copied; NULL clears). */
void client_set_last_error(pmqos_client *c, const char *message);
/* Records the broker's message for pmqos_client_last_error() and maps the
 * error (or r) to a negative errno. */
int client_map_error(pmqos_client *c, const sd_bus_error *e, int r);
/* How long a call on c waits for its answer (0: sd-bus's default). */
uint64_t client_call_timeout(pmqos_client *c);
/* A method call on the broker's object; append adds the arguments. */
int client_call(pmqos_client *c, const char *iface, const char *member, sd_bus_message **ret_reply,
                int (*append)(sd_bus_message *m, const void *data), const void *data);
/* Whether m comes from the broker's own connection (a peer may send a
 * look-alike straight to us: sd-bus's match on a well-known sender lets it in). */
bool client_from_broker(pmqos_client *c, sd_bus_message *m);
/* Tells the application's callback, if it set one. */
void client_emit(pmqos_client *c, pmqos_event event, int32_t usec);
/* ListRequests, without dispatching first (it runs from a callback too). */
int client_list(pmqos_client *c, pmqos_request_info **ret, size_t *ret_n);
/* One ListRequests entry (a{sv}) into info. ret_empty: an empty dictionary
 * is allowed and said so (info is then untouched); NULL: it is -EBADMSG. */
int client_read_request_info(sd_bus_message *m, pmqos_request_info *info, bool *ret_empty);
/* Handles what arrived (signals, a broker restart). */
int client_dispatch(pmqos_client *c);

/* The readers of a{sv} answers (libpmqos-read.c), for libpmqos-explain.c and libpmqos-ledger.c. */
int read_string(sd_bus_message *m, char **ret);
int read_bool(sd_bus_message *m, bool *ret);
/* Calls item(m, array + i * size) for each a{sv} of an aa{sv} variant, into a
 * new array of at most max entries. */
int read_array(sd_bus_message *m, size_t size, size_t max, int (*item)(sd_bus_message *m, void *entry),
               void (*done)(void *entry), void **ret, size_t *ret_n);
/* Runs field(m, key index, userdata) for every entry of an a{sv}, skipping unknown keys. */
int read_dict(sd_bus_message *m, const char *const *keys, unsigned n_keys,
              int (*field)(sd_bus_message *m, unsigned key, void *userdata), void *userdata);
/* (libpmqos-cpus.c) One C-state of Explain()'s, at most EXPLAIN_CSTATES_MAX
 * a CPU: its keys "name", "latency", "allowed", "disabled", "usage", "time"
 * into a pmqos_cstate_info (an item of read_array()); what it holds freed. */
#define EXPLAIN_CSTATES_MAX 64u
int cstate_item(sd_bus_message *m, void *entry);
void cstate_done(void *entry);
void cpu_done(void *entry);

/* What the library allocates for every explanation: the public struct
 * first (a pmqos_explanation * points at it), then what is read beside it
 * without growing it: the custody of each CPU's knobs, custody[i] for
 * cpus[i] (NULL, 0 when the broker did not say, and for cpu_groups). */
typedef struct Explanation {
        pmqos_explanation pub;
        pmqos_cpu_custody_info *custody;
        size_t n_custody;
} Explanation;

/* (libpmqos-explain.c) An Explain() or ExplainFolded() reply read whole into
 * *ret (NULL on failure): -EBADMSG for what pmqosd never sends, -ENOMEM. */
int explain_read(sd_bus_message *reply, pmqos_explanation **ret);
/* (libpmqos-cpus.c) Explain()'s cpus into e->cpus, what the bounds cost there
 * into e->cpu_costs and who wrote their knobs into the Explanation's custody;
 * e is an Explanation's pub. */
int explain_read_cpus(sd_bus_message *m, pmqos_explanation *e);
void custody_done(pmqos_cpu_custody_info *custody);
