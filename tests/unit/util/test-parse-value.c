/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The value grammar of pmqosctl (client-lib/parse-value.c): decimal only,
 * systemd-style time spans, latencies bare or with a unit. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/parse-value.h"
#include "unit.h"

START_TEST(test_decimal_only) {
        uint64_t v;
        ck_assert_int_eq(parse_decimal("0", 10, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(parse_decimal("010", 100, &v), 0);
        ck_assert_uint_eq(v, 10); /* never octal */
        ck_assert_int_eq(parse_decimal("4294967295", UINT32_MAX, &v), 0);
        ck_assert_uint_eq(v, UINT32_MAX);
        ck_assert_int_eq(parse_decimal("4294967296", UINT32_MAX, &v), -ERANGE);
        ck_assert_int_eq(parse_decimal("18446744073709551616", UINT64_MAX, &v), -ERANGE);
        static const char *const bad[] = { "", "0x10", "-1", "+1", " 1", "1 ", "1e3", "1.0", "0b1", "١" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_int_eq(parse_decimal(bad[i], UINT64_MAX, &v), -EINVAL);
}
END_TEST

START_TEST(test_timespans) {
        static const struct {
                const char *s;
                uint64_t usec;
        } good[] = {
                { "30", 30000000 },         { "50us", 50 },
                { "50\xc2\xb5s", 50 },      { "2ms", 2000 },
                { "30s", 30000000 },        { "5min", 300000000 },
                { "5m", 300000000 },        { "1h", 3600000000 },
                { "1h 30min", 5400000000 }, { "1h30min", 5400000000 },
                { "2 min", 120000000 },     { "1d", 86400000000 },
                { "1w", 604800000000 },     { "010s", 10000000 },
                { "3 seconds", 3000000 },   { "0", 0 },
        };
        uint64_t v;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                ck_assert_msg(parse_timespan(good[i].s, USEC_PER_SEC, &v) == 0, "%s", good[i].s);
                ck_assert_uint_eq(v, good[i].usec);
        }
        static const char *const bad[] = { "",  " ",    "1.s", ".5s",           "1,5s", "5mon",
                                           "s", "0x10", "-1s", "5 minutes ago", "1y" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(parse_timespan(bad[i], USEC_PER_SEC, &v) == -EINVAL, "%s", bad[i]);
        ck_assert_int_eq(parse_timespan("99999999999999w", USEC_PER_SEC, &v), -ERANGE);
        ck_assert_int_eq(parse_timespan("18446744073709551615us 1us", 1, &v), -ERANGE);
}
END_TEST

START_TEST(test_latencies) {
        int32_t v;
        ck_assert_int_eq(parse_latency("50", 2000000000, &v), 0);
        ck_assert_int_eq(v, 50);
        ck_assert_int_eq(parse_latency("2ms", 2000000000, &v), 0);
        ck_assert_int_eq(v, 2000);
        ck_assert_int_eq(parse_latency("050", 2000000000, &v), 0);
        ck_assert_int_eq(v, 50);
        ck_assert_int_eq(parse_latency("2000000000", 2000000000, &v), 0);
        ck_assert_int_eq(parse_latency("2000000001", 2000000000, &v), -ERANGE);
        ck_assert_int_eq(parse_latency("1h", 2000000000, &v), -ERANGE);
        ck_assert_int_eq(parse_latency("-1", 2000000000, &v), -EINVAL);
        ck_assert_int_eq(parse_latency("0x32", 2000000000, &v), -EINVAL);
        ck_assert_int_eq(parse_latency("1e3", 2000000000, &v), -EINVAL);
}
END_TEST

/* A value is a latency or a C-state name, never both: names start with a letter. */
START_TEST(test_cstate_names) {
        static const char *const names[] = { "C1E",           "POLL",        "c6",
                                             "haltpoll idle", "cpu-sleep-0", "WFI",
                                             "C1_ACPI",       "S0i2.0",      "abcdefghijklmnopqrstuvwxyz01234" };
        static const char *const not_names[] = { "",    "1C",   "50us", "-C1",       " C1",
                                                 "C1 ", "C1\n", "C1=2", "C\xc2\xb5", "abcdefghijklmnopqrstuvwxyz012345",
                                                 "_C1", ".C1",  "none", "None" };
        int32_t v;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                ck_assert_msg(latency_is_cstate_name(names[i]), "%s", names[i]);
                ck_assert_msg(parse_latency(names[i], 2000000000, &v) == -EINVAL, "%s", names[i]);
        }
        for (size_t i = 0; i < sizeof(not_names) / sizeof(not_names[0]); i++)
                ck_assert_msg(!latency_is_cstate_name(not_names[i]), "%s", not_names[i]);
}
END_TEST

int main(void) {
        Suite *s = suite_create("parse-value");
        TCase *tc = tcase_create("grammar");
        tcase_add_test(tc, test_decimal_only);
        tcase_add_test(tc, test_timespans);
        tcase_add_test(tc, test_latencies);
        tcase_add_test(tc, test_cstate_names);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK);
}
