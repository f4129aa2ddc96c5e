/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the bus layer's unit tests share: a private dbus-daemon of their own
 * (no mock: the real bus, its driver's signals and credentials), peers
 * connected to it, and a loop that runs them all until a condition holds —
 * never until a time has passed. */
#pragma once

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <stdio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "unit.h"

typedef struct TestBus {
        pid_t pid;
        char address[512];
        char dir[64]; /* its configuration */
} TestBus;

/* A session bus that any user may connect to (the callers of other uids). */
#define TEST_BUS_CONFIG                                                                 \
        "<busconfig><type>session</type><listen>unix:tmpdir=/tmp</listen>"              \
        "<auth>EXTERNAL</auth><policy context=\"default\"><allow user=\"*\"/>"          \
        "<allow send_destination=\"*\" eavesdrop=\"true\"/><allow eavesdrop=\"true\"/>" \
        "<allow own=\"*\"/></policy></busconfig>\n"

/* Starts a dbus-daemon of its own; returns once it listens. */
static inline void test_bus_start(TestBus *tb) {
        int out[2];
        char config[128];
        snprintf(tb->dir, sizeof(tb->dir), "%s", unit_make_dir("bus"));
        unit_write_file(tb->dir, "bus.conf", TEST_BUS_CONFIG);
        snprintf(config, sizeof(config), "--config-file=%s/bus.conf", tb->dir);
        ck_assert_int_eq(pipe(out), 0);
        tb->pid = fork();
        ck_assert_int_ge(tb->pid, 0);
        if (tb->pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlives a failed test */
                dup2(out[1], STDOUT_FILENO);
                execlp("dbus-daemon", "dbus-daemon", config, "--nofork", "--nopidfile", "--print-address=1",
                       (char *) NULL);
                _exit(127);
        }
        close(out[1]);
        size_t n = 0;
        ssize_t k;
        while (n < sizeof(tb->address) - 1 && (k = read(out[0], tb->address + n, sizeof(tb->address) - 1 - n)) > 0) {
                n += (size_t) k;
                if (memchr(tb->address, '\n', n))
                        break;
        }
        close(out[0]);
        tb->address[n] = 0;
        tb->address[strcspn(tb->address, "\n")] = 0;
        ck_assert_msg(n > 0, "dbus-daemon gave no address");
}

static inline void test_bus_stop(TestBus *tb) {
        if (tb->pid <= 0)
                return;
        kill(tb->pid, SIGTERM);
        waitpid(tb->pid, NULL, 0);
        tb->pid = 0;
        unit_remove_dir(tb->dir);
}

/* A new peer on tb, its Hello answered. */
static inline sd_bus *test_bus_connect(const TestBus *tb) {
        sd_bus *bus = NULL;
        ck_assert_int_ge(sd_bus_new(&bus), 0);
        ck_assert_int_ge(sd_bus_set_address(bus, tb->address), 0);
        ck_assert_int_ge(sd_bus_set_bus_client(bus, 1), 0);
        ck_assert_int_ge(sd_bus_start(bus), 0);
        const char *unique = NULL;
        ck_assert_int_ge(sd_bus_get_unique_name(bus, &unique), 0); /* waits for Hello's answer */
        return bus;
}

/* A new peer of user uid (its credentials as the bus sees them: taken at
 * connect() and in the EXTERNAL authentication). */
static inline sd_bus *test_bus_connect_as(const TestBus *tb, uid_t uid) {
        ck_assert_int_eq(seteuid(uid), 0);
        sd_bus *bus = test_bus_connect(tb);
        ck_assert_int_eq(seteuid(0), 0);
        return bus;
}

static inline const char *unique_name(sd_bus *bus) {
        const char *name = NULL;
        ck_assert_int_ge(sd_bus_get_unique_name(bus, &name), 0);
        return name;
}

/* Runs every bus of buses (NULL-terminated) until done(userdata) holds.
 * Fails the test if nothing at all happens for 10 s (a guard against a
 * hang, not a measure: it returns as soon as done() holds). */
static inline void test_bus_run_until(sd_bus *const *buses, bool (*done)(void *userdata), void *userdata) {
        while (!done(userdata)) {
                int progress = 0;
                for (size_t i = 0; buses[i]; i++) {
                        int r;
                        while ((r = sd_bus_process(buses[i], NULL)) > 0)
                                progress = 1;
                        ck_assert_int_ge(r, 0);
                        ck_assert_int_ge(sd_bus_flush(buses[i]), 0);
                }
                if (progress || done(userdata))
                        continue;
                /* Nothing to do: wait for input on any of them. */
                struct pollfd fds[8];
                size_t n = 0;
                for (; buses[n]; n++) {
                        ck_assert_uint_lt(n, 8);
                        fds[n] =
                                (struct pollfd){ .fd = sd_bus_get_fd(buses[n]), .events = sd_bus_get_events(buses[n]) };
                }
                ck_assert_int_gt(poll(fds, n, 10 * 1000), 0);
        }
}

/* Runs event (buses attached to it) until done(userdata) holds; the same
 * guard of 10 s without any event. */
static inline void test_event_run_until(sd_event *event, bool (*done)(void *userdata), void *userdata) {
        while (!done(userdata))
                ck_assert_int_gt(sd_event_run(event, 10 * 1000 * 1000), 0);
}

static bool counter_reached(void *userdata) {
        const unsigned *const *c = userdata;
        return *c[0] >= *c[1];
}

/* Runs buses until *counter reaches want. */
static inline void test_bus_run_until_count(sd_bus *const *buses, const unsigned *counter, unsigned want) {
        const unsigned *pair[2] = { counter, &want };
        test_bus_run_until(buses, counter_reached, pair);
}

static inline void test_event_run_until_count(sd_event *event, const unsigned *counter, unsigned want) {
        const unsigned *pair[2] = { counter, &want };
        test_event_run_until(event, counter_reached, pair);
}
