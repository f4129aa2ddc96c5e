/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The filter of budget.h: a record per connection (what it was sent since it
 * last read, whose it is) and per user (the sum, the call bucket). */

#include "bus/budget.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/store-page.h"
#include "util/hashmap.h"
#include "util/log.h"
#include "util/macro.h"

#define PING_TIMEOUT_USEC (5u * 1000000u)
#define TOKEN_BYTES 4096u

typedef struct UserBudget {
        uint32_t uid;
        uint64_t unread; /* of all its connections */
        double tokens;
        uint64_t last_usec; /* CLOCK_MONOTONIC of the last refill */
        unsigned n_conns, n_pings;
} UserBudget;

/* One for every connection that called: kept small (the bench's
 * connections row), the room for held calls only made for one that needs it. */
typedef struct ConnBudget {
        Budget *budget;
        UserBudget *user; /* NULL until the bus said whose it is */
        uint64_t unread;  /* bytes sent to it since it last answered a Ping */
        sd_bus_slot *ping;
        sd_bus_message **held; /* BUDGET_HELD_PER_CONNECTION calls waiting for its answer (or another's), or NULL */
        unsigned n_unknown, n_held;
        char name[]; /* unique bus name */
} ConnBudget;

struct Budget {
        sd_bus *bus;
        Clients *clients;
        Calls *calls;
        const Limits *limits;
        const Core *core;
        Hashmap conns; /* unique name → ConnBudget */
        Hashmap users; /* uid → UserBudget */
        /* Sent to the connections whose user the bus has not said yet, all
         * together: bounded as one user's, so that many connections' first
         * calls cannot add up past every user's bound. */
        uint64_t unknown_unread;
        unsigned n_pings;
        unsigned long n_dropped; /* calls left unanswered, for the log */
        /* Tests only (PMQOSD_TEST_FREEZE_BUDGET_CLOCK=1): the buckets' clock
         * stood still here, so that no bucket refills and what a burst of
         * calls gets does not depend on how fast pmqosd runs. 0: it runs. */
        uint64_t frozen_usec;
        sd_bus_slot *filter, *departures;
        uint64_t (*now)(void); /* now_usec(), or a test's clock */
};

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* The clock the buckets refill by. */
static uint64_t budget_now(const Budget *b) {
        return b->frozen_usec ? b->frozen_usec : b->now();
}

/* What a listing of at most limit requests costs (a page cannot hold more
 * than STORE_PAGE_MAX, whatever the store holds). */
static uint64_t requests_estimate(const Core *core, size_t limit) {
        uint64_t n = 512;
        size_t k = 0;
        STORE_FOREACH(req, &core->store) {
                if (k++ == limit)
                        break;
                n += 512 + strlen(request_exec(req)) + strlen(request_reason(req)) + 4 * req->n_cpus;
        }
        return n;
}

uint64_t budget_estimate(const Core *core, const char *interface, const char *member) {
        if (!interface || !member)
                return 512;
        if (strcmp(interface, "org.freedesktop.DBus.Introspectable") == 0)
                return 8192;
        if (strcmp(interface, "org.freedesktop.DBus.Properties") == 0)
                return strcmp(member, "GetAll") == 0 ? 2048 : 512;
        if (strcmp(member, "Explain") == 0)
                return 4096 + 1024 * (uint64_t) core->cpus.n_fds;
        /* Identical CPUs fold into one group: small on the largest machine. */
        if (strcmp(member, "ExplainFolded") == 0)
                return 4096 + 64 * (uint64_t) core->cpus.n_fds;
        /* Its reply is small, its work is Explain's: every CPU's file read
         * and every bound CPU's counters. */
        if (strcmp(member, "Ledger") == 0)
                return 512 + 384 * (uint64_t) LEDGER_ROWS_MAX + 1024 * (uint64_t) core->cpus.n_fds;
        if (strcmp(member, "ListRequests") == 0 || strcmp(member, "GetLatencyRequests") == 0)
                return requests_estimate(core, SIZE_MAX);
        /* The arguments are not read here: priced as the largest page. */
        if (strcmp(member, "ListRequestsPage") == 0)
                return requests_estimate(core, STORE_PAGE_MAX);
        return 512;
}

