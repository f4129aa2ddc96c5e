/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of sys/foreign-writes.c: which knob a path is, the unit of a
 * /proc/PID/cgroup text, and (as root: fanotify needs CAP_SYS_ADMIN) the
 * watch on a fake sysfs tree — a child with its own comm named with the
 * value it wrote (its pidfd with the event), pmqosd's own write clearing the file's writer, a disable
 * file's writer, restore writing back what the file held at start, and a
 * CPU's new cpuidle files marked when its online file is written. */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/foreign-writes.h"
#include "unit.h"

START_TEST(test_knob_of_path) {
        KnobKind kind;
        uint32_t cpu;
        unsigned state;
        ck_assert_int_eq(foreign_knob_of_path("/sys/devices/system/cpu/cpu12/power/pm_qos_resume_latency_us", &kind,
                                              &cpu, &state),
                         0);
        ck_assert_int_eq(kind, KNOB_RESUME_LATENCY);
        ck_assert_uint_eq(cpu, 12);
        ck_assert_int_eq(
                foreign_knob_of_path("/sys/devices/system/cpu/cpu1/cpuidle/state3/disable", &kind, &cpu, &state), 0);
        ck_assert_int_eq(kind, KNOB_DISABLE);
        ck_assert_uint_eq(state, 3);
        ck_assert_int_eq(foreign_knob_of_path("/tmp/x/devices/system/cpu/cpu1/online", &kind, &cpu, &state), 0);
        ck_assert_int_eq(kind, KNOB_ONLINE);
        static const char *const bad[] = {
                "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
                "/sys/devices/system/cpu/cpu1/cpuidle/state3/disable2",
                "/sys/devices/system/cpu/cpu1/cpuidle/state99/disable",
                "/sys/devices/system/cpu/cpu99999/online",
                "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us/x",
                "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_int_eq(foreign_knob_of_path(bad[i], &kind, &cpu, &state), -EINVAL);
}
END_TEST

START_TEST(test_unit_of_cgroup) {
        static const struct {
                const char *text, *unit;
        } cases[] = {
                { "0::/system.slice/tuned.service\n", "tuned.service" },
                { "0::/user.slice/user-0.slice/session-3.scope\n", "session-3.scope" },
                { "0::/system.slice/crio.service/payload/x\n", "crio.service" },
                { "1:name=systemd:/a.service\n0::/init.scope\n", "init.scope" },
                { "0::/\n", "" },
                { "12:cpu:/x.service\n", "" },
                { "0::/system.slice/\xff\x01.service\n", "\\xff\\x01.service" },
        };
        char unit[FOREIGN_UNIT_MAX];
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                foreign_unit_of_cgroup(cases[i].text, unit, sizeof(unit));
                ck_assert_str_eq(unit, cases[i].unit);
        }
}
END_TEST

static const char *root;

