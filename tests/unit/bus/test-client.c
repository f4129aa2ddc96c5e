/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the client registry (client.c) on a private dbus-daemon: a
 * caller's credentials read from the bus (uid, pid, its command line), its
 * calls in progress told once when known and once when it leaves, its
 * departure seen through the one match; a NameOwnerChanged another peer
 * sends straight to pmqosd, naming a client as gone, believed by no one; a
 * name already gone when asked about; MaxClients (an idle client forgotten
 * for a new one, none while all are busy); a command line cleaned. */

#include "bus-fixture.h"

#include <errno.h>
#include <fcntl.h>

#include "bus/client.h"

static TestBus tb;
static sd_bus *daemon_bus;
static sd_bus *peers[4];
static sd_bus *all[6];
static Clients clients;

typedef struct Seen {
        unsigned departed, ready, gone, forged, driver;
        Client *last_departed;
} Seen;
static Seen seen;

static void on_departed(Client *c, void *userdata) {
        (void) userdata;
        ck_assert_int_eq(c->state, CLIENT_GONE);
        seen.departed++;
        seen.last_departed = c;
}

static void on_waiter(Client *c, void *userdata) {
        (void) userdata;
        if (c->state == CLIENT_READY)
                seen.ready++;
        else if (c->state == CLIENT_GONE)
                seen.gone++;
}

static int on_probe(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) m, (void) userdata, (void) error;
        if (strcmp(sd_bus_message_get_sender(m), "org.freedesktop.DBus") != 0)
                seen.forged++;
        else
                seen.driver++;
        return 0;
}

static void setup_max(unsigned max) {
        test_bus_start(&tb);
        daemon_bus = test_bus_connect(&tb);
        all[0] = daemon_bus;
        for (int i = 0; i < 3; i++)
                all[i + 1] = peers[i] = test_bus_connect(&tb);
        all[4] = NULL;
        seen = (Seen){ 0 };
        clients_init(&clients, max, on_departed, NULL);
        ck_assert_int_ge(clients_watch(&clients, daemon_bus), 0);
        ck_assert_int_ge(sd_bus_add_match(daemon_bus, NULL,
                                          "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                          "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''",
                                          on_probe, NULL),
                         0);
}

static void setup(void) {
        setup_max(100);
}

static void setup_two(void) {
        setup_max(2);
}

static void teardown(void) {
        clients_done(&clients);
        for (int i = 0; i < 3; i++)
                sd_bus_flush_close_unref(peers[i]);
        sd_bus_flush_close_unref(daemon_bus);
        test_bus_stop(&tb);
}

static bool resolved(void *userdata) {
        const Client *c = userdata;
        return c->state != CLIENT_RESOLVING;
}

/* The client of peer, its credentials known. */
static Client *known(sd_bus *peer) {
        Client *c = NULL;
        ck_assert_int_eq(client_get(&clients, unique_name(peer), &c), 0);
        test_bus_run_until(all, resolved, c);
        ck_assert_int_eq(c->state, CLIENT_READY);
        return c;
}

/* Peer i leaves the bus; the loop runs the others. */
static void leave(int i) {
        peers[i] = sd_bus_flush_close_unref(peers[i]);
        size_t n = 1;
        for (int k = 0; k < 3; k++)
                if (peers[k])
                        all[n++] = peers[k];
        all[n] = NULL;
}

START_TEST(test_credentials_and_departure) {
        Client *c = NULL;
        ck_assert_int_eq(client_get(&clients, unique_name(peers[0]), &c), 0);
        ck_assert_int_eq(c->state, CLIENT_RESOLVING);
        ClientWaiter w = { .callback = on_waiter };
        client_wait(c, &w);
        ck_assert_uint_eq(seen.ready, 0);
        test_bus_run_until_count(all, &seen.ready, 1);
        ck_assert_int_eq(c->state, CLIENT_READY);
        ck_assert_int_eq(c->uid, geteuid());
        ck_assert_int_eq(c->pid, getpid());
        char *cmdline = process_command_line(getpid());
        ck_assert_str_eq(c->exec->text, cmdline);
        free(cmdline);
        Client *again = NULL;
        ck_assert_int_eq(client_get(&clients, unique_name(peers[0]), &again), 0);
        ck_assert_ptr_eq(again, c);

        client_ref(c);
        leave(0);
        test_bus_run_until_count(all, &seen.departed, 1);
        ck_assert_ptr_eq(seen.last_departed, c);
        ck_assert_uint_eq(seen.gone, 1);
        ck_assert_uint_eq(seen.ready, 1); /* told once */
        ck_assert_int_eq(c->state, CLIENT_GONE);
        ck_assert_uint_eq(c->n_waiters, 0);
        ck_assert_uint_eq(hashmap_size(&clients.by_name), 0);
        client_unref(c);
}
END_TEST

