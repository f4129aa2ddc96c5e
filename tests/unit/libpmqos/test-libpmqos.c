/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libpmqos against the live broker (Check). Started by
 * tests/integration/test_libpmqos.py, which provides a private bus, polkitd,
 * pmqosd (restarted like a service manager would when it exits) and users:
 *   test-libpmqos broker     every function, error mappings, restart re-issue
 *   test-libpmqos no-broker  the bus is there, pmqosd is not
 *   test-libpmqos no-bus     no bus at all
 *   test-libpmqos sched-fifo a SCHED_FIFO caller: every thread libpmqos starts is SCHED_OTHER */

#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "pmqos.h"
#include "unit.h"

static int32_t kernel_read(void) {
        return unit_read_device(getenv("PMQOS_TEST_DEVICE"));
}

static int32_t baseline;

static void setup(void) {
        baseline = kernel_read();
}

/* Other holders of the device may ask for less: "at most what we asked". */
#define ck_assert_kernel_at_most(v) ck_assert_int_le(kernel_read(), (v))

START_TEST(test_request_update_cancel) {
        pmqos_client *c;
        uint32_t cookie;
        int32_t v;

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_ptr_null(pmqos_client_last_error(c));
        ck_assert_int_eq(pmqos_request(c, 123, &cookie), 0);
        ck_assert_uint_ne(cookie, 0);
        ck_assert_kernel_at_most(123);
        ck_assert_int_eq(pmqos_get_latency(c, &v), 0);
        ck_assert_int_eq(v, 123);

        ck_assert_int_eq(pmqos_update(c, cookie, 45), 0);
        ck_assert_kernel_at_most(45);
        ck_assert_int_eq(pmqos_get_latency(c, &v), 0);
        ck_assert_int_eq(v, 45);

        ck_assert_int_eq(pmqos_cancel(c, cookie), 0);
        ck_assert_int_eq(kernel_read(), baseline);
        ck_assert_int_eq(pmqos_get_latency(c, &v), 0);
        ck_assert_int_eq(v, PMQOS_LATENCY_NONE);
        ck_assert_ptr_null(pmqos_client_free(c));
        ck_assert_ptr_null(pmqos_client_free(NULL));
}
END_TEST

/* The broker hears of a departure through the bus, a moment later. */
static void wait_released(pmqos_client *w) {
        int32_t v = 0;
        for (int i = 0; i < 400; i++) {
                ck_assert_int_eq(pmqos_get_latency(w, &v), 0);
                if (v == PMQOS_LATENCY_NONE)
                        return;
                usleep(5000);
        }
        ck_assert_int_eq(v, PMQOS_LATENCY_NONE);
}

/* A process that keeps one CPU busy, so that the broker and the test compete for time. */
static pid_t start_hog(void) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                for (volatile unsigned long i = 0;; i++)
                        ;
        return pid;
}

static void stop_hog(pid_t pid) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

START_TEST(test_free_ends_requests) {
        pmqos_client *c, *w;
        uint32_t a, b;

        ck_assert_int_eq(pmqos_client_new(&w), 0);
        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_request(c, 80, &a), 0);
        ck_assert_int_eq(pmqos_request(c, 90, &b), 0);
        ck_assert_kernel_at_most(80);
        /* The broker confirmed before free returned: nothing to wait for. */
        pmqos_client_free(c);
        ck_assert_int_eq(kernel_read(), baseline);
        wait_released(w);
        pmqos_client_free(w);

        /* Again and again, on a busy machine. */
        int rounds = getenv("PMQOS_TEST_ROUNDS") ? atoi(getenv("PMQOS_TEST_ROUNDS")) : 1000;
        pid_t hog = start_hog();
        for (int i = 0; i < rounds; i++) {
                ck_assert_int_eq(pmqos_client_new(&c), 0);
                ck_assert_int_eq(pmqos_request(c, 100 + i, &a), 0);
                ck_assert_int_eq(pmqos_request(c, 200 + i, &b), 0);
                pmqos_client_free(c);
                ck_assert_msg(kernel_read() == baseline, "round %d: the kernel is at %d after free", i,
                              (int) kernel_read());
        }
        stop_hog(hog);
}
END_TEST

