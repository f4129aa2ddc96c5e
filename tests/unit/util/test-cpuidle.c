/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the cpuidle reader on a fake sysfs tree: states read in
 * order until one is not a state, counters to UINT64_MAX, refusals. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/cpu-sink.h"
#include "util/cpuidle.h"
#include "sys/holders.h"
#include "model/store.h"
#include "unit.h"

START_TEST(test_cpuidle_read) {
        const char *dir = unit_make_dir("cpuidle");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state0/name", "POLL\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state0/latency", "0\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state1/name", "C1E\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state1/latency", "10\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state1/disable", "1\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state1/usage", "18446744073709551615\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state1/time", "77\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state2/name", "C6\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state2/latency", "+1\n"); /* not a number: the end */
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state3/name", "C7\n");
        unit_write_file(dir, "devices/system/cpu/cpu0/cpuidle/state3/latency", "200\n");

        CpuIdle idle;
        ck_assert_int_eq(cpuidle_read(dir, 0, &idle), 0);
        ck_assert_uint_eq(idle.n, 2);
        ck_assert_str_eq(idle.states[0].name, "POLL");
        ck_assert(!idle.states[0].disabled);
        ck_assert_str_eq(idle.states[1].name, "C1E");
        ck_assert_uint_eq(idle.states[1].latency, 10);
        ck_assert(idle.states[1].disabled);
        ck_assert_uint_eq(idle.states[1].usage, UINT64_MAX);
        ck_assert_uint_eq(idle.states[1].time, 77);
        cpuidle_done(&idle);
        ck_assert_int_eq(cpuidle_read(dir, 5, &idle), 0); /* no such CPU: no states */
        ck_assert_uint_eq(idle.n, 0);

        uint64_t v;
        ck_assert_int_eq(cpuidle_parse_u64("18446744073709551616", &v), -EINVAL);
        ck_assert_int_eq(cpuidle_parse_u64("-1", &v), -EINVAL);
        ck_assert_int_eq(cpuidle_parse_u64("", &v), -EINVAL);
        ck_assert_int_eq(cpuidle_parse_u64("12x", &v), -EINVAL);
        unit_remove_dir(dir);
}
END_TEST

/* A name stands for the largest exit latency of its state on any online
 * CPU (compared without case); offline CPUs do not count. */
START_TEST(test_cpuidle_latency_of) {
        const char *dir = unit_make_dir("cpuidle-names");
        char names[64];
        uint32_t v = 0;
        ck_assert_int_eq(cpuidle_latency_of(dir, "C1E", 2000000000, &v, names, sizeof(names)), -ENODEV);
        unit_write_file(dir, "devices/system/cpu/cpu10/cpuidle/state0/name", "POLL\n");
        unit_write_file(dir, "devices/system/cpu/cpu10/cpuidle/state0/latency", "0\n");
        unit_write_file(dir, "devices/system/cpu/cpu10/cpuidle/state1/name", "C1E\n");
        unit_write_file(dir, "devices/system/cpu/cpu10/cpuidle/state1/latency", "12\n");
        unit_write_file(dir, "devices/system/cpu/cpu10/online", "1\n");
        unit_write_file(dir, "devices/system/cpu/cpu2/cpuidle/state0/name", "POLL\n");
        unit_write_file(dir, "devices/system/cpu/cpu2/cpuidle/state0/latency", "0\n");
        unit_write_file(dir, "devices/system/cpu/cpu2/cpuidle/state1/name", "C1e\n");
        unit_write_file(dir, "devices/system/cpu/cpu2/cpuidle/state1/latency", "9\n");
        unit_write_file(dir, "devices/system/cpu/cpu2/cpuidle/state2/name", "C6\n");
        unit_write_file(dir, "devices/system/cpu/cpu2/cpuidle/state2/latency", "3000000000\n"); /* above max */
        unit_write_file(dir, "devices/system/cpu/cpu3/cpuidle/state0/name", "C1E\n");
        unit_write_file(dir, "devices/system/cpu/cpu3/cpuidle/state0/latency", "400\n");
        unit_write_file(dir, "devices/system/cpu/cpu3/online", "0\n");
        unit_write_file(dir, "devices/system/cpu/cpufreq/online", "1\n"); /* not a CPU */

        ck_assert_int_eq(cpuidle_latency_of(dir, "c1e", 2000000000, &v, names, sizeof(names)), 0);
        ck_assert_uint_eq(v, 12);
        ck_assert_int_eq(cpuidle_latency_of(dir, "POLL", 2000000000, &v, names, sizeof(names)), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(cpuidle_latency_of(dir, "C6", 2000000000, &v, names, sizeof(names)), -ENOENT);
        /* In the order of the CPUs and their tables, each name once, cut short to fit. */
        ck_assert_int_eq(cpuidle_latency_of(dir, "C7", 2000000000, &v, names, sizeof(names)), -ENOENT);
        ck_assert_str_eq(names, "POLL, C1e, C6, C1E");
        ck_assert_int_eq(cpuidle_latency_of(dir, "C7", 2000000000, &v, names, 12), -ENOENT);
        ck_assert_str_eq(names, "POLL, C1e");
        unit_remove_dir(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cpuidle");
        TCase *tc = tcase_create("cpuidle");
        tcase_add_test(tc, test_cpuidle_read);
        tcase_add_test(tc, test_cpuidle_latency_of);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
