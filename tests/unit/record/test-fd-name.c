/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the names held requests' descriptors carry in the service
 * manager's store: each kind round-trips, and anything else the store might
 * hand back (another daemon's name, a cookie out of range, junk) is refused. */

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "record/fd-name.h"
#include "unit.h"

START_TEST(test_round_trip) {
        static const FdNameKind kinds[] = { FD_NAME_HOLD, FD_NAME_PROCESS, FD_NAME_CGROUP };
        static const uint32_t cookies[] = { 1, 9, 10, 12345, UINT32_MAX };
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
                for (size_t c = 0; c < sizeof(cookies) / sizeof(cookies[0]); c++) {
                        char buf[FD_NAME_MAX];
                        FdNameKind kind = 0;
                        uint32_t cookie = 0;
                        fd_name_format(buf, kinds[k], cookies[c]);
                        ck_assert_uint_eq(strlen(buf), 9); /* LISTEN_FDNAMES= has room for them all */
                        ck_assert_int_eq(fd_name_parse(buf, &kind, &cookie), 0);
                        ck_assert_int_eq(kind, kinds[k]);
                        ck_assert_uint_eq(cookie, cookies[c]);
                }
}
END_TEST

START_TEST(test_names) {
        FdNameKind kind;
        uint32_t cookie;
        ck_assert_int_eq(fd_name_parse("hold-42", &kind, &cookie), 0);
        ck_assert_int_eq(kind, FD_NAME_HOLD);
        ck_assert_uint_eq(cookie, 42);
        ck_assert_int_eq(fd_name_parse("pid-7", &kind, &cookie), 0);
        ck_assert_int_eq(kind, FD_NAME_PROCESS);
        ck_assert_int_eq(fd_name_parse("cg-4294967295", &kind, &cookie), 0);
        ck_assert_int_eq(kind, FD_NAME_CGROUP);
        ck_assert_uint_eq(cookie, UINT32_MAX);
        ck_assert_int_eq(fd_name_parse("hold-1234", &kind, &cookie), 0); /* 9 bytes, as a new name */
        ck_assert_uint_eq(cookie, 1234);
        /* Today's names: a letter and 8 lowercase hex digits. */
        ck_assert_int_eq(fd_name_parse("h0000002a", &kind, &cookie), 0);
        ck_assert_int_eq(kind, FD_NAME_HOLD);
        ck_assert_uint_eq(cookie, 42);
        ck_assert_int_eq(fd_name_parse("pdeadbeef", &kind, &cookie), 0);
        ck_assert_int_eq(kind, FD_NAME_PROCESS);
        ck_assert_uint_eq(cookie, 0xdeadbeef);
        ck_assert_int_eq(fd_name_parse("cffffffff", &kind, &cookie), 0);
        ck_assert_int_eq(kind, FD_NAME_CGROUP);
        ck_assert_uint_eq(cookie, UINT32_MAX);
}
END_TEST

START_TEST(test_refusals) {
        static const char *const bad[] = {
                "",          "hold-",     "hold-0",     "hold-01",         "hold-+1",
                "hold--1",   "hold-1 ",   "hold-1x",    "hold-4294967296", "pid-99999999999999999999",
                "cg-",       "HOLD-1",    "hold1",      "cpu_dma_latency", "cpu_wakeup_latency",
                "stored",    "hold-1\n",  " hold-1",    "cg-0x10",         "h00000000",
                "h0000002A", "h0000002",  "h0000002a0", "x0000002a",       "h-000002a",
                "h 000002a", "H0000002a", "p0000002g",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                FdNameKind kind = 0;
                uint32_t cookie = 0;
                ck_assert_msg(fd_name_parse(bad[i], &kind, &cookie) == -EINVAL, "\"%s\" was taken", bad[i]);
                ck_assert_int_eq(kind, 0);
        }
        ck_assert_int_eq(fd_name_parse(NULL, &(FdNameKind){ 0 }, &(uint32_t){ 0 }), -EINVAL);
}
END_TEST

int main(void) {
        Suite *s = suite_create("fd-name");
        TCase *tc = tcase_create("fd-name");
        tcase_add_test(tc, test_round_trip);
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_refusals);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
