/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the bus budget (budget.c) on a private dbus-daemon, its call
 * buckets on a fake clock: a user's calls past MaxCallsPerSecondPerUser
 * refused until the clock refilled the bucket (never past full), a call with
 * a large answer costing a token per 4 KiB, Peer calls and root free; a
 * connection sent more than it showed it read is asked Ping, its call held
 * until it answered and then run; one that leaves with calls held frees
 * them; the estimates of what an answer costs. */

#include "bus-fixture.h"

#include "bus/budget.h"

#define PATH "/org/freedesktop/PMQoS/Test"
#define IFACE "org.freedesktop.PMQoS.Test"

static TestBus tb;
static sd_bus *daemon_bus, *caller;
static sd_bus *all[3];
static Clients clients;
static Calls calls;
static Limits limits;
static Core core;
static Budget *budget;
static uint64_t fake_now = 1000000;

static uint64_t fake_clock(void) {
        return fake_now;
}

typedef struct Seen {
        unsigned runs, answered, refused, pings, runs_at_ping;
        char error[512];
} Seen;
static Seen seen;

static int method_small(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        seen.runs++;
        return sd_bus_reply_method_return(message, "s", "small");
}

static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Small", "", "s", method_small, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

/* The caller sees the daemon's Ping (sd-bus answers it by itself). */
static int on_caller_message(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        if (sd_bus_message_is_method_call(m, "org.freedesktop.DBus.Peer", "Ping")) {
                seen.pings++;
                seen.runs_at_ping = seen.runs;
        }
        return 0;
}

static void setup(void) {
        test_bus_start(&tb);
        daemon_bus = test_bus_connect(&tb);
        limits = LIMITS_DEFAULT;
        limits.max_calls_per_sec_per_uid = 3;
        store_init(&core.store, 1);
        clients_init(&clients, 100, NULL, NULL);
        ck_assert_int_ge(clients_watch(&clients, daemon_bus), 0);
        calls_init(&calls, &clients, NULL, &limits);
        calls_attach_bus(&calls, daemon_bus);
        ck_assert_int_ge(sd_bus_add_object_vtable(daemon_bus, NULL, PATH, IFACE, vtable, NULL), 0);
        ck_assert_int_ge(budget_new(&budget, daemon_bus, &clients, &calls, &limits, &core), 0);
        budget_set_clock(budget, fake_clock);
        seen = (Seen){ 0 };
}

static void teardown(void) {
        budget = budget_free(budget);
        calls_done(&calls);
        clients_done(&clients);
        store_done(&core.store);
        sd_bus_flush_close_unref(caller);
        caller = NULL;
        sd_bus_flush_close_unref(daemon_bus);
        test_bus_stop(&tb);
}

static bool resolved(void *userdata) {
        const Client *c = userdata;
        return c->state != CLIENT_RESOLVING;
}

/* The caller of uid connects, and the bus said whose it is before its first call. */
static void connect_caller(uid_t uid) {
        caller = uid == 0 ? test_bus_connect(&tb) : test_bus_connect_as(&tb, uid);
        ck_assert_int_ge(sd_bus_add_filter(caller, NULL, on_caller_message, NULL), 0);
        all[0] = daemon_bus, all[1] = caller, all[2] = NULL;
        Client *c = NULL;
        ck_assert_int_eq(client_get(&clients, unique_name(caller), &c), 0);
        test_bus_run_until(all, resolved, c);
        ck_assert_int_eq(c->state, CLIENT_READY);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        const sd_bus_error *e = sd_bus_message_get_error(m);
        if (e) {
                ck_assert_str_eq(e->name, SD_BUS_ERROR_LIMITS_EXCEEDED);
                snprintf(seen.error, sizeof(seen.error), "%s", e->message);
                seen.refused++;
        }
        seen.answered++;
        return 0;
}

static void send_call(const char *interface, const char *member) {
        ck_assert_int_ge(sd_bus_call_method_async(caller, NULL, unique_name(daemon_bus), PATH, interface, member,
                                                  on_reply, NULL, ""),
                         0);
}

/* n calls of member, one after the other; returns how many were refused. */
static unsigned calls_of(const char *interface, const char *member, unsigned n) {
        unsigned refused = seen.refused;
        for (unsigned i = 0; i < n; i++) {
                unsigned want = seen.answered + 1;
                send_call(interface, member);
                test_bus_run_until_count(all, &seen.answered, want);
        }
        return seen.refused - refused;
}

static bool root_only(void) {
        if (geteuid() == 0)
                return false;
        printf("SKIP: a caller of another uid needs root (seteuid)\n");
        return true;
}

START_TEST(test_bucket_refills_on_the_clock) {
        if (root_only())
                return;
        connect_caller(65534);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 3), 0);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 1);
        ck_assert_ptr_nonnull(strstr(seen.error, "User 65534 makes more calls than pmqosd answers"));
        ck_assert_uint_eq(seen.runs, 3);
        fake_now += 1000000 / 3 + 1; /* a third of a second: one token */
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 0);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 1);
        fake_now += 60u * 1000000u; /* a minute: full, not more */
        ck_assert_uint_eq(calls_of(IFACE, "Small", 3), 0);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 1);
        /* Peer's calls are free, and a client's Ping says it reads. */
        ck_assert_uint_eq(calls_of("org.freedesktop.DBus.Peer", "Ping", 5), 0);
        ck_assert_uint_eq(seen.runs, 7);
}
END_TEST