START_TEST(test_error_mapping) {
        pmqos_client *c;
        uint32_t cookie;

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_request(c, -5, &cookie), -EINVAL);
        ck_assert_ptr_nonnull(pmqos_client_last_error(c));
        ck_assert_ptr_nonnull(strstr(pmqos_client_last_error(c), "out of range"));
        ck_assert_int_eq(pmqos_request(c, PMQOS_LATENCY_MAX + 1, &cookie), -EINVAL);
        ck_assert_int_eq(pmqos_update(c, 12345, 10), -ENOENT);
        ck_assert_int_eq(pmqos_cancel(c, 12345), -ENOENT);
        ck_assert_ptr_nonnull(pmqos_client_last_error(c));
        uint32_t bad_cpu = 7777;
        ck_assert_int_eq(pmqos_request_full(c, 10, NULL, 0, &bad_cpu, 1, 0, &cookie), -EINVAL);
        ck_assert_int_eq(pmqos_request_full(c, 10, NULL, 0, NULL, 0, 1u << 7, &cookie), -EINVAL);
        ck_assert_int_eq(pmqos_request(NULL, 10, &cookie), -EINVAL);
        /* A success clears the last error. */
        ck_assert_int_eq(pmqos_request(c, -1, &cookie), 0);
        ck_assert_ptr_null(pmqos_client_last_error(c));
        pmqos_client_free(c);
}
END_TEST

