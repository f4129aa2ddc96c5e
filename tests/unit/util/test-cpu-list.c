/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of CPU lists as the kernel prints them ("0-3,8"): sorted and
 * de-duplicated, and the refusals (reversed ranges, CPUs out of range,
 * bad syntax). */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "unit.h"
#include "util/cpu-list.h"

START_TEST(test_parse) {
        uint32_t *cpus;
        size_t n;
        ck_assert_int_eq(cpu_list_parse("8,0-3,2", &cpus, &n), 0);
        ck_assert_uint_eq(n, 5);
        static const uint32_t want[] = { 0, 1, 2, 3, 8 };
        for (size_t i = 0; i < n; i++)
                ck_assert_uint_eq(cpus[i], want[i]);
        free(cpus);
        ck_assert_int_eq(cpu_list_parse("8191", &cpus, &n), 0);
        ck_assert_uint_eq(n, 1);
        free(cpus);
}
END_TEST

START_TEST(test_refusals) {
        static const char *const bad[] = { "", "3-1", "8192", "1,,2", "a", "1-", "-1", "0x1" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint32_t *cpus = NULL;
                size_t n = 0;
                ck_assert_msg(cpu_list_parse(bad[i], &cpus, &n) == -EINVAL, "\"%s\" was taken", bad[i]);
        }
}
END_TEST

int main(void) {
        Suite *s = suite_create("cpu-list");
        TCase *tc = tcase_create("cpu-list");
        tcase_add_test(tc, test_parse);
        tcase_add_test(tc, test_refusals);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
