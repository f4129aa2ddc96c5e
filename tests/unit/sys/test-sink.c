/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the device sink on a stand-in (a regular file): 4-byte
 * binary writes, none when unchanged, and failures reported. */

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
        ck_assert_int_eq(unit_read_device(path), PMQOS_CONTRACT_LATENCY_MAX);

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
        ck_assert_int_eq(unit_read_device(path), PMQOS_CONTRACT_LATENCY_MAX);
        ck_assert_int_eq(sink_apply(&s, PMQOS_CONTRACT_LATENCY_MAX), 0);
        ck_assert_uint_eq(s.n_writes, 3);
        /* Closing drops our request, as the kernel does with a descriptor. */
        ck_assert_int_eq(sink_apply(&s, 77), 0);
        sink_close(&s);
        ck_assert_int_eq(unit_read_device(path), PMQOS_CONTRACT_LATENCY_MAX);
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
        ck_assert_int_eq(s.written, PMQOS_CONTRACT_LATENCY_MAX);
        ck_assert_int_eq(sink_apply(&s, 50), -ENOSPC);
        ck_assert_uint_eq(s.n_writes, 0);
        sink_close(&s);
}
END_TEST

int main(void) {
        Suite *s = suite_create("sink");
        TCase *tc = tcase_create("sink");
        tcase_add_test(tc, test_device_written_only_on_change);
        tcase_add_test(tc, test_device_failures);
        suite_add_tcase(s, tc);

        return unit_run(s, CK_FORK_GETENV);
}