/* Runs fn in a child as another user; returns what fn returned. */
static int as_user(const char *uid_env, const char *gid_env, int (*fn)(void)) {
        const char *u = getenv(uid_env), *g = getenv(gid_env);
        ck_assert_ptr_nonnull(u);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                gid_t gid = (gid_t) atoi(g);
                uid_t uid = (uid_t) atoi(u);
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(100);
                _exit(fn());
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static int denied_child(void) {
        pmqos_client *c;
        uint32_t cookie;
        int32_t v;
        if (pmqos_client_new(&c) < 0)
                return 1;
        int r = pmqos_request(c, 10, &cookie);
        int ok = r == -EACCES && pmqos_client_last_error(c) && pmqos_get_latency(c, &v) == 0 &&
                 pmqos_set_minimum_latency(c, 5) == -EACCES;
        pmqos_client_free(c);
        return ok ? 0 : 2;
}

START_TEST(test_denied) {
        ck_assert_int_eq(as_user("PMQOS_TEST_PLAIN_UID", "PMQOS_TEST_PLAIN_GID", denied_child), 0);
}
END_TEST

static int limit_child(void) {
        pmqos_client *c;
        uint32_t cookie;
        if (pmqos_client_new(&c) < 0)
                return 1;
        int ok = pmqos_request(c, 500, &cookie) == 0 && pmqos_request(c, 500, &cookie) == 0 &&
                 pmqos_request(c, 500, &cookie) == -EUSERS;
        pmqos_client_free(c);
        return ok ? 0 : 2;
}

START_TEST(test_limit) {
        /* The runner starts pmqosd with --max-requests-per-connection 2. */
        ck_assert_int_eq(as_user("PMQOS_TEST_MEMBER_UID", "PMQOS_TEST_MEMBER_GID", limit_child), 0);
}
END_TEST

/* Who wrote each CPU's knobs (LIBPMQOS_1.6): one entry per CPU, one
 * writer per C-state, texts never NULL; none past the last CPU. */
static void check_custody(const pmqos_explanation *e) {
        for (size_t i = 0; i < e->n_cpus; i++) {
                const pmqos_cpu_custody_info *w = pmqos_explanation_custody(e, i);
                ck_assert_ptr_nonnull(w);
                ck_assert_uint_eq(w->cpu, e->cpus[i].cpu);
                ck_assert_uint_eq(w->n_disabled_by, e->cpus[i].n_cstates);
                ck_assert(w->foreign_writer.comm && w->foreign_writer.unit && w->foreign_writer.value);
                for (size_t k = 0; k < w->n_disabled_by; k++)
                        ck_assert(w->disabled_by[k].comm && w->disabled_by[k].value);
        }
        ck_assert_ptr_null(pmqos_explanation_custody(e, e->n_cpus));
        ck_assert_ptr_null(pmqos_explanation_custody(NULL, 0));
}

START_TEST(test_rich_calls) {
        pmqos_client *c;
        uint32_t a, b, count;
        int32_t v;
        pmqos_request_info *infos;
        size_t n;

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_request_full(c, 200, "renderer", 60, NULL, 0, 0, &a), 0);
        ck_assert_int_eq(pmqos_request_full(c, 300, NULL, 0, NULL, 0, PMQOS_REQUEST_PERSISTENT, &b), 0);
        ck_assert_int_eq(pmqos_get_request_count(c, &count), 0);
        ck_assert_uint_eq(count, 2);
        ck_assert_int_eq(pmqos_get_kernel_latency(c, &v), 0);
        ck_assert_int_eq(v, kernel_read());

        ck_assert_int_eq(pmqos_list_requests(c, &infos, &n), 0);
        ck_assert_uint_eq(n, 2);
        bool seen_a = false, seen_b = false;
        for (size_t i = 0; i < n; i++) {
                ck_assert_uint_eq(infos[i].pid, (uint32_t) getpid());
                ck_assert_uint_eq(infos[i].uid, 0);
                ck_assert_ptr_nonnull(infos[i].exec);
                ck_assert_ptr_nonnull(strstr(infos[i].exec, "test-libpmqos"));
                if (infos[i].cookie == a) {
                        seen_a = true;
                        ck_assert_str_eq(infos[i].reason, "renderer");
                        ck_assert_int_gt(infos[i].expires_usec, infos[i].created_usec);
                        ck_assert(!infos[i].persistent);
                        ck_assert_int_eq(infos[i].value, 200);
                } else if (infos[i].cookie == b) {
                        seen_b = true;
                        ck_assert(infos[i].persistent);
                        ck_assert_str_eq(infos[i].reason, "");
                        ck_assert_int_eq(infos[i].expires_usec, 0);
                }
                ck_assert_uint_eq(infos[i].n_cpus, 0);
                ck_assert_ptr_nonnull(infos[i].sender);
        }
        ck_assert(seen_a && seen_b);
        pmqos_request_info_free(infos, n);

        /* Explain(): the request of 200 µs sets the bound, unless another holder asks for less. */
        pmqos_explanation *e;
        ck_assert_int_eq(pmqos_explain(c, &e), 0);
        ck_assert_int_eq(e->effective, 200);
        ck_assert_int_eq(e->floor, -1);
        if (e->kernel == 200) {
                ck_assert_str_eq(e->bound_by, "request");
                ck_assert_ptr_nonnull(e->binding);
                ck_assert_uint_eq(e->binding->cookie, a);
                ck_assert_str_eq(e->binding->reason, "renderer");
        } else {
                ck_assert_str_eq(e->bound_by, "external");
                ck_assert_ptr_null(e->binding);
        }
        ck_assert(!e->kernel_ignores_writes);
        ck_assert_uint_eq(e->n_cpus, (size_t) sysconf(_SC_NPROCESSORS_ONLN));
        for (size_t i = 0; i < e->n_cpus; i++)
                ck_assert_ptr_nonnull(e->cpus[i].resume_latency);
        check_custody(e);
        ck_assert_ptr_null(pmqos_explanation_free(e));
        ck_assert_ptr_null(pmqos_explanation_free(NULL));
        ck_assert_int_eq(pmqos_explain(NULL, &e), -EINVAL);

        ck_assert_int_eq(pmqos_set_minimum_latency(c, 250), 0);
        ck_assert_int_eq(pmqos_get_minimum_latency(c, &v), 0);
        ck_assert_int_eq(v, 250);
        ck_assert_int_eq(pmqos_get_latency(c, &v), 0);
        ck_assert_int_eq(v, 250);
        ck_assert_int_eq(pmqos_set_minimum_latency(c, PMQOS_LATENCY_NONE), 0);
        ck_assert_int_eq(pmqos_cancel(c, a), 0);
        ck_assert_int_eq(pmqos_cancel(c, b), 0);
        ck_assert_int_eq(pmqos_client_set_allow_interactive(c, true), 0);
        pmqos_client_free(c);
}
END_TEST

