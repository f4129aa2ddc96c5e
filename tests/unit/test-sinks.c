/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the kernel sinks on stand-ins: a regular file for the device
 * (4-byte binary writes, none when unchanged) and a fake sysfs tree for the
 * per-CPU files (originals remembered, "n/a" for 0, restored). */

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

START_TEST(test_device_written_only_on_change) {
        char path[128];
        Sink s;
        int32_t v;
        struct stat st;

        make_dir();
        snprintf(path, sizeof(path), "%s/device", dir);
        write_file(path, "leftover text from someone else");

        ck_assert_int_eq(sink_open(&s, path), 0);
        /* A stand-in file starts unconstrained, as the device does. */
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_size, 4);
        ck_assert_int_eq(unit_read_device(path), PMQOS_LATENCY_MAX_US);

        ck_assert(!s.honours_writes);
        ck_assert_int_eq(sink_apply(&s, 100), 0);
        ck_assert_int_eq(unit_read_device(path), 100); /* binary, not "100" (which the kernel reads as 256) */
        /* Read back and seen in effect: later writes are not read back. */
        ck_assert(s.honours_writes);
        ck_assert(!s.ignores_writes);
        ck_assert_int_eq(sink_apply(&s, 100), 0);
        ck_assert_int_eq(sink_apply(&s, 0), 0);
        ck_assert_int_eq(unit_read_device(path), 0);
        ck_assert_int_eq(sink_read(&s, &v), 0);
        ck_assert_int_eq(v, 0);
        ck_assert_uint_eq(s.n_writes, 2);

        /* No requirement lifts our request to the kernel's default. */
        ck_assert_int_eq(sink_apply(&s, PMQOS_LATENCY_NONE), 0);
        ck_assert_int_eq(unit_read_device(path), PMQOS_LATENCY_MAX_US);
        ck_assert_int_eq(sink_apply(&s, PMQOS_LATENCY_MAX_US), 0);
        ck_assert_uint_eq(s.n_writes, 3);
        /* Closing drops our request, as the kernel does with a descriptor. */
        ck_assert_int_eq(sink_apply(&s, 77), 0);
        sink_close(&s);
        ck_assert_int_eq(unit_read_device(path), PMQOS_LATENCY_MAX_US);
        ck_assert_int_eq(s.fd, -1);
        sink_close(&s); /* twice is harmless */
        remove_dir();
}
END_TEST

START_TEST(test_device_failures) {
        Sink s;

        ck_assert_int_eq(sink_open(&s, "/nonexistent/cpu_dma_latency"), -ENOENT);
        ck_assert_int_eq(s.fd, -1);
        ck_assert_ptr_null(s.path);

        /* A failed write leaves "written" alone, so the next apply tries again. */
        ck_assert_int_eq(sink_open(&s, "/dev/full"), 0);
        ck_assert_int_eq(sink_apply(&s, 50), -ENOSPC);
        ck_assert_int_eq(s.written, PMQOS_LATENCY_MAX_US);
        ck_assert_int_eq(sink_apply(&s, 50), -ENOSPC);
        ck_assert_uint_eq(s.n_writes, 0);
        sink_close(&s);
}
END_TEST

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

int main(void) {
        Suite *s = suite_create("sinks");
        TCase *tc = tcase_create("sinks");
        tcase_add_test(tc, test_device_written_only_on_change);
        tcase_add_test(tc, test_device_failures);
        tcase_add_test(tc, test_cpu_presence);
        tcase_add_test(tc, test_cpu_bounds_written_and_restored);
        tcase_add_test(tc, test_cpu_originals_left_by_a_crash);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
