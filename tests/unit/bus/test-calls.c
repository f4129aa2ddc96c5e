/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of calls.c on a private dbus-daemon, with a caller of another
 * uid and polkit unreachable (the polkit thread answers "unavailable"): a
 * handler that must wait returns, and the very message runs it again once
 * the bus said who called (run 2) and once polkit answered (run 3); an
 * answer for another action than the call now needs is stale and polkit is
 * asked again, the call counted once all along; root is never asked; a
 * caller that leaves takes its waiting call along; MaxPending, the room for
 * kept messages and its reserve; everything counted is given back. */

#include "bus-fixture.h"

#include "bus/calls.h"
#include "util/macro.h"

#define PATH "/org/freedesktop/PMQoS/Test"
#define IFACE "org.freedesktop.PMQoS.Test"

static TestBus tb;
static sd_event *event;
static sd_bus *daemon_bus;
static Clients clients;
static Auth *auth;
static Limits limits;
static Calls calls;

typedef struct Runs {
        unsigned runs, departed, answered;
        unsigned charged_at[8]; /* calls.n_charged as each run began */
        const char *action[8];  /* what each run needs of polkit */
        char error[64], message[512];
} Runs;
static Runs got;

static int method_do(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        (void) userdata;
        _cleanup_(call_scope_done) CallScope scope = { &calls, message };
        unsigned run = got.runs++;
        ck_assert_uint_lt(run, 8);
        got.charged_at[run] = calls.n_charged;
        Client *c = NULL;
        int r = call_know_caller(&calls, message, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = call_authorize(&calls, message, c, got.action[run], error);
        if (r <= 0)
                return r < 0 ? r : 1;
        return sd_bus_reply_method_return(message, "s", "done");
}

static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Do", "", "s", method_do, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

static void on_departed(Client *c, void *userdata) {
        (void) c, (void) userdata;
        got.departed++;
}

static void setup(void) {
        /* polkit is not there: every check is answered AUTH_UNAVAILABLE. */
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/pmqos-test-bus", 1);
        test_bus_start(&tb);
        ck_assert_int_ge(sd_event_new(&event), 0);
        daemon_bus = test_bus_connect(&tb);
        ck_assert_int_ge(sd_bus_attach_event(daemon_bus, event, 0), 0);
        limits = LIMITS_DEFAULT;
        clients_init(&clients, 100, on_departed, NULL);
        ck_assert_int_ge(clients_watch(&clients, daemon_bus), 0);
        ck_assert_int_eq(auth_new(&auth, event, 4), 0);
        calls_init(&calls, &clients, auth, &limits);
        calls_attach_bus(&calls, daemon_bus);
        ck_assert_int_ge(sd_bus_add_object_vtable(daemon_bus, NULL, PATH, IFACE, vtable, NULL), 0);
        got = (Runs){ 0 };
        for (int i = 0; i < 8; i++)
                got.action[i] = ACTION_REQUEST_LATENCY;
}

/* Whatever the test did, nothing stays counted. */
static void assert_all_given_back(void) {
        ck_assert_uint_eq(hashmap_size(&calls.by_message), 0);
        ck_assert_uint_eq(hashmap_size(&calls.by_uid), 0);
        ck_assert_uint_eq(calls.n_charged, 0);
        ck_assert_uint_eq(calls.n_wait_caller, 0);
        ck_assert_uint_eq(calls.n_kept, 0);
}

static void teardown(void) {
        calls_done(&calls);
        clients_done(&clients);
        auth = auth_free(auth);
        sd_bus_flush_close_unref(daemon_bus);
        event = sd_event_unref(event);
        test_bus_stop(&tb);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        const sd_bus_error *e = sd_bus_message_get_error(m);
        if (e) {
                snprintf(got.error, sizeof(got.error), "%s", e->name);
                snprintf(got.message, sizeof(got.message), "%s", e->message ? e->message : "");
        }
        got.answered++;
        return 0;
}

/* caller calls Do; its reply lands in got. */
static void call_do(sd_bus *caller) {
        ck_assert_int_ge(sd_bus_attach_event(caller, event, 0), 0);
        ck_assert_int_ge(
                sd_bus_call_method_async(caller, NULL, unique_name(daemon_bus), PATH, IFACE, "Do", on_reply, NULL, ""),
                0);
}

static bool root_only(void) {
        if (geteuid() == 0)
                return false;
        printf("SKIP: a caller of another uid needs root (seteuid)\n");
        return true;
}

START_TEST(test_runs_again_until_polkit_answered) {
        if (root_only())
                return;
        sd_bus *caller = test_bus_connect_as(&tb, 65534);
        call_do(caller);
        test_event_run_until_count(event, &got.answered, 1);
        /* 1: who called? asked of the bus; 2: polkit asked; 3: its answer. */
        ck_assert_uint_eq(got.runs, 3);
        ck_assert_uint_eq(got.charged_at[1], 0);
        ck_assert_uint_eq(got.charged_at[2], 1);
        ck_assert_str_eq(got.error, SD_BUS_ERROR_ACCESS_DENIED); /* fails closed */
        ck_assert_ptr_nonnull(strstr(got.message, "polkit gave no answer about " ACTION_REQUEST_LATENCY));
        assert_all_given_back();
        sd_bus_flush_close_unref(caller);
}
END_TEST

/* A reload changed what the call needs while polkit was asked: the answer
 * about the old action is not taken for the new one. */
START_TEST(test_stale_answer_asks_again) {
        if (root_only())
                return;
        got.action[2] = got.action[3] = ACTION_REQUEST_LATENCY_PERSISTENT;
        sd_bus *caller = test_bus_connect_as(&tb, 65534);
        call_do(caller);
        test_event_run_until_count(event, &got.answered, 1);
        ck_assert_uint_eq(got.runs, 4);
        ck_assert_uint_eq(got.charged_at[2], 1);
        ck_assert_uint_eq(got.charged_at[3], 1); /* still counted once */
        ck_assert_str_eq(got.error, SD_BUS_ERROR_ACCESS_DENIED);
        ck_assert_ptr_nonnull(strstr(got.message, "about " ACTION_REQUEST_LATENCY_PERSISTENT " "));
        assert_all_given_back();
        sd_bus_flush_close_unref(caller);
}
END_TEST

START_TEST(test_root_is_never_asked) {
        if (geteuid() != 0) { /* the caller is this test's own uid */
                printf("SKIP: root's own calls need the test to run as root\n");
                return;
        }
        sd_bus *caller = test_bus_connect(&tb);
        call_do(caller);
        test_event_run_until_count(event, &got.answered, 1);
        ck_assert_str_eq(got.error, "");
        ck_assert_uint_eq(got.runs, 2); /* the bus asked who called; polkit not */
        assert_all_given_back();
        sd_bus_flush_close_unref(caller);
}
END_TEST

/* A caller that leaves while its call waits: the call is dropped unanswered. */
START_TEST(test_departed_caller_takes_its_call) {
        if (root_only())
                return;
        sd_bus *caller = test_bus_connect_as(&tb, 65534);
        call_do(caller);
        test_event_run_until_count(event, &got.runs, 1);
        ck_assert_uint_eq(calls.n_wait_caller, 1);
        ck_assert_uint_eq(calls.n_kept, 1);
        sd_bus_flush_close_unref(caller);
        test_event_run_until_count(event, &got.departed, 1);
        ck_assert_uint_eq(got.answered, 0);
        assert_all_given_back();
}
END_TEST

/* No room left for kept messages: a caller not known yet is refused at once. */
START_TEST(test_no_room_to_keep) {
        calls_set_max_kept(&calls, 0);
        sd_bus *caller = test_bus_connect(&tb);
        call_do(caller);
        test_event_run_until_count(event, &got.answered, 1);
        ck_assert_str_eq(got.error, SD_BUS_ERROR_LIMITS_EXCEEDED);
        ck_assert_ptr_nonnull(strstr(got.message, "keeps 0 calls"));
        ck_assert_uint_eq(got.runs, 1);
        assert_all_given_back();
        sd_bus_flush_close_unref(caller);
        test_event_run_until_count(event, &got.departed, 1);
}
END_TEST

/* MaxPending: once that many calls of anyone wait for polkit, the next is refused. */
START_TEST(test_max_pending_refuses) {
        if (root_only())
                return;
        limits.max_pending = 0;
        sd_bus *caller = test_bus_connect_as(&tb, 65534);
        call_do(caller);
        test_event_run_until_count(event, &got.answered, 1);
        ck_assert_str_eq(got.error, SD_BUS_ERROR_LIMITS_EXCEEDED);
        ck_assert_ptr_nonnull(strstr(got.message, "the most it takes at once"));
        ck_assert_uint_eq(got.runs, 2);
        assert_all_given_back();
        sd_bus_flush_close_unref(caller);
}
END_TEST

START_TEST(test_keep_leaves_its_reserve) {
        calls_set_max_kept(&calls, 4);
        ck_assert(calls_keep(&calls, 2));
        ck_assert(!calls_keep(&calls, 3)); /* 1 kept + 3 reserved: no room */
        ck_assert(calls_keep(&calls, 2));
        ck_assert(!calls_keep(&calls, 2));
        ck_assert(calls_keep(&calls, 0));
        ck_assert(calls_keep(&calls, 0));
        ck_assert(!calls_keep(&calls, 0));
        ck_assert_uint_eq(calls.n_kept, 4);
        for (int i = 0; i < 4; i++)
                calls_unkeep(&calls);
        assert_all_given_back();
}
END_TEST

int main(void) {
        Suite *s = suite_create("calls");
        TCase *tc = tcase_create("calls");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_runs_again_until_polkit_answered);
        tcase_add_test(tc, test_stale_answer_asks_again);
        tcase_add_test(tc, test_root_is_never_asked);
        tcase_add_test(tc, test_departed_caller_takes_its_call);
        tcase_add_test(tc, test_no_room_to_keep);
        tcase_add_test(tc, test_max_pending_refuses);
        tcase_add_test(tc, test_keep_leaves_its_reserve);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
