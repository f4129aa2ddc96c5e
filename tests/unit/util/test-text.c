/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of text cleaning: what reaches the bus and terminals is valid
 * UTF-8 without control characters, cut at a character, never longer than
 * asked. */

#include <stdlib.h>
#include <string.h>

#include "util/text.h"
#include "unit.h"

static void check_clean(const char *in, size_t len, size_t max, const char *expect) {
        char *out = text_clean(in, len, max);
        ck_assert_ptr_nonnull(out);
        ck_assert_str_eq(out, expect);
        ck_assert_uint_le(strlen(out), max < 8 ? 8 : max);
        ck_assert(utf8_is_valid(out, strlen(out)));
        free(out);
}

START_TEST(test_utf8_validity) {
        static const struct {
                const char *s;
                bool valid;
        } cases[] = {
                { "", true },
                { "plain ascii", true },
                { "\xc3\xa9t\xc3\xa9", true }, /* été */
                { "\xe2\x80\xa6", true },      /* … */
                { "\xf0\x9f\x8e\xb5", true },  /* a 4-byte character */
                { "\xff", false },             /* never in UTF-8 */
                { "\xc3", false },             /* cut short */
                { "\xc0\xaf", false },         /* overlong "/" */
                { "\xe0\x80\xaf", false },     /* overlong, 3 bytes */
                { "\xed\xa0\x80", false },     /* a surrogate */
                { "\xf4\x90\x80\x80", false }, /* beyond U+10FFFF */
                { "\xc3\xa9\x80", false },     /* a stray continuation byte */
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                ck_assert_msg(utf8_is_valid(cases[i].s, strlen(cases[i].s)) == cases[i].valid, "case %zu", i);
}
END_TEST

START_TEST(test_escapes) {
        check_clean("busctl call", 11, 100, "busctl call");
        check_clean("\xff", 1, 100, "\\xff");
        check_clean("a\x1b[2Jb", 6, 100, "a\\x1b[2Jb");
        check_clean("\x07\x7f", 2, 100, "\\x07\\x7f");
        check_clean("\xc2\x85\xc2\x9b", 4, 100, "\\xc2\\x85\\xc2\\x9b"); /* C1 controls */
        check_clean("\xc2\xa0", 2, 100, "\xc2\xa0");                     /* U+00A0 is printable */
        check_clean("a\0b", 3, 100, "a\\x00b");
        check_clean("back\\slash", 10, 100, "back\\slash");
        check_clean("\xed\xa0\x80", 3, 100, "\\xed\\xa0\\x80");
        /* Cleaning is idempotent on what it produced. */
        char *once = text_clean("\xff\x1b x", 4, 100);
        check_clean(once, strlen(once), 100, once);
        free(once);
}
END_TEST

START_TEST(test_cut_at_a_character) {
        char in[64];
        memset(in, 0, sizeof(in));
        for (int i = 0; i < 20; i++)
                memcpy(in + 2 * i, "\xc3\xa9", 2); /* 20 × é, 40 bytes */
        /* max 10: 3 é (6 bytes) and "…" (3 bytes); never half an é. */
        check_clean(in, 40, 10, "\xc3\xa9\xc3\xa9\xc3\xa9\xe2\x80\xa6");
        check_clean(in, 40, 11, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xe2\x80\xa6");
        /* Exactly max: no cut. */
        check_clean(in, 8, 8, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
        /* An escape is never cut in half either, and a cut text ends in "…". */
        check_clean("abcd\xff\xff", 6, 9, "abcd\xe2\x80\xa6");
        check_clean("abcd\xff", 5, 8, "abcd\\xff");
        check_clean("abcde\xff\x01", 7, 9, "abcde\xe2\x80\xa6");
        /* A max below 8 is taken as 8. */
        check_clean("0123456789", 10, 2, "01234\xe2\x80\xa6");
}
END_TEST

int main(void) {
        Suite *s = suite_create("text");
        TCase *tc = tcase_create("text");
        tcase_add_test(tc, test_utf8_validity);
        tcase_add_test(tc, test_escapes);
        tcase_add_test(tc, test_cut_at_a_character);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
