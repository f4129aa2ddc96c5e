/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the text buffer: numbers without printf (INT64_MIN too),
 * percent-encoding that keeps any string on one line and comes back whole,
 * and the refusals of a malformed escape. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "util/text-buffer.h"

START_TEST(test_numbers) {
        TextBuffer b = {};
        text_append_uint(&b, 0);
        text_append(&b, " ");
        text_append_uint(&b, UINT64_MAX);
        text_append(&b, " ");
        text_append_int(&b, INT64_MIN);
        text_append(&b, " ");
        text_append_int(&b, -1);
        text_printf(&b, " %s=%d", "x", 42);
        ck_assert(!b.oom);
        ck_assert_str_eq(b.data, "0 18446744073709551615 -9223372036854775808 -1 x=42");
        ck_assert_uint_eq(b.len, strlen(b.data));
        free(b.data);
}
END_TEST

START_TEST(test_escape_round_trip) {
        static const char *const texts[] = { "", "plain", "a b=c%d\n\t", "\x01\x7f\xc3\xa9 end" };
        for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
                TextBuffer b = {};
                text_append_escaped(&b, texts[i]);
                ck_assert(!b.oom);
                /* One field of a line: no space, newline, '=' or '%' of its own. */
                ck_assert_ptr_null(strpbrk(b.data, " \n\t="));
                ck_assert_int_eq(text_unescape(b.data), 0);
                ck_assert_str_eq(b.data, texts[i]);
                free(b.data);
        }
        TextBuffer b = {};
        text_append_escaped(&b, "a b");
        ck_assert_str_eq(b.data, "a%20b");
        free(b.data);
}
END_TEST

START_TEST(test_unescape_refusals) {
        char bad1[] = "%", bad2[] = "%4", bad3[] = "%zz", nul[] = "a%00b", ok[] = "%41%62";
        ck_assert_int_eq(text_unescape(bad1), -EINVAL);
        ck_assert_int_eq(text_unescape(bad2), -EINVAL);
        ck_assert_int_eq(text_unescape(bad3), -EINVAL);
        ck_assert_int_eq(text_unescape(nul), -EINVAL); /* a NUL would cut the string */
        ck_assert_int_eq(text_unescape(ok), 0);
        ck_assert_str_eq(ok, "Ab");
}
END_TEST

int main(void) {
        Suite *s = suite_create("text-buffer");
        TCase *tc = tcase_create("text-buffer");
        tcase_add_test(tc, test_numbers);
        tcase_add_test(tc, test_escape_round_trip);
        tcase_add_test(tc, test_unescape_refusals);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