/* Whether u could go: no connection, no Ping, and a bucket full again by now. */
static bool user_idle(const Budget *b, const UserBudget *u, uint64_t now) {
        double rate = b->limits->max_calls_per_sec_per_uid;
        return u->n_conns == 0 && u->n_pings == 0 && u->tokens + (double) (now - u->last_usec) * rate / 1e6 >= rate;
}

/* A user's record outlives its connections until its bucket is full again
 * (so that connecting anew never refills it); the idle ones go when the
 * table has grown. */
static void users_sweep(Budget *b) {
        uint64_t now = budget_now(b);
        UserBudget *u;
        for (size_t i = 0; hashmap_next(&b->users, &i, (void **) &u);)
                if (user_idle(b, u, now)) {
                        free(hashmap_remove(&b->users, &u->uid));
                        i = 0; /* the table changed: from the start */
                }
}

static UserBudget *user_get(Budget *b, uint32_t uid) {
        UserBudget *u = hashmap_get(&b->users, &uid);
        if (u)
                return u;
        if (hashmap_size(&b->users) >= 64 && hashmap_size(&b->users) % 64 == 0)
                users_sweep(b);
        u = calloc(1, sizeof(UserBudget));
        if (!u)
                return NULL;
        *u = (UserBudget){ .uid = uid, .tokens = b->limits->max_calls_per_sec_per_uid, .last_usec = budget_now(b) };
        if (hashmap_put(&b->users, &u->uid, u) < 0) {
                free(u);
                return NULL;
        }
        return u;
}

static void conn_free(ConnBudget *cb) {
        Budget *b = cb->budget;
        hashmap_remove(&b->conns, cb->name);
        for (unsigned i = 0; i < cb->n_held; i++) {
                sd_bus_message_unref(cb->held[i]); /* its caller left: nobody to answer */
                calls_unkeep(b->calls);
        }
        if (cb->ping) {
                cb->ping = sd_bus_slot_unref(cb->ping);
                b->n_pings--;
                if (cb->user)
                        cb->user->n_pings--;
        }
        if (cb->user) {
                cb->user->unread -= cb->unread;
                cb->user->n_conns--;
        } else
                b->unknown_unread -= cb->unread;
        free(cb->held);
        free(cb);
}

/* Room for one more record: one that owes nothing goes. Beyond MaxClients:
 * the connections that owe pmqosd nothing are counted there, and a record
 * here is small. */
static bool make_room(Budget *b) {
        if (hashmap_size(&b->conns) < b->limits->max_clients + BUDGET_CONNECTIONS_SPARE)
                return true;
        ConnBudget *cb;
        for (size_t i = 0; hashmap_next(&b->conns, &i, (void **) &cb);)
                if (cb->unread == 0 && !cb->ping && cb->n_held == 0) {
                        conn_free(cb);
                        return true;
                }
        return false;
}

static ConnBudget *conn_get(Budget *b, const char *name) {
        ConnBudget *cb = hashmap_get(&b->conns, name);
        if (cb || !make_room(b))
                return cb;
        size_t len = strlen(name);
        cb = calloc(1, sizeof(ConnBudget) + len + 1);
        if (!cb)
                return NULL;
        cb->budget = b;
        memcpy(cb->name, name, len + 1);
        if (hashmap_put(&b->conns, cb->name, cb) < 0) {
                free(cb);
                return NULL;
        }
        return cb;
}

/* Whose the connection is, once the bus said (client.c asks it). */
static void learn_user(Budget *b, ConnBudget *cb) {
        Client *c = hashmap_get(&b->clients->by_name, cb->name);
        if (!c) {
                (void) client_get(b->clients, cb->name, &c); /* asks the bus; -EUSERS: asked again next call */
                return;
        }
        if (c->state != CLIENT_READY)
                return;
        UserBudget *u = user_get(b, (uint32_t) c->uid);
        if (!u)
                return;
        cb->user = u;
        u->n_conns++;
        u->unread += cb->unread;
        b->unknown_unread -= cb->unread;
        if (cb->ping)
                u->n_pings++; /* asked before it was known: its answer is counted off u */
}

