/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of pmqosctl run's stand-in parser: a write to the stand-in
 * device read as the kernel reads one to /dev/cpu_dma_latency (4 bytes
 * binary, anything else hex text), and the value that goes to pmqosd. */

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "standin-parse.h"
#include "unit.h"

static int parse_text(const char *s, int32_t *ret) {
        return standin_parse_write(s, strlen(s), ret);
}

START_TEST(test_binary) {
        int32_t v = 0, in = 50;
        ck_assert_int_eq(standin_parse_write(&in, sizeof(in), &v), 0);
        ck_assert_int_eq(v, 50);
        in = -1;
        ck_assert_int_eq(standin_parse_write(&in, sizeof(in), &v), 0);
        ck_assert_int_eq(v, -1);
        /* 4 bytes of text are binary too, as the kernel takes them. */
        ck_assert_int_eq(standin_parse_write("0x10", 4, &v), 0);
        memcpy(&in, "0x10", 4);
        ck_assert_int_eq(v, in);
}
END_TEST

START_TEST(test_hex_text) {
        int32_t v = 0;
        ck_assert_int_eq(parse_text("32\n", &v), 0);
        ck_assert_int_eq(v, 0x32);
        ck_assert_int_eq(parse_text("0x1f", &v), 0); /* 4 bytes: binary; with a newline, text */
        ck_assert_int_eq(parse_text("0x1f\n", &v), 0);
        ck_assert_int_eq(v, 0x1f);
        ck_assert_int_eq(parse_text("-1", &v), 0);
        ck_assert_int_eq(v, -1);
        ck_assert_int_eq(parse_text("+a", &v), 0);
        ck_assert_int_eq(v, 10);
        ck_assert_int_eq(parse_text("-80000000", &v), 0);
        ck_assert_int_eq(v, INT32_MIN);
        ck_assert_int_eq(standin_parse_write("12\0zz", 5, &v), 0); /* a NUL ends the text */
        ck_assert_int_eq(v, 0x12);
}
END_TEST

START_TEST(test_refused_as_the_kernel_does) {
        static const char *const invalid[] = { "", "\n", "zz", "1 2", "5\n\n", "0x", "--1", "+-1", "1\n2" };
        int32_t v = 7;
        for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
                ck_assert_msg(parse_text(invalid[i], &v) == -EINVAL, "\"%s\" was not -EINVAL", invalid[i]);
        static const char *const range[] = { "80000000", "-80000001", "ffffffffffffffffff" };
        for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++)
                ck_assert_msg(parse_text(range[i], &v) == -ERANGE, "\"%s\" was not -ERANGE", range[i]);
        ck_assert_int_eq(v, 7); /* untouched by a refusal */
        /* Only the first 34 bytes are looked at: a longer text is cut there. */
        char long_text[64];
        memset(long_text, '0', sizeof(long_text));
        long_text[33] = '1';
        long_text[34] = 'z'; /* past what the kernel copies */
        ck_assert_int_eq(standin_parse_write(long_text, sizeof(long_text), &v), 0);
        ck_assert_int_eq(v, 1);
}
END_TEST

START_TEST(test_broker_value) {
        ck_assert_int_eq(standin_broker_value(0), 0);
        ck_assert_int_eq(standin_broker_value(50), 50);
        ck_assert_int_eq(standin_broker_value(2000000000), 2000000000);
        ck_assert_int_eq(standin_broker_value(2000000001), -1); /* the kernel's "no constraint" and beyond */
        ck_assert_int_eq(standin_broker_value(INT32_MAX), -1);
        ck_assert_int_eq(standin_broker_value(-1), -1);
        ck_assert_int_eq(standin_broker_value(-5), -1); /* ignored by the kernel: constrains nothing */
        ck_assert_int_eq(standin_broker_value(INT32_MIN), -1);
}
END_TEST

int main(void) {
        Suite *s = suite_create("standin-parse");
        TCase *tc = tcase_create("standin-parse");
        tcase_add_test(tc, test_binary);
        tcase_add_test(tc, test_hex_text);
        tcase_add_test(tc, test_refused_as_the_kernel_does);
        tcase_add_test(tc, test_broker_value);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
