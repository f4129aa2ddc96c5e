/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the log: lines cut at a character, the rate limit on lines
 * a caller can cause (a flood gives LOG_CALLER_BURST lines, then one line
 * counting what was suppressed), log_*_errno()'s "%m", and batched lines
 * (written at log_flush() or when the batch is full, in order with the
 * thread's other lines). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/text.h"
#include "unit.h"

static void long_line(void) {
        char text[5001];
        for (size_t i = 0; i + 2 <= 5000; i += 2)
                memcpy(text + i, "\xc3\xa9", 2); /* "é": two bytes, so the cut can land inside one */
        text[5000] = 0;
        log_info("xy%s", text); /* an odd number of bytes before the cut at 2047 */
}

START_TEST(test_long_line_cut_at_a_character) {
        char *out = unit_capture_stderr(long_line);
        size_t len = strlen(out);
        ck_assert_uint_gt(len, 1000);
        ck_assert_uint_lt(len, 2100);
        ck_assert(utf8_is_valid(out, len)); /* was cut inside "é" at 1023 bytes */
        free(out);
}
END_TEST

static void long_text(void) {
        char text[5001] = "x";
        for (size_t i = 1; i + 2 <= 5000; i += 2)
                memcpy(text + i, "\xc3\xa9", 2);
        text[4999] = 0;
        log_text(6, text); /* "pmqosd: " and "x": the cut at 2047 lands inside an "é" */
        log_text(7, "not verbose: not written");
}

START_TEST(test_text_cut_at_a_character) {
        char *out = unit_capture_stderr(long_text);
        size_t len = strlen(out);
        ck_assert_uint_gt(len, 2000);
        ck_assert_uint_lt(len, 2100);
        ck_assert(utf8_is_valid(out, len));
        ck_assert_ptr_null(strstr(out, "not verbose"));
        ck_assert_ptr_nonnull(strstr(out, "pmqosd: x\xc3\xa9"));
        free(out);
}
END_TEST

static void flood(void) {
        for (int i = 0; i < 1000; i++)
                log_caller_warning("caller %d failed", i);
}

static void next_window(void) {
        log_caller_age(LOG_CALLER_INTERVAL_SEC);
        log_caller_warning("caller after the flood");
}

START_TEST(test_flood_is_cut) {
        char *out = unit_capture_stderr(flood);
        ck_assert_uint_eq(unit_count(out, "\n"), LOG_CALLER_BURST);
        ck_assert_uint_eq(unit_count(out, "caller 0 failed"), 1);
        ck_assert_uint_eq(unit_count(out, "caller 20 failed"), 0);
        free(out);

        /* The next window says how many went unsaid, then logs again. */
        out = unit_capture_stderr(next_window);
        ck_assert_uint_eq(unit_count(out, "Suppressed 980 similar messages"), 1);
        ck_assert_uint_eq(unit_count(out, "caller after the flood"), 1);
        ck_assert_uint_eq(unit_count(out, "\n"), 2);
        free(out);
}
END_TEST

static int errno_results[3];
static int errno_after;

static void errno_lines(void) {
        errno = EINTR;
        errno_results[0] = log_error_errno(-ENOENT, "Cannot open %s: %m", "/x");
        errno_results[1] = log_warning_errno(EACCES, "Cannot write: %m; going on.");
        errno_results[2] = log_caller_warning_errno(-EBADMSG, "caller %d: %m", 7);
        errno_after = errno;
}

START_TEST(test_errno_spelled_out) {
        char *out = unit_capture_stderr(errno_lines);
        ck_assert_uint_eq(unit_count(out, "Cannot open /x: No such file or directory\n"), 1);
        ck_assert_uint_eq(unit_count(out, "Cannot write: Permission denied; going on.\n"), 1);
        ck_assert_uint_eq(unit_count(out, "caller 7: Bad message\n"), 1);
        free(out);
        /* A negative errno either way, to fail with; errno itself left alone. */
        ck_assert_int_eq(errno_results[0], -ENOENT);
        ck_assert_int_eq(errno_results[1], -EACCES);
        ck_assert_int_eq(errno_results[2], -EBADMSG);
        ck_assert_int_eq(errno_after, EINTR);
}
END_TEST

static unsigned batches;
static off_t batch_written;

static void begun(void *userdata) {
        (void) userdata;
        batches++;
}

static void batched(void) {
        log_set_batch_notify(begun, NULL);
        log_text_batched(6, "one");
        log_text_batched(6, "two");
        batch_written = lseek(STDERR_FILENO, 0, SEEK_CUR); /* nothing yet */
        log_info("three");                                 /* the batch first: its lines came first */
        log_text_batched(6, "four");
        log_flush();
        char line[1001];
        memset(line, 'x', sizeof(line) - 1);
        line[sizeof(line) - 1] = 0;
        for (int i = 0; i < 9; i++) /* 1,009 bytes each: 4 fit in LOG_BATCH_MAX */
                log_text_batched(6, line);
        log_set_batch_notify(NULL, NULL);
        log_flush();
        log_text_batched(6, "unbatched");
}

START_TEST(test_batched_lines_in_order) {
        batches = 0;
        char *out = unit_capture_stderr(batched);
        ck_assert_int_eq(batch_written, 0);
        ck_assert_ptr_nonnull(strstr(out, "pmqosd: one\npmqosd: two\npmqosd: three\npmqosd: four\n"));
        ck_assert_uint_eq(unit_count(out, "xxxxxxxxxx\n"), 9);
        ck_assert_ptr_nonnull(strstr(out, "pmqosd: unbatched\n"));
        /* "one", "four", and the long lines in batches of 4, 4 and 1. */
        ck_assert_uint_eq(batches, 5);
        free(out);
}
END_TEST

int main(void) {
        Suite *s = suite_create("log");
        TCase *tc = tcase_create("log");
        tcase_add_test(tc, test_flood_is_cut);
        tcase_add_test(tc, test_long_line_cut_at_a_character);
        tcase_add_test(tc, test_text_cut_at_a_character);
        tcase_add_test(tc, test_errno_spelled_out);
        tcase_add_test(tc, test_batched_lines_in_order);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_NOFORK);
}
