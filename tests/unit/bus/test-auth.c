/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the polkit thread's life and of its answer when polkit
 * cannot be reached: made and freed at once, again and again, it always
 * stops (its stop once ran on the calling thread when the polkit thread did
 * not hold its context yet, and the join then waited forever); with no bus
 * at all a check is answered "unavailable", twins alike, never "allowed". */

#include <stdlib.h>
#include <systemd/sd-event.h>

#include "bus/auth.h"
#include "unit.h"

START_TEST(test_made_and_freed_at_once) {
        sd_event *e = NULL;
        ck_assert_int_ge(sd_event_new(&e), 0);
        for (int i = 0; i < 300; i++) {
                Auth *a = NULL;
                ck_assert_int_eq(auth_new(&a, e, 4), 0);
                ck_assert_ptr_null(auth_free(a));
        }
        sd_event_unref(e);
}
END_TEST

typedef struct Answers {
        unsigned n;
        AuthResult last;
} Answers;

static void on_answer(AuthResult result, void *userdata) {
        Answers *got = userdata;
        got->n++;
        got->last = result;
}

START_TEST(test_no_bus_is_unavailable) {
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/pmqos-test-bus", 1);
        sd_event *e = NULL;
        ck_assert_int_ge(sd_event_new(&e), 0);
        Auth *a = NULL;
        ck_assert_int_eq(auth_new(&a, e, 4), 0);
        Answers got = { 0 }, twin = { 0 };
        AuthQuery *q1 = NULL, *q2 = NULL;
        ck_assert_int_eq(auth_check(a, 1000, ":1.7", ACTION_REQUEST_LATENCY, false, on_answer, &got, &q1), 0);
        ck_assert_int_eq(auth_check(a, 1000, ":1.7", ACTION_REQUEST_LATENCY, false, on_answer, &twin, &q2), 0);
        for (int i = 0; i < 1000 && (got.n == 0 || twin.n == 0); i++)
                ck_assert_int_ge(sd_event_run(e, 10 * 1000), 0);
        ck_assert_uint_eq(got.n, 1);
        ck_assert_uint_eq(twin.n, 1);
        ck_assert_int_eq(got.last, AUTH_UNAVAILABLE);
        ck_assert_int_eq(twin.last, AUTH_UNAVAILABLE);
        ck_assert_ptr_null(auth_free(a));
        sd_event_unref(e);
}
END_TEST

int main(void) {
        Suite *s = suite_create("auth");
        TCase *tc = tcase_create("auth");
        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, test_made_and_freed_at_once);
        tcase_add_test(tc, test_no_bus_is_unavailable);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
