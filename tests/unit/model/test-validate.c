/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the argument rules both interfaces share: type names and
 * latency values, each refusal with its D-Bus error name. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/validate.h"
#include "unit.h"

START_TEST(test_validation) {
        ValidationError e;
        QosType t;

        ck_assert_int_eq(parse_qos_type("cpu_dma", &t, &e), 0);
        ck_assert_int_eq(t, QOS_TYPE_CPU_DMA);
        ck_assert_int_eq(parse_qos_type("network", &t, &e), -EOPNOTSUPP);
        ck_assert_str_eq(e.name, "org.freedesktop.DBus.Error.NotSupported");
        ck_assert_int_eq(parse_qos_type("cpu_wakeup", &t, &e), 0);
        ck_assert_int_eq(t, QOS_TYPE_CPU_WAKEUP);
        ck_assert_int_eq(check_type_supported(QOS_TYPE_CPU_WAKEUP, true, &e), 0);
        ck_assert_int_eq(check_type_supported(QOS_TYPE_CPU_DMA, false, &e), 0);
        ck_assert_int_eq(check_type_supported(QOS_TYPE_CPU_WAKEUP, false, &e), -EOPNOTSUPP);
        ck_assert_str_eq(e.name, "org.freedesktop.DBus.Error.NotSupported");
        ck_assert_ptr_nonnull(strstr(e.message, "/dev/cpu_wakeup_latency"));
        ck_assert_int_eq(parse_qos_type("CPU_DMA", &t, &e), -EINVAL);
        ck_assert_str_eq(e.name, "org.freedesktop.DBus.Error.InvalidArgs");
        ck_assert_int_eq(parse_qos_type("", &t, &e), -EINVAL);

        char longtype[1000];
        memset(longtype, 'x', sizeof(longtype) - 1);
        longtype[sizeof(longtype) - 1] = 0;
        ck_assert_int_eq(parse_qos_type(longtype, &t, &e), -EINVAL);
        ck_assert_uint_lt(strlen(e.message), sizeof(e.message));

        ck_assert_int_eq(check_latency_value(-1, &e), 0);
        ck_assert_int_eq(check_latency_value(0, &e), 0);
        ck_assert_int_eq(check_latency_value(PMQOS_CONTRACT_LATENCY_MAX, &e), 0);
        ck_assert_int_eq(check_latency_value(PMQOS_CONTRACT_LATENCY_MAX + 1, &e), -EINVAL);
        ck_assert_int_eq(check_latency_value(-2, &e), -EINVAL);
        ck_assert_int_eq(check_latency_value(INT32_MIN, &e), -EINVAL);
        ck_assert_ptr_nonnull(strstr(e.message, "-2147483648"));
}
END_TEST

int main(void) {
        Suite *s = suite_create("validate");
        TCase *tc = tcase_create("validate");
        tcase_add_test(tc, test_validation);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