/* ListRequestsPage and ExplainFolded through the library: pages that
 * add up to the listing, groups that hold every CPU once. */
START_TEST(test_pages_and_folded) {
        pmqos_client *c;
        uint32_t cookies[40];
        pmqos_request_info *all, *page;
        size_t n_all, n;
        uint32_t after = 0, next;
        unsigned pages = 0;

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        for (unsigned i = 0; i < 40; i++)
                ck_assert_int_eq(pmqos_request_full(c, 500 + (int32_t) i, NULL, 0, NULL, 0, 0, &cookies[i]), 0);
        ck_assert_int_eq(pmqos_list_requests(c, &all, &n_all), 0);
        ck_assert_uint_eq(n_all, 40);
        for (size_t i = 1; i < n_all; i++) /* oldest first, though read in cookie order */
                ck_assert_int_le(all[i - 1].created_usec, all[i].created_usec);
        size_t listed = 0;
        do {
                ck_assert_int_eq(pmqos_list_requests_page(c, after, 16, &page, &n, &next), 0);
                ck_assert_uint_le(n, 16);
                for (size_t i = 0; i < n; i++) {
                        ck_assert_uint_gt(page[i].cookie, after);
                        after = page[i].cookie;
                        ck_assert_ptr_nonnull(page[i].exec);
                }
                listed += n;
                pmqos_request_info_free(page, n);
                pages++;
                ck_assert(next == 0 || next == after);
        } while (next != 0);
        ck_assert_uint_eq(listed, 40);
        ck_assert_uint_eq(pages, 3);
        pmqos_request_info_free(all, n_all);
        static char junk; /* what *ret held before: a failed call leaves NULL */
        page = (pmqos_request_info *) &junk;
        ck_assert_int_eq(pmqos_list_requests_page(NULL, 0, 0, &page, &n, &next), -EINVAL);
        ck_assert_ptr_null(page);

        pmqos_explanation *e;
        ck_assert_int_eq(pmqos_explain_folded(c, &e), 0);
        ck_assert_ptr_null(e->cpus);
        ck_assert_uint_gt(e->n_cpu_groups, 0);
        size_t cpus = 0;
        for (size_t i = 0; i < e->n_cpu_groups; i++) {
                ck_assert_uint_gt(e->cpu_groups[i].n_cpus, 0);
                ck_assert_ptr_nonnull(e->cpu_groups[i].resume_latency);
                cpus += e->cpu_groups[i].n_cpus;
        }
        ck_assert_uint_eq(cpus, (size_t) sysconf(_SC_NPROCESSORS_ONLN));
        ck_assert_ptr_null(pmqos_explanation_custody(e, 0)); /* groups carry no writers, nor costs */
        ck_assert_ptr_null(e->cpu_costs);
        ck_assert_ptr_null(pmqos_explanation_free(e));
        for (unsigned i = 0; i < 40; i++)
                ck_assert_int_eq(pmqos_cancel(c, cookies[i]), 0);
        pmqos_client_free(c);
}
END_TEST

typedef struct Seen {
        int latency_events;
        int32_t last_latency;
        int requests_events;
        int lost, restarted;
} Seen;

static void on_event(pmqos_client *c, pmqos_event event, int32_t usec, void *userdata) {
        Seen *s = userdata;
        (void) c;
        switch (event) {
        case PMQOS_EVENT_LATENCY_CHANGED:
                s->latency_events++;
                s->last_latency = usec;
                break;
        case PMQOS_EVENT_REQUESTS_CHANGED:
                s->requests_events++;
                break;
        case PMQOS_EVENT_BROKER_LOST:
                s->lost++;
                break;
        case PMQOS_EVENT_BROKER_RESTARTED:
                s->restarted++;
                break;
        }
}