/* Introspect's answer is priced 8 KiB: three tokens of a bucket of three. */
START_TEST(test_large_answer_costs_more) {
        if (root_only())
                return;
        connect_caller(65534);
        ck_assert_uint_eq(calls_of("org.freedesktop.DBus.Introspectable", "Introspect", 1), 0);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 1);
        ck_assert_uint_eq(seen.runs, 0);
}
END_TEST

START_TEST(test_root_is_exempt) {
        if (geteuid() != 0) { /* the caller is this test's own uid */
                printf("SKIP: root's own calls need the test to run as root\n");
                return;
        }
        connect_caller(0);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 10), 0);
        ck_assert_uint_eq(seen.runs, 10);
}
END_TEST

/* Past MaxUnreadBytesPerConnection the connection is asked to show it
 * reads: its call waits for the answer (it had not run when the Ping
 * came), then runs. */
START_TEST(test_unread_past_bound_is_pinged) {
        if (root_only())
                return;
        limits.max_unread_bytes_per_connection = 1000; /* two small answers (512 each) */
        limits.max_calls_per_sec_per_uid = 100;
        connect_caller(65534);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 2), 0);
        ck_assert_uint_eq(seen.pings, 0);
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 0);
        ck_assert_uint_eq(seen.pings, 1);
        ck_assert_uint_eq(seen.runs_at_ping, 2);
        ck_assert_uint_eq(seen.runs, 3);
        ck_assert_uint_eq(calls.n_kept, 0);
        /* Its answer wiped the slate: the next call goes without a Ping. */
        ck_assert_uint_eq(calls_of(IFACE, "Small", 1), 0);
        ck_assert_uint_eq(seen.pings, 1);
}
END_TEST

static bool kept_is(void *userdata) {
        return calls.n_kept == *(const unsigned *) userdata;
}

/* One that does not read and leaves: what it had held goes with it. */
START_TEST(test_departure_frees_held_calls) {
        if (root_only())
                return;
        limits.max_unread_bytes_per_connection = 1000;
        limits.max_calls_per_sec_per_uid = 100;
        connect_caller(65534);
        for (int i = 0; i < 4; i++)
                send_call(IFACE, "Small");
        ck_assert_int_ge(sd_bus_flush(caller), 0);
        sd_bus *only_daemon[] = { daemon_bus, NULL };
        unsigned two = 2, none = 0;
        test_bus_run_until(only_daemon, kept_is, &two); /* the 3rd and 4th, held */
        ck_assert_uint_eq(seen.runs, 2);
        caller = sd_bus_close_unref(caller);
        test_bus_run_until(only_daemon, kept_is, &none);
        ck_assert_uint_eq(seen.runs, 2);
}
END_TEST

START_TEST(test_estimates) {
        ck_assert_uint_eq(budget_estimate(&core, NULL, NULL), 512);
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.DBus.Introspectable", "Introspect"), 8192);
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.DBus.Properties", "GetAll"), 2048);
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.DBus.Properties", "Get"), 512);
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.PMQoS", "Request"), 512);
        uint64_t empty = budget_estimate(&core, "org.freedesktop.PMQoS", "ListRequests");
        for (int i = 0; i < 3; i++) {
                Request *r = request_new(&core.store);
                ck_assert_ptr_nonnull(r);
                r->value = 10;
                r->exec = shared_string_new("program");
                ck_assert_int_eq(store_add(&core.store, r, NULL), 0);
        }
        /* Each request: 512 and its strings ("program", no reason). */
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.PMQoS", "ListRequests"), empty + 3 * (512 + 7));
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.UPower.QoS", "GetLatencyRequests"),
                          empty + 3 * (512 + 7));
        core.cpus.n_fds = 4;
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.PMQoS", "Explain"), 4096 + 4 * 1024);
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.PMQoS", "ExplainFolded"), 4096 + 4 * 64);
        /* Ledger() reads what Explain() does (the review: 4.6 ms a call on
         * 512 CPUs, priced as a fixed 25 KiB): per CPU as Explain. */
        ck_assert_uint_eq(budget_estimate(&core, "org.freedesktop.PMQoS", "Ledger"), 512 + 384 * 64 + 4 * 1024);
        core.cpus.n_fds = 0;
}
END_TEST

int main(void) {
        Suite *s = suite_create("budget");
        TCase *tc = tcase_create("budget");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_bucket_refills_on_the_clock);
        tcase_add_test(tc, test_large_answer_costs_more);
        tcase_add_test(tc, test_root_is_exempt);
        tcase_add_test(tc, test_unread_past_bound_is_pinged);
        tcase_add_test(tc, test_departure_frees_held_calls);
        tcase_add_test(tc, test_estimates);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