/* What u owes went down: the calls its connections hold are looked at
 * again, from the start of the filter. */
static void release_held(Budget *b, const UserBudget *u, ConnBudget *only) {
        ConnBudget *cb;
        for (size_t i = 0; hashmap_next(&b->conns, &i, (void **) &cb);) {
                if ((u ? cb->user != u : cb != only) || cb->n_held == 0)
                        continue;
                for (unsigned k = 0; k < cb->n_held; k++) {
                        if (sd_bus_enqueue_for_read(b->bus, cb->held[k]) < 0)
                                (void) sd_bus_reply_method_errorf(cb->held[k], SD_BUS_ERROR_NO_MEMORY,
                                                                  "Out of memory.");
                        sd_bus_message_unref(cb->held[k]);
                        calls_unkeep(b->calls);
                }
                cb->n_held = 0;
        }
}

static void charge(Budget *b, ConnBudget *cb, uint64_t bytes) {
        cb->unread += bytes;
        if (cb->user)
                cb->user->unread += bytes;
        else
                b->unknown_unread += bytes;
}

static int on_ping(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ConnBudget *cb = userdata;
        Budget *b = cb->budget;
        const char *sender = sd_bus_message_get_sender(reply);

        (void) error;
        cb->ping = sd_bus_slot_unref(cb->ping);
        b->n_pings--;
        if (cb->user)
                cb->user->n_pings--;
        log_debug("%s answered whether it reads (%s).", cb->name,
                  sd_bus_message_is_method_error(reply, NULL) ? sd_bus_message_get_error(reply)->name : "yes");
        /* Any answer of the peer's own, even an error, says it read all before. */
        if (sender && strcmp(sender, cb->name) == 0) {
                if (cb->user)
                        cb->user->unread -= cb->unread;
                else
                        b->unknown_unread -= cb->unread;
                cb->unread = 0;
                release_held(b, cb->user, cb);
        }
        return 0;
}

/* Asks cb to show that it reads, unless it is asked already or too many are. */
static void ask_ping(Budget *b, ConnBudget *cb) {
        if (cb->ping || cb->unread == 0 || b->n_pings >= BUDGET_PINGS_MAX ||
            (cb->user && cb->user->n_pings >= BUDGET_PINGS_PER_UID))
                return;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_message_new_method_call(b->bus, &m, cb->name, "/", "org.freedesktop.DBus.Peer", "Ping");
        if (r >= 0)
                r = sd_bus_call_async(b->bus, &cb->ping, m, on_ping, cb, PING_TIMEOUT_USEC);
        if (r < 0) {
                log_debug("Cannot ask %s whether it reads: %s", cb->name, strerror(-r));
                return;
        }
        log_debug("Asking %s whether it reads: %" PRIu64 " bytes sent since it last showed it did.", cb->name,
                  cb->unread);
        b->n_pings++;
        if (cb->user)
                cb->user->n_pings++;
        charge(b, cb, 256); /* the Ping waits in the bus too */
}

static bool take_tokens(Budget *b, UserBudget *u, double n) {
        uint64_t now = budget_now(b);
        double rate = b->limits->max_calls_per_sec_per_uid;
        u->tokens += (double) (now - u->last_usec) * rate / 1e6;
        if (u->tokens > rate)
                u->tokens = rate;
        u->last_usec = now;
        if (u->tokens < n && u->tokens < rate) /* a call bigger than the bucket waits for a full one */
                return false;
        u->tokens -= n;
        return true;
}

/* The call waits until cb (or its user's other connections) showed that
 * they read; past what a connection may have waiting, or once these calls
 * keep half of what the descriptor limit leaves room for (the other half
 * is the callers' whom the bus has not named yet, root's first call among
 * them, and polkit's), it goes unanswered. */
