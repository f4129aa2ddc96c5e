/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the polkit thread's life and of its answer when polkit
 * cannot be reached: made and freed at once, again and again, it always
 * stops (its stop once ran on the calling thread when the polkit thread did
 * not hold its context yet, and the join then waited forever); with no bus
 * at all a check is answered "unavailable", twins alike, never "allowed";
 * the bus connection it uses does not exit the process when the bus goes. */

#include <gio/gio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>
#include <unistd.h>

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

/* A bus of our own, its address in *ret_address; the daemon's pid. */
static pid_t start_bus(char **ret_address) {
        int out[2];
        ck_assert_int_eq(pipe(out), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                dup2(out[1], STDOUT_FILENO);
                execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--print-address=1",
                       "--address=unix:tmpdir=/tmp", (char *) NULL);
                _exit(127);
        }
        close(out[1]);
        char buf[512];
        ssize_t n = read(out[0], buf, sizeof(buf) - 1);
        close(out[0]);
        ck_assert_int_gt(n, 0);
        buf[n] = 0;
        buf[strcspn(buf, "\n")] = 0;
        *ret_address = strdup(buf);
        return pid;
}

/* GLib's connection to the bus exits the process when the bus goes, unless
 * told not to: the one polkit-gobject-1 uses must be the one told (it once
 * was a new one, made on a worker thread after pmqosd's was let go). */
START_TEST(test_polkit_connection_does_not_exit_on_close) {
        char *address = NULL;
        pid_t bus = start_bus(&address);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1);
        sd_event *e = NULL;
        ck_assert_int_ge(sd_event_new(&e), 0);
        Auth *a = NULL;
        ck_assert_int_eq(auth_new(&a, e, 4), 0);
        Answers got = { 0 };
        AuthQuery *q = NULL;
        ck_assert_int_eq(auth_check(a, 1000, ":1.7", ACTION_REQUEST_LATENCY, false, on_answer, &got, &q), 0);
        for (int i = 0; i < 1000 && got.n == 0; i++)
                ck_assert_int_ge(sd_event_run(e, 10 * 1000), 0);
        ck_assert_uint_eq(got.n, 1);
        ck_assert_int_eq(got.last, AUTH_UNAVAILABLE); /* no polkitd on this bus */
        /* The shared connection, as polkit-gobject-1 holds it now. */
        GDBusConnection *c = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert(!g_dbus_connection_get_exit_on_close(c));
        g_object_unref(c);
        ck_assert_ptr_null(auth_free(a));
        sd_event_unref(e);
        kill(bus, SIGTERM);
        waitpid(bus, NULL, 0);
        free(address);
}
END_TEST

int main(void) {
        Suite *s = suite_create("auth");
        TCase *tc = tcase_create("auth");
        tcase_set_timeout(tc, 20);
        tcase_add_test(tc, test_made_and_freed_at_once);
        tcase_add_test(tc, test_no_bus_is_unavailable);
        tcase_add_test(tc, test_polkit_connection_does_not_exit_on_close);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