/* Another peer tells pmqosd, straight to it, that a client left. */
START_TEST(test_forged_departure_believed_by_no_one) {
        Client *c = known(peers[0]);
        sd_bus_message *m = NULL;
        ck_assert_int_ge(sd_bus_message_new_signal(peers[1], &m, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                   "NameOwnerChanged"),
                         0);
        ck_assert_int_ge(sd_bus_message_set_destination(m, unique_name(daemon_bus)), 0);
        ck_assert_int_ge(sd_bus_message_append(m, "sss", unique_name(peers[0]), unique_name(peers[0]), ""), 0);
        ck_assert_int_ge(sd_bus_send(peers[1], m, NULL), 0);
        sd_bus_message_unref(m);
        test_bus_run_until_count(all, &seen.forged, 1); /* it passed sd-bus's match */
        ck_assert_uint_eq(seen.departed, 0);
        ck_assert_int_eq(c->state, CLIENT_READY);
        ck_assert_ptr_eq(hashmap_get(&clients.by_name, unique_name(peers[0])), c);
}
END_TEST

/* Gone before the bus was asked: the bus says so, and so does the registry. */
START_TEST(test_gone_before_known) {
        char name[64];
        snprintf(name, sizeof(name), "%s", unique_name(peers[0]));
        leave(0);
        test_bus_run_until_count(all, &seen.driver, 1); /* the bus said it left */
        Client *c = NULL;
        ck_assert_int_eq(client_get(&clients, name, &c), 0);
        ClientWaiter w = { .callback = on_waiter };
        client_wait(c, &w);
        test_bus_run_until_count(all, &seen.gone, 1);
        ck_assert_uint_eq(seen.ready, 0);
        ck_assert_uint_eq(seen.departed, 1);
        ck_assert_uint_eq(hashmap_size(&clients.by_name), 0);
        ck_assert_int_eq(client_get(&clients, "org.freedesktop.PMQoS", &c), -EINVAL); /* unique names only */
}
END_TEST

/* MaxClients 2: an idle client makes room for a new one; busy ones do not. */
START_TEST(test_max_clients) {
        Client *a = known(peers[0]);
        ClientWaiter wa = { .callback = on_waiter };
        client_wait(a, &wa); /* busy */
        Client *b = known(peers[1]);
        ck_assert(b->idle);
        Client *c = NULL;
        ck_assert_int_eq(client_get(&clients, unique_name(peers[2]), &c), 0);
        ck_assert_ptr_null(hashmap_get(&clients.by_name, unique_name(peers[1]))); /* b forgotten */
        ck_assert_ptr_eq(hashmap_get(&clients.by_name, unique_name(peers[0])), a);
        ClientWaiter wc = { .callback = on_waiter };
        client_wait(c, &wc);
        test_bus_run_until(all, resolved, c);
        Client *d = NULL;
        ck_assert_int_eq(client_get(&clients, unique_name(peers[1]), &d), -EUSERS); /* both busy */
        client_unwait(a, &wa);
        ck_assert_int_eq(client_get(&clients, unique_name(peers[1]), &d), 0); /* a was idle again */
        ck_assert_ptr_null(hashmap_get(&clients.by_name, unique_name(peers[0])));
        client_unwait(c, &wc);
}
END_TEST

/* A command line with a control character and a byte of no UTF-8, read
 * once the child runs it (the pipe closes at its exec). */
START_TEST(test_command_line_cleaned) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                (void) setpgid(0, 0);
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                execl("/bin/sh", "sh", "-c", "sleep 100; :",
                      "a\x01"
                      "b",
                      "\xff", (char *) NULL);
                _exit(127);
        }
        close(p[1]);
        char byte;
        ck_assert_int_eq(read(p[0], &byte, 1), 0); /* exec'd */
        close(p[0]);
        char *line = process_command_line(pid);
        ck_assert_str_eq(line, "sh -c sleep 100; : a\\x01b \\xff");
        free(line);
        kill(-pid, SIGKILL); /* sh and its sleep */
        waitpid(pid, NULL, 0);
        line = process_command_line(pid); /* gone */
        ck_assert_str_eq(line, "");
        free(line);
}
END_TEST

int main(void) {
        Suite *s = suite_create("client");
        TCase *tc = tcase_create("client");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_credentials_and_departure);
        tcase_add_test(tc, test_forged_departure_believed_by_no_one);
        tcase_add_test(tc, test_gone_before_known);
        tcase_add_test(tc, test_command_line_cleaned);
        suite_add_tcase(s, tc);
        TCase *two = tcase_create("max-clients");
        tcase_add_checked_fixture(two, setup_two, teardown);
        tcase_set_timeout(two, 30);
        tcase_add_test(two, test_max_clients);
        suite_add_tcase(s, two);
        return unit_run(s, CK_FORK_GETENV);
}