START_TEST(test_events) {
        pmqos_client *watcher, *c;
        Seen seen = {};
        uint32_t cookie;

        ck_assert_int_eq(pmqos_client_new(&watcher), 0);
        ck_assert_int_eq(pmqos_client_set_event_callback(watcher, on_event, &seen), 0);
        ck_assert_int_ge(pmqos_client_get_fd(watcher), 0);
        int32_t v;
        ck_assert_int_eq(pmqos_get_latency(watcher, &v), 0); /* subscription in place */
        ck_assert_int_eq(pmqos_client_process(watcher), 0);
        ck_assert_int_gt(pmqos_client_get_events(watcher), 0); /* nothing queued: wait for input */

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_request(c, 333, &cookie), 0);
        for (int i = 0; i < 100 && (seen.latency_events == 0 || seen.requests_events == 0); i++) {
                struct pollfd p = { .fd = pmqos_client_get_fd(watcher),
                                    .events = (short) pmqos_client_get_events(watcher) };
                ck_assert_int_ge(pmqos_client_process(watcher), 0);
                p.events = (short) pmqos_client_get_events(watcher);
                poll(&p, 1, 50);
        }
        ck_assert_int_eq(seen.latency_events, 1);
        ck_assert_int_eq(seen.last_latency, 333);
        ck_assert_int_eq(seen.requests_events, 1);
        pmqos_client_free(c);
        wait_released(watcher);
        pmqos_client_free(watcher);
}
END_TEST

static pid_t broker_pid(void) {
        sd_bus *bus = NULL;
        sd_bus_message *reply = NULL;
        uint32_t pid = 0;
        if (sd_bus_open_system(&bus) < 0)
                return -1;
        if (sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionUnixProcessID", NULL, &reply, "s", "org.freedesktop.PMQoS") >= 0)
                (void) sd_bus_message_read(reply, "u", &pid);
        sd_bus_message_unref(reply);
        sd_bus_flush_close_unref(bus);
        return (pid_t) pid;
}

START_TEST(test_survives_broker_restart) {
        pmqos_client *c;
        Seen seen = {};
        uint32_t cookie;
        int32_t v;

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_client_set_event_callback(c, on_event, &seen), 0);
        ck_assert_int_eq(pmqos_request(c, 77, &cookie), 0);
        ck_assert_kernel_at_most(77);

        pid_t pid = broker_pid();
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(kill(pid, SIGTERM), 0);

        /* The runner starts pmqosd again, as a service manager would. */
        for (int i = 0; i < 200 && seen.restarted == 0; i++)
                ck_assert_int_ge(pmqos_client_wait(c, 50000), 0);
        ck_assert_int_eq(seen.lost, 1);
        ck_assert_int_eq(seen.restarted, 1);
        ck_assert_int_ne(broker_pid(), pid);

        ck_assert_kernel_at_most(77);
        ck_assert_int_eq(pmqos_get_latency(c, &v), 0);
        ck_assert_int_eq(v, 77);
        /* The broker re-adopted it; the library saw that and issued nothing: once, not twice. */
        uint32_t n;
        ck_assert_int_eq(pmqos_get_request_count(c, &n), 0);
        ck_assert_uint_eq(n, 1);
        /* The cookie we were given still works. */
        ck_assert_int_eq(pmqos_update(c, cookie, 66), 0);
        ck_assert_kernel_at_most(66);
        ck_assert_int_eq(pmqos_cancel(c, cookie), 0);
        ck_assert_int_eq(kernel_read(), baseline);
        pmqos_client_free(c);
}
END_TEST

/* The broker restarts without its runtime record (it was lost): the library
 * issues the request again by itself, with no call of the application,
 * exactly once; the old cookie keeps working. */
/* A broker that does not answer (stopped): the call's own timeout ends the
 * wait, not sd-bus's 25 s; the message says so; the next call works. */
