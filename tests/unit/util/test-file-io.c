/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the whole-file reads and complete writes: a file read back
 * with room for one byte more, refused when too large, when it is a FIFO
 * (without hanging) or a symlink; a small /proc-like file in one read, cut
 * to the buffer; and pwrite_all() at an offset. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "util/file-io.h"

START_TEST(test_read_file_bounded) {
        const char *dir = unit_make_dir("file-io");
        char path[512], link[512], fifo[512];
        char *buf;
        size_t len;

        unit_write_file(dir, "f", "hello\n");
        snprintf(path, sizeof(path), "%s/f", dir);
        ck_assert_int_eq(read_file_bounded(path, 6, &buf, &len), 0);
        ck_assert_uint_eq(len, 6);
        buf[len] = 0; /* the byte more */
        ck_assert_str_eq(buf, "hello\n");
        free(buf);
        ck_assert_int_eq(read_file_bounded(path, 5, &buf, &len), -EFBIG);

        snprintf(link, sizeof(link), "%s/l", dir);
        ck_assert_int_eq(symlink(path, link), 0);
        ck_assert_int_eq(read_file_bounded(link, 100, &buf, &len), -EBADMSG);
        snprintf(fifo, sizeof(fifo), "%s/p", dir);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        ck_assert_int_eq(read_file_bounded(fifo, 100, &buf, &len), -EBADMSG);
        snprintf(path, sizeof(path), "%s/missing", dir);
        ck_assert_int_eq(read_file_bounded(path, 100, &buf, &len), -ENOENT);
        unit_remove_dir(dir);
}
END_TEST

START_TEST(test_read_small_at) {
        const char *dir = unit_make_dir("file-io");
        char buf[8];
        unit_write_file(dir, "status", "Tgid:\t42\n");
        int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(d, 0);
        ck_assert_int_eq(read_small_at(d, "status", buf, sizeof(buf)), 7); /* size - 1 at most */
        ck_assert_str_eq(buf, "Tgid:\t4");
        char whole[64];
        ck_assert_int_eq(read_small_at(d, "status", whole, sizeof(whole)), 9);
        ck_assert_str_eq(whole, "Tgid:\t42\n"); /* as read: the caller trims */
        ck_assert_int_eq(read_small_at(d, "absent", buf, sizeof(buf)), -ENOENT);
        ck_assert_int_eq(read_small_at(d, ".", buf, sizeof(buf)), -EISDIR);
        close(d);
        unit_remove_dir(dir);
}
END_TEST

START_TEST(test_pwrite_all) {
        const char *dir = unit_make_dir("file-io");
        char path[512];
        snprintf(path, sizeof(path), "%s/w", dir);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite_all(fd, "abcdef", 6, 0), 0);
        ck_assert_int_eq(pwrite_all(fd, "XY", 2, 2), 0);
        close(fd);
        ck_assert_str_eq(unit_read_file(dir, "w"), "abXYef");
        ck_assert_int_eq(pwrite_all(-1, "a", 1, 0), -EBADF);
        unit_remove_dir(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("file-io");
        TCase *tc = tcase_create("file-io");
        tcase_add_test(tc, test_read_file_bounded);
        tcase_add_test(tc, test_read_small_at);
        tcase_add_test(tc, test_pwrite_all);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