static int hold(Budget *b, ConnBudget *cb, sd_bus_message *m) {
        ask_ping(b, cb);
        if (!cb->held)
                cb->held = calloc(BUDGET_HELD_PER_CONNECTION, sizeof(sd_bus_message *));
        if (cb->held && cb->n_held < BUDGET_HELD_PER_CONNECTION && calls_keep(b->calls, b->calls->max_kept / 2)) {
                cb->held[cb->n_held++] = sd_bus_message_ref(m);
                return 1;
        }
        if (b->n_dropped++ % 100000 == 0)
                log_caller_warning("Calls of a connection that does not read its answers go unanswered (%lu so far).",
                                   b->n_dropped);
        return 1; /* handled: no answer at all */
}

/* The bus has not said whose cb is, and the call asks for a large answer or
 * such connections together were sent a user's worth: the call waits
 * until it has (on_resolved() lets it run again), or, when that cannot be
 * waited for, is refused. */
static int hold_unknown(Budget *b, ConnBudget *cb, sd_bus_message *m, sd_bus_error *error) {
        const Client *c = hashmap_get(&b->clients->by_name, cb->name);
        if (c && c->state == CLIENT_RESOLVING) {
                if (!cb->held)
                        cb->held = calloc(BUDGET_HELD_PER_CONNECTION, sizeof(sd_bus_message *));
                /* Up to three quarters of the room: non-readers' calls
                 * (hold()) take at most half, so a new connection's first
                 * call, root's among them, always finds a place. */
                if (cb->held && cb->n_held < BUDGET_HELD_PER_CONNECTION &&
                    calls_keep(b->calls, b->calls->max_kept / 4)) {
                        cb->held[cb->n_held++] = sd_bus_message_ref(m);
                        return 1;
                }
        }
        return sd_bus_error_set(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                "Many new connections wait to be known to pmqosd; retry shortly.");
}

/* The bus said whose a connection is: what it was sent counts for its
 * user from now on, and its calls that waited for that run. */
static void on_resolved(Client *c, void *userdata) {
        Budget *b = userdata;
        ConnBudget *cb = hashmap_get(&b->conns, c->name);
        if (!cb || cb->user)
                return;
        if (c->uid == 0) {
                /* Never counted: the record goes (a thousand of root's
                 * connections are 100 KiB less, the bench's connections row). */
                if (cb->n_held > 0)
                        release_held(b, NULL, cb);
                conn_free(cb);
                return;
        }
        learn_user(b, cb);
        if (cb->n_held > 0)
                release_held(b, NULL, cb);
}

