/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the key-file lines both pmqosd.conf and the unit rules are
 * read through: comments and blanks skipped, line numbers kept, "Key =
 * Value" split and stripped, files too large or with a NUL refused. */

#include <errno.h>
#include <string.h>

#include "util/key-file.h"
#include "unit.h"

START_TEST(test_lines) {
        static const char text[] = "# comment\n\n  [pmqosd]  \r\n; another\n\tKey = a value \r\nLast=1";
        char err[128];
        KeyFile f;
        ck_assert_int_eq(key_file_open(&f, "x.conf", text, strlen(text), 1024, err, sizeof(err)), 0);

        char *l = key_file_next(&f), *key, *value;
        ck_assert_str_eq(l, "[pmqosd]");
        ck_assert_uint_eq(f.lineno, 3);
        l = key_file_next(&f);
        ck_assert_uint_eq(f.lineno, 5);
        ck_assert_int_eq(key_file_split(l, &key, &value), 0);
        ck_assert_str_eq(key, "Key");
        ck_assert_str_eq(value, "a value");
        l = key_file_next(&f);
        ck_assert_str_eq(l, "Last=1"); /* no newline at the end: still a line */
        ck_assert_uint_eq(f.lineno, 6);
        ck_assert_ptr_null(key_file_next(&f));
        char plain[] = "no equals sign";
        ck_assert_int_eq(key_file_split(plain, &key, &value), -EINVAL);
        key_file_done(&f);
}
END_TEST

START_TEST(test_refused) {
        char err[128];
        KeyFile f;
        ck_assert_int_eq(key_file_open(&f, "big.conf", "A=1\n", 4, 3, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "big.conf: file is larger than"));
        key_file_done(&f);
        ck_assert_int_eq(key_file_open(&f, "nul.conf", "A=1\0B=2\n", 8, 1024, err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "nul.conf: file contains a NUL byte");
        key_file_done(&f);
}
END_TEST

int main(void) {
        Suite *s = suite_create("key-file");
        TCase *tc = tcase_create("key-file");
        tcase_add_test(tc, test_lines);
        tcase_add_test(tc, test_refused);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
