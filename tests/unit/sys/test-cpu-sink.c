/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the per-CPU sink on a fake sysfs tree: CPUs found (not
 * cpufreq, not offline ones), originals remembered before the first write,
 * "n/a" for 0, restored, taken over after a crash, and a file viewed. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/cpu-sink.h"
#include "sys/sink.h"
#include "model/store.h"
#include "unit.h"

static char dir[] = "/tmp/pmqos-test-sinks-XXXXXX";

static void make_dir(void) {
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
        strcpy(dir + strlen(dir) - 6, "XXXXXX");
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

static const char *read_file(const char *path) {
        static char buf[64];
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        fclose(f);
        return buf;
}

static void make_cpu(const char *name, const char *online, const char *value) {
        char path[256];
        snprintf(path, sizeof(path), "%s/devices/system/cpu/%s/power", dir, name);
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
        ck_assert_int_eq(system(cmd), 0);
        if (value) {
                strcat(path, "/pm_qos_resume_latency_us");
                write_file(path, value);
        }
        if (online) {
                snprintf(path, sizeof(path), "%s/devices/system/cpu/%s/online", dir, name);
                write_file(path, online);
        }
}

static const char *cpu_file(unsigned cpu) {
        char path[256];
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/power/pm_qos_resume_latency_us", dir, cpu);
        return read_file(path);
}

static void make_cpus(void) {
        make_dir();
        make_cpu("cpu0", NULL, "0\n"); /* cpu0 often cannot go offline: no "online" file */
        make_cpu("cpu1", "1\n", "100\n");
        make_cpu("cpu2", "0\n", "0\n");
        make_cpu("cpufreq", NULL, NULL); /* not a CPU */
        make_cpu("cpu3x", NULL, "0\n");  /* not a CPU either */
}

START_TEST(test_cpu_presence) {
        CpuSink s;

        make_cpus();
        ck_assert_int_eq(cpu_sink_init(&s, dir), 0);
        ck_assert_uint_eq(s.n_fds, 3);
        ck_assert_int_eq(cpu_sink_check_cpu(&s, 0), 0);
        ck_assert_int_eq(cpu_sink_check_cpu(&s, 1), 0);
        ck_assert_int_eq(cpu_sink_check_cpu(&s, 2), -EHOSTDOWN);
        ck_assert_int_eq(cpu_sink_check_cpu(&s, 3), -ENOENT);
        ck_assert_int_eq(cpu_sink_check_cpu(&s, UINT32_MAX), -ENOENT);
        cpu_sink_done(&s);

        /* No per-CPU files at all: every CPU is refused, nothing fails. */
        ck_assert_int_eq(cpu_sink_init(&s, "/nonexistent"), 0);
        ck_assert_int_eq(cpu_sink_check_cpu(&s, 0), -ENOENT);
        cpu_sink_done(&s);
        remove_dir();
}
END_TEST

START_TEST(test_cpu_bounds_written_and_restored) {
        CpuSink s;

        make_cpus();
        ck_assert_int_eq(cpu_sink_init(&s, dir), 0);

        ck_assert_int_eq(cpu_sink_write(&s, 1, 20), -ESTALE); /* the original must be remembered first */
        ck_assert_int_eq(cpu_sink_remember(&s, 1), 0);
        ck_assert(cpu_sink_constrains(&s, 1));
        ck_assert_int_eq(cpu_sink_write(&s, 1, 20), 0);
        ck_assert_str_eq(cpu_file(1), "20");
        ck_assert_int_eq(cpu_sink_written(&s, 1), 20);
        /* 0 µs is "n/a" there: a written "0" would mean no constraint at all. */
        ck_assert_int_eq(cpu_sink_write(&s, 1, 0), 0);
        ck_assert_str_eq(cpu_file(1), "n/a");
        ck_assert_int_eq(cpu_sink_remember(&s, 1), 0); /* the first original stays */
        ck_assert_int_eq(cpu_sink_write(&s, 1, PMQOS_LATENCY_NONE), 0);
        ck_assert_str_eq(cpu_file(1), "100");
        ck_assert(!cpu_sink_constrains(&s, 1));
        ck_assert_int_eq(cpu_sink_written(&s, 1), PMQOS_LATENCY_NONE);
        ck_assert_int_eq(cpu_sink_write(&s, 1, PMQOS_LATENCY_NONE), 0); /* nothing to restore */
        ck_assert_uint_eq(s.n_writes, 3);

        ck_assert_int_eq(cpu_sink_remember(&s, 0), 0);
        ck_assert_int_eq(cpu_sink_remember(&s, 1), 0);
        ck_assert_int_eq(cpu_sink_write(&s, 0, 7), 0);
        ck_assert_int_eq(cpu_sink_write(&s, 1, 9), 0);
        ck_assert_int_eq(cpu_sink_remember(&s, 3), -ENOENT);
        ck_assert_int_eq(cpu_sink_restore_all(&s), 0);
        ck_assert_str_eq(cpu_file(0), "0");
        ck_assert_str_eq(cpu_file(1), "100");
        ck_assert_uint_eq(s.n_originals, 0);
        cpu_sink_done(&s);
        remove_dir();
}
END_TEST

START_TEST(test_cpu_originals_left_by_a_crash) {
        CpuSink s;
        char one[] = "100", gone[] = "0";
        const CpuOriginal left[] = { { .cpu = 1, .value = one }, { .cpu = 9, .value = gone } };

        make_cpus();
        char path[256];
        snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", dir);
        write_file(path, "n/a\n"); /* what the crashed run had written */

        ck_assert_int_eq(cpu_sink_init(&s, dir), 0);
        /* Taken over without a write: a CPU that is gone since has nothing to
         * give back; the other counts as holding what its file says. */
        uint64_t writes = s.n_writes;
        ck_assert_int_eq(cpu_sink_adopt_originals(&s, left, 2), 0);
        ck_assert_uint_eq(s.n_writes, writes);
        ck_assert_str_eq(cpu_file(1), "n/a\n");
        ck_assert_uint_eq(s.n_originals, 1);
        ck_assert(cpu_sink_constrains(&s, 1));
        ck_assert_int_eq(cpu_sink_written(&s, 1), 0);
        ck_assert(!cpu_sink_constrains(&s, 9));
        /* Nothing needs it now: the original goes back. */
        ck_assert_int_eq(cpu_sink_write(&s, 1, PMQOS_LATENCY_NONE), 0);
        ck_assert_str_eq(cpu_file(1), "100");
        cpu_sink_done(&s);
        remove_dir();
}
END_TEST

START_TEST(test_cpu_file_view) {
        const char *root = unit_make_dir("cpuview");
        unit_write_file(root, "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "0\n");
        unit_write_file(root, "devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "50\n");
        CpuSink s;
        ck_assert_int_eq(cpu_sink_init(&s, root), 0);
        CpuFileView v;
        ck_assert_int_eq(cpu_sink_view(&s, 0, &v), 0);
        ck_assert_str_eq(v.text, "0");
        ck_assert_int_eq(v.bound, PMQOS_LATENCY_NONE);
        ck_assert(!v.foreign);
        ck_assert_int_eq(cpu_sink_view(&s, 1, &v), 0);
        ck_assert_int_eq(v.bound, 50);
        ck_assert(v.foreign); /* not ours */

        ck_assert_int_eq(cpu_sink_remember(&s, 0), 0);
        ck_assert_int_eq(cpu_sink_write(&s, 0, 0), 0);
        ck_assert_int_eq(cpu_sink_view(&s, 0, &v), 0);
        ck_assert_str_eq(v.text, "n/a");
        ck_assert_int_eq(v.bound, 0);
        ck_assert(!v.foreign); /* ours */
        unit_write_file(root, "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "7\n");
        ck_assert_int_eq(cpu_sink_view(&s, 0, &v), 0);
        ck_assert(v.foreign); /* changed behind our back */
        ck_assert_int_eq(cpu_sink_view(&s, 9, &v), -ENOENT);
        ck_assert_int_eq(cpu_sink_restore_all(&s), 0);
        cpu_sink_done(&s);
        unit_remove_dir(root);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cpu-sink");
        TCase *tc = tcase_create("cpu-sink");
        tcase_add_test(tc, test_cpu_presence);
        tcase_add_test(tc, test_cpu_bounds_written_and_restored);
        tcase_add_test(tc, test_cpu_originals_left_by_a_crash);
        tcase_add_test(tc, test_cpu_file_view);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