static void make_tree(void) {
        root = unit_make_dir("foreign");
        unit_write_file(root, "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "0\n");
        unit_write_file(root, "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "100\n");
        unit_write_file(root, "devices/system/cpu/cpu1/online", "1\n");
        unit_write_file(root, "devices/system/cpu/cpu1/cpuidle/state0/disable", "0\n");
        unit_write_file(root, "devices/system/cpu/cpu1/cpuidle/state1/disable", "0\n");
}

/* A child named "fw-child" writes text to name under root, then waits until
 * told to go; returns once the write is done. */
static pid_t child_writes(const char *name, const char *text, int *ret_go) {
        int p[2], done[2];
        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(pipe(done), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char path[512], c;
                close(p[1]);
                close(done[0]);
                (void) prctl(PR_SET_NAME, "fw-child", 0, 0, 0);
                snprintf(path, sizeof(path), "%s/%s", root, name);
                FILE *f = fopen(path, "r+");
                if (!f || fputs(text, f) < 0 || fclose(f) != 0)
                        _exit(1);
                close(done[1]);
                _exit(read(p[0], &c, 1) == 0 ? 0 : 2);
        }
        char c;
        close(p[0]);
        close(done[1]);
        ck_assert_int_eq(read(done[0], &c, 1), 0);
        close(done[0]);
        *ret_go = p[1];
        return pid;
}

static void reap(pid_t pid, int go) {
        int status;
        close(go);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The pid a pidfd's fdinfo says, or -1. */
static long pid_of_pidfd(int pidfd) {
        char path[64], text[1024];
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        const char *p = strstr(text, "\nPid:");
        return p ? strtol(p + 5, NULL, 10) : -1;
}

/* The pid of the pidfd the last read_one() write came with (closed then), or -1. */
static long last_pidfd_pid;

static int read_one(ForeignWatch *w, ForeignWrite *out) {
        struct pollfd pfd = { .fd = w->fd, .events = POLLIN };
        ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
        int r = foreign_watch_read(w, 1000, 2000, out, 1);
        last_pidfd_pid = r > 0 && out->pidfd >= 0 ? pid_of_pidfd(out->pidfd) : -1;
        if (r > 0)
                foreign_writes_close(out, 1);
        return r;
}

START_TEST(test_watch_names_writers) {
        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test_watch_names_writers: fanotify needs CAP_SYS_ADMIN (run as root)\n");
                return;
        }
        make_tree();
        ForeignWatch w;
        ck_assert_int_eq(foreign_watch_init(&w, root), 0);
        ck_assert_uint_eq(w.n_cpus, 2);
        ck_assert_uint_eq(w.cpus[1].n_states, 2);

        int go;
        pid_t pid = child_writes("devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "n/a", &go);
        ForeignWrite fw;
        ck_assert_int_eq(read_one(&w, &fw), 1);
        ck_assert(!fw.own);
        ck_assert_int_eq(fw.kind, KNOB_RESUME_LATENCY);
        ck_assert_uint_eq(fw.cpu, 1);
        ck_assert_uint_eq(fw.writer.pid, (uint32_t) pid);
        ck_assert_str_eq(fw.writer.comm, "fw-child");
        ck_assert_str_eq(fw.writer.value, "n/a");
        ck_assert_int_eq(fw.writer.when, 1000);
        ck_assert(!fw.contested);
        /* The writer's pidfd came with the event (Linux 5.15): adopt binds it, not a pid that may be reused. */
        if (w.pidfds)
                ck_assert_int_eq(last_pidfd_pid, pid);
        else
                fprintf(stderr, "SKIP: the pidfd with the event: this kernel refuses FAN_REPORT_PIDFD\n");
        const ForeignWriter *wr = foreign_watch_writer(&w, 1, -1);
        ck_assert_ptr_nonnull(wr);
        ck_assert_uint_eq(wr->pid, (uint32_t) pid);
        ck_assert_ptr_null(foreign_watch_writer(&w, 0, -1));
        reap(pid, go);

        /* restore: what the file held when first marked. */
        CpuSink sink;
        ck_assert_int_eq(cpu_sink_init(&sink, root), 0);
        char value[FOREIGN_VALUE_MAX];
        ck_assert_int_eq(foreign_watch_restore(&w, &sink, &fw, value, sizeof(value)), 1);
        ck_assert_str_eq(value, "100");
        ck_assert_str_eq(unit_read_file(root, "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"), "100");
        /* That write was pmqosd's own: it clears the file's writer. */
        ck_assert_int_eq(read_one(&w, &fw), 1);
        ck_assert(fw.own);
        ck_assert_ptr_null(foreign_watch_writer(&w, 1, -1));
        cpu_sink_done(&sink);

        pid = child_writes("devices/system/cpu/cpu1/cpuidle/state1/disable", "1", &go);
        ck_assert_int_eq(read_one(&w, &fw), 1);
        ck_assert_int_eq(fw.kind, KNOB_DISABLE);
        ck_assert_uint_eq(fw.state, 1);
        ck_assert_str_eq(foreign_watch_writer(&w, 1, 1)->comm, "fw-child");
        ck_assert_ptr_null(foreign_watch_writer(&w, 1, 0));
        reap(pid, go);

        /* A CPU brought online (its online file written, by anyone) has new
         * cpuidle files: they are marked then, and their writers named. */
        unit_write_file(root, "devices/system/cpu/cpu1/cpuidle/state2/disable", "0\n");
        unit_write_file(root, "devices/system/cpu/cpu1/online", "1\n");
        ck_assert_int_eq(read_one(&w, &fw), 0);
        ck_assert_uint_eq(w.cpus[1].n_states, 3);
        pid = child_writes("devices/system/cpu/cpu1/cpuidle/state2/disable", "1", &go);
        ck_assert_int_eq(read_one(&w, &fw), 1);
        ck_assert_uint_eq(fw.state, 2);
        ck_assert_uint_eq(foreign_watch_writer(&w, 1, 2)->pid, (uint32_t) pid);
        reap(pid, go);

        foreign_watch_done(&w);
        unit_remove_dir(root);
}
END_TEST

/* Two writers of one file, both queued before the watch is read: the file
 * holds the second's value by then, so the first's is unknown (it was read
 * as the second's: a 50 µs bound adopted as 500). */
START_TEST(test_earlier_write_in_batch_is_unknown) {
        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test_earlier_write_in_batch_is_unknown: fanotify needs CAP_SYS_ADMIN\n");
                return;
        }
        make_tree();
        ForeignWatch w;
        ck_assert_int_eq(foreign_watch_init(&w, root), 0);
        int go_a, go_b;
        pid_t a = child_writes("devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "50", &go_a);
        pid_t b = child_writes("devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "500", &go_b);
        ForeignWrite out[FOREIGN_BATCH];
        ck_assert_int_eq(foreign_watch_read(&w, 1000, 2000, out, FOREIGN_BATCH), 2);
        ck_assert_uint_eq(out[0].writer.pid, (uint32_t) a);
        ck_assert_str_eq(out[0].writer.value, FOREIGN_VALUE_UNKNOWN);
        ck_assert_uint_eq(out[1].writer.pid, (uint32_t) b);
        ck_assert_str_eq(out[1].writer.value, "500");
        ck_assert_str_eq(foreign_watch_writer(&w, 1, -1)->value, "500");
        foreign_writes_close(out, 2);
        reap(b, go_b); /* b holds a's pipe too */
        reap(a, go_a);
        foreign_watch_done(&w);
        unit_remove_dir(root);
}
END_TEST

/* A fighter that spawns a new process per write is contested all the same:
 * the contest counts the file's foreign writes, whoever makes them, and says
 * so once per window. */
START_TEST(test_contest_is_per_file) {
        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test_contest_is_per_file: fanotify needs CAP_SYS_ADMIN\n");
                return;
        }
        make_tree();
        ForeignWatch w;
        ck_assert_int_eq(foreign_watch_init(&w, root), 0);
        for (unsigned i = 0; i < BURST_LIMIT + 2u; i++) {
                int go;
                pid_t pid = child_writes("devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "0", &go);
                ForeignWrite fw;
                ck_assert_int_eq(read_one(&w, &fw), 1);
                ck_assert_uint_eq(fw.writer.pid, (uint32_t) pid);
                ck_assert_int_eq(fw.contested, i >= BURST_LIMIT);
                ck_assert_int_eq(fw.contest_news, i == BURST_LIMIT);
                ck_assert_int_eq(foreign_watch_writer(&w, 1, -1)->contested, i >= BURST_LIMIT);
                reap(pid, go);
        }
        foreign_watch_done(&w);
        unit_remove_dir(root);
}
END_TEST

int main(void) {
        Suite *s = suite_create("foreign-writes");
        TCase *tc = tcase_create("foreign-writes");
        tcase_add_test(tc, test_knob_of_path);
        tcase_add_test(tc, test_unit_of_cgroup);
        tcase_add_test(tc, test_watch_names_writers);
        tcase_add_test(tc, test_earlier_write_in_batch_is_unknown);
        tcase_add_test(tc, test_contest_is_per_file);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
