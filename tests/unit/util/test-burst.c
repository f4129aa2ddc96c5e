/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of util/burst.c on a fake clock: more than BURST_LIMIT acts
 * within the window are over it, fewer or slower ones are not, another
 * source starts afresh, and being over it ends when the window has passed. */

#include "util/burst.h"
#include "unit.h"

#define WINDOW 10000

START_TEST(test_the_fourth_in_the_window_is_over) {
        Burst b = {};
        ck_assert(!burst_note(&b, 7, 0, WINDOW));
        ck_assert(!burst_note(&b, 7, 1000, WINDOW));
        ck_assert(!burst_note(&b, 7, 2000, WINDOW));
        ck_assert(burst_note(&b, 7, 9999, WINDOW)); /* 4 in under 10 s */
        ck_assert(burst_over(&b, 7, 9999, WINDOW));
        ck_assert(burst_note(&b, 7, 10500, WINDOW));  /* the last 4: 1000 … 10500 */
        ck_assert(!burst_over(&b, 7, 11000, WINDOW)); /* 1000 is 10 s ago */
        ck_assert(!burst_over(&b, 8, 10500, WINDOW)); /* another source is not */
}
END_TEST

START_TEST(test_slow_acts_never_are) {
        Burst b = {};
        for (int64_t t = 0; t < 100000; t += WINDOW / 3 + 1)
                ck_assert(!burst_note(&b, 1, t, WINDOW));
}
END_TEST

START_TEST(test_another_source_starts_afresh) {
        Burst b = {};
        for (int i = 0; i < 3; i++)
                ck_assert(!burst_note(&b, 1, i, WINDOW));
        ck_assert(!burst_note(&b, 2, 3, WINDOW)); /* would be the 4th of source 1 */
        ck_assert(!burst_note(&b, 2, 4, WINDOW));
        ck_assert(!burst_note(&b, 2, 5, WINDOW));
        ck_assert(burst_note(&b, 2, 6, WINDOW));
}
END_TEST

int main(void) {
        Suite *s = suite_create("burst");
        TCase *tc = tcase_create("burst");
        tcase_add_test(tc, test_the_fourth_in_the_window_is_over);
        tcase_add_test(tc, test_slow_acts_never_are);
        tcase_add_test(tc, test_another_source_starts_afresh);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