static int budget_filter(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Budget *b = userdata;
        const char *sender = sd_bus_message_get_sender(m);

        if (!sd_bus_message_is_method_call(m, NULL, NULL) || !sender || bus_message_from_driver(m) ||
            calls_has(b->calls, m))
                return 0; /* not a call, or one that runs again (calls.h): counted when it came */
        /* Root is never refused, and its connections have no record once known. */
        const Client *c = hashmap_get(&b->clients->by_name, sender);
        if (c && c->state == CLIENT_READY && c->uid == 0)
                return 0;
        ConnBudget *cb = conn_get(b, sender);
        if (!cb)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "pmqosd follows %u connections, the most it follows at once.",
                                         b->limits->max_clients + BUDGET_CONNECTIONS_SPARE);
        if (!cb->user)
                learn_user(b, cb);
        UserBudget *u = cb->user;
        if (u && u->uid == 0)
                return 0;
        const Limits *l = b->limits;
        /* A call flagged no-reply-expected is answered with nothing. */
        bool no_reply = sd_bus_message_get_expect_reply(m) == 0;
        if (cb->unread >= l->max_unread_bytes_per_connection || (u && u->unread >= l->max_unread_bytes_per_uid))
                return no_reply ? 1 : hold(b, cb, m);
        const char *interface = sd_bus_message_get_interface(m);
        uint64_t bytes = no_reply ? 0 : budget_estimate(b->core, interface, sd_bus_message_get_member(m));
        /* Whose a connection is comes one bus round trip after its first
         * call: a call with a large answer waits for it, so that it counts
         * against its user's bound (a thousand connections' first calls
         * would otherwise each be a whole listing, counted for nobody). */
        if (!u && bytes > 0 && (bytes > TOKEN_BYTES || b->unknown_unread >= l->max_unread_bytes_per_uid))
                return hold_unknown(b, cb, m, error);
        /* Peer's calls cost sd-bus next to nothing, and a client's Ping says it reads. */
        uint64_t extra_tokens = bytes / TOKEN_BYTES; /* one more for each whole TOKEN_BYTES */
        bool ok = !u ? cb->n_unknown++ < BUDGET_CALLS_UNKNOWN
                     : (interface && strcmp(interface, "org.freedesktop.DBus.Peer") == 0) ||
                                  take_tokens(b, u, 1.0 + (double) extra_tokens);
        if (!ok) {
                if (no_reply)
                        return 1;
                charge(b, cb, 512);
                if (!u)
                        return sd_bus_error_set(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                                "This connection makes many calls before the bus says whose it is; "
                                                "retry shortly.");
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "User %u makes more calls than pmqosd answers (MaxCallsPerSecondPerUser=%u); "
                                         "retry shortly.",
                                         (unsigned) u->uid, l->max_calls_per_sec_per_uid);
        }
        charge(b, cb, bytes);
        return 0;
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Budget *b = userdata;
        const char *name, *old_owner, *new_owner;

        (void) error;
        if (!bus_message_from_driver(m) || sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0)
                return 0;
        ConnBudget *cb;
        if (name[0] == ':' && !new_owner[0] && (cb = hashmap_get(&b->conns, name))) {
                UserBudget *u = cb->user;
                conn_free(cb); /* what waited in the bus for it went with it */
                if (u)
                        release_held(b, u, NULL);
        }
        return 0;
}

int budget_new(Budget **ret, sd_bus *bus, Clients *clients, Calls *calls, const Limits *limits, const Core *core) {
        Budget *b = calloc(1, sizeof(Budget));
        if (!b)
                return -ENOMEM;
        *b = (Budget){
                .bus = bus, .clients = clients, .calls = calls, .limits = limits, .core = core, .now = now_usec
        };
        hashmap_init(&b->conns, &hashmap_string_ops);
        hashmap_init(&b->users, &hashmap_u32_ops);
        const char *freeze = getenv("PMQOSD_TEST_FREEZE_BUDGET_CLOCK");
        if (freeze && strcmp(freeze, "1") == 0) {
                b->frozen_usec = now_usec();
                log_warning("PMQOSD_TEST_FREEZE_BUDGET_CLOCK=1 (for tests): no caller's call bucket ever refills.");
        }
        int r = sd_bus_match_signal(bus, &b->departures, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                    "org.freedesktop.DBus", "NameOwnerChanged", on_name_owner_changed, b);
        if (r >= 0)
                r = sd_bus_add_filter(bus, &b->filter, budget_filter, b);
        if (r < 0) {
                budget_free(b);
                return r;
        }
        clients->resolved = on_resolved;
        clients->resolved_userdata = b;
        *ret = b;
        return 0;
}

void budget_set_clock(Budget *b, uint64_t (*now)(void)) {
        b->now = now;
}

Budget *budget_free(Budget *b) {
        if (!b)
                return NULL;
        b->filter = sd_bus_slot_unref(b->filter);
        b->departures = sd_bus_slot_unref(b->departures);
        if (b->clients->resolved_userdata == b)
                b->clients->resolved = NULL;
        ConnBudget *cb;
        for (size_t i; (i = 0, hashmap_next(&b->conns, &i, (void **) &cb));)
                conn_free(cb);
        UserBudget *u;
        for (size_t i = 0; hashmap_next(&b->users, &i, (void **) &u);)
                free(u);
        hashmap_clear(&b->conns);
        hashmap_clear(&b->users);
        free(b);
        return NULL;
}