START_TEST(test_call_timeout) {
        pmqos_client *c;
        int32_t v;

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_client_set_timeout(c, 200000), 0);
        pid_t pid = broker_pid();
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(kill(pid, SIGSTOP), 0);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r = pmqos_get_latency(c, &v);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_int_eq(kill(pid, SIGCONT), 0);
        double took = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
        ck_assert_int_eq(r, -ETIMEDOUT);
        ck_assert_double_ge(took, 0.19);
        ck_assert_double_lt(took, 5.0); /* far below sd-bus's default of 25 s */
        ck_assert_str_eq(pmqos_client_last_error(c), "pmqosd did not answer in time.");
        ck_assert_int_eq(pmqos_client_set_timeout(c, 0), 0);
        ck_assert_int_eq(pmqos_get_latency(c, &v), 0);
        pmqos_client_free(c);
}
END_TEST

START_TEST(test_reissue_without_a_call) {
        pmqos_client *c, *w = NULL;
        uint32_t cookie, n = 0;
        char record[4096];

        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_request(c, 78, &cookie), 0);
        pid_t pid = broker_pid();
        snprintf(record, sizeof(record), "%s/requests", getenv("PMQOS_TEST_RUNTIME_DIR"));
        ck_assert_int_eq(unlink(record), 0);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);

        /* Watch from another client; c is left alone. */
        for (int i = 0; i < 400 && n != 1; i++) {
                usleep(10000);
                if (!w && pmqos_client_new(&w) < 0)
                        continue;
                if (pmqos_get_request_count(w, &n) < 0 || broker_pid() == pid)
                        n = 0;
        }
        ck_assert_uint_eq(n, 1);
        ck_assert_kernel_at_most(78);
        ck_assert_int_eq(pmqos_get_request_count(c, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(pmqos_update(c, cookie, 79), 0);
        pmqos_client_free(c);
        ck_assert_int_eq(kernel_read(), baseline);
        pmqos_client_free(w);
}
END_TEST

/* What the stack held before: a constructor that fails must say NULL, or the
 * documented "free it whatever happened" frees garbage. */
static char garbage;

START_TEST(test_no_broker) {
        pmqos_client *c = (pmqos_client *) &garbage;
        ck_assert_int_eq(pmqos_client_new(&c), -ECONNREFUSED);
        ck_assert_ptr_null(c);
        ck_assert_ptr_null(pmqos_client_free(c));
        ck_assert_str_eq(pmqos_strerror(-ECONNREFUSED), "pmqosd is not running");
}
END_TEST

START_TEST(test_no_bus) {
        pmqos_client *c = (pmqos_client *) &garbage;
        ck_assert_int_eq(pmqos_client_new(&c), -EHOSTDOWN);
        ck_assert_ptr_null(c);
        ck_assert_str_eq(pmqos_strerror(-EHOSTDOWN), "The system bus is not available");
}
END_TEST

/* Every value a call may return has a sentence; anything else gets libc's. */
START_TEST(test_strerror) {
        static const int mine[] = { EACCES,    EINVAL, ENOENT, EUSERS,  EOPNOTSUPP, ECONNREFUSED, EHOSTDOWN,
                                    ETIMEDOUT, EIO,    ENOMEM, EBADMSG, E2BIG,      ENOTCONN };
        for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
                ck_assert_ptr_nonnull(pmqos_strerror(-mine[i]));
                ck_assert_str_eq(pmqos_strerror(-mine[i]), pmqos_strerror(mine[i]));
        }
        ck_assert_str_eq(pmqos_strerror(-EACCES), "Not authorized by the system's policy (polkit)");
        ck_assert_str_eq(pmqos_strerror(-EPIPE), strerror(EPIPE));
        ck_assert_ptr_nonnull(pmqos_strerror(INT_MIN));
        ck_assert_ptr_nonnull(pmqos_strerror(-123456));
}
END_TEST

/* Failed constructors leave NULL and 0 on every path, arguments refused too. */
START_TEST(test_constructors_null_on_failure) {
        pmqos_request_info *infos = (pmqos_request_info *) &garbage;
        pmqos_explanation *e = (pmqos_explanation *) &garbage;
        size_t n = 7;
        uint32_t cookie = 7;

        ck_assert_int_eq(pmqos_list_requests(NULL, &infos, &n), -EINVAL);
        ck_assert_ptr_null(infos);
        ck_assert_uint_eq(n, 0);
        ck_assert_int_eq(pmqos_explain(NULL, &e), -EINVAL);
        ck_assert_ptr_null(e);
        ck_assert_int_eq(pmqos_request(NULL, 5, &cookie), -EINVAL);
        ck_assert_uint_eq(cookie, 0);
        ck_assert_int_eq(pmqos_client_new(NULL), -EINVAL);
        ck_assert_int_eq(pmqos_client_set_timeout(NULL, 1), -EINVAL);
}
END_TEST

/* The scheduling policy of each thread of this process but the caller. */
static unsigned other_threads(pid_t self, int *policies, unsigned max) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        unsigned n = 0;
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && atoi(de->d_name) != self && n < max)
                        policies[n++] = sched_getscheduler(atoi(de->d_name));
        closedir(d);
        return n;
}

/* A SCHED_FIFO caller makes a request, which starts the helper thread: that
 * thread is SCHED_OTHER, and it is the only thread the library started. */
START_TEST(test_threads_sched_other) {
        struct sched_param fifo = { .sched_priority = 10 }, other = { .sched_priority = 0 };
        pid_t self = (pid_t) syscall(SYS_gettid);
        int policies[16];
        pmqos_client *c;
        uint32_t cookie;

        ck_assert_int_eq(other_threads(self, policies, 16), 0);
        ck_assert_int_eq(pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo), 0);
        ck_assert_int_eq(pmqos_client_new(&c), 0);
        ck_assert_int_eq(pmqos_request(c, 100, &cookie), 0);
        ck_assert_int_eq(sched_getscheduler(0), SCHED_FIFO);
        ck_assert_int_eq(other_threads(self, policies, 16), 1);
        ck_assert_int_eq(policies[0], SCHED_OTHER);
        pmqos_client_free(c);
        ck_assert_int_eq(other_threads(self, policies, 16), 0);
        ck_assert_int_eq(pthread_setschedparam(pthread_self(), SCHED_OTHER, &other), 0);
}
END_TEST

int main(int argc, char *argv[]) {
        const char *mode = argc > 1 ? argv[1] : "broker";
        if (strcmp(mode, "sched-fifo") == 0) {
                struct sched_param fifo = { .sched_priority = 10 }, other = { .sched_priority = 0 };
                if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) != 0) {
                        /* A cgroup without a real-time budget, or no CAP_SYS_NICE. */
                        printf("cannot run SCHED_FIFO here: no real-time caller to test with\n");
                        return 77;
                }
                pthread_setschedparam(pthread_self(), SCHED_OTHER, &other);
        }
        Suite *s = suite_create("libpmqos");
        TCase *tc = tcase_create(mode);
        tcase_set_timeout(tc, 60);

        if (strcmp(mode, "broker") == 0) {
                tcase_add_checked_fixture(tc, setup, NULL);
                tcase_add_test(tc, test_request_update_cancel);
                tcase_add_test(tc, test_free_ends_requests);
                tcase_add_test(tc, test_error_mapping);
                tcase_add_test(tc, test_denied);
                tcase_add_test(tc, test_limit);
                tcase_add_test(tc, test_rich_calls);
                tcase_add_test(tc, test_pages_and_folded);
                tcase_add_test(tc, test_events);
                tcase_add_test(tc, test_survives_broker_restart);
                tcase_add_test(tc, test_reissue_without_a_call);
                tcase_add_test(tc, test_call_timeout);
        } else if (strcmp(mode, "no-broker") == 0) {
                tcase_add_test(tc, test_no_broker);
                tcase_add_test(tc, test_strerror);
                tcase_add_test(tc, test_constructors_null_on_failure);
        } else if (strcmp(mode, "no-bus") == 0)
                tcase_add_test(tc, test_no_bus);
        else if (strcmp(mode, "sched-fifo") == 0)
                tcase_add_test(tc, test_threads_sched_other);
        else
                return EXIT_FAILURE;
        suite_add_tcase(s, tc);

        return unit_run(s, CK_NOFORK);
}
