/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the state directory check: created 0700, refused through
 * a symlink, when writable by others or owned by someone else. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record/durable-file.h"
#include "record/state-file.h"
#include "unit.h"

static char dir[256], state[300];

static void setup(void) {
        snprintf(dir, sizeof(dir), "%s", unit_make_dir("state-file"));
        snprintf(state, sizeof(state), "%s/state", dir);
}

static void teardown(void) {
        unit_remove_dir(dir);
}

START_TEST(test_prepare) {
        char path[400], link[400];
        struct stat st;

        snprintf(path, sizeof(path), "%s/new", dir);
        ck_assert_int_eq(durable_dir_prepare(path, geteuid()), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);

        /* Group- or world-writable, or a symbolic link: refused. */
        ck_assert_int_eq(chmod(path, 0770), 0);
        ck_assert_int_eq(durable_dir_prepare(path, geteuid()), -EPERM);
        ck_assert_int_eq(chmod(path, 0700), 0);
        snprintf(link, sizeof(link), "%s/link", dir);
        ck_assert_int_eq(symlink(path, link), 0);
        ck_assert_int_lt(durable_dir_prepare(link, geteuid()), 0);

        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: a state directory of another owner (not root: cannot chown)\n");
                return;
        }
        ck_assert_int_eq(chown(path, 65534, 65534), 0);
        ck_assert_int_eq(durable_dir_prepare(path, 0), -EPERM);
        ck_assert_int_eq(durable_dir_prepare(path, 65534), 0); /* the --user's own is fine */
}
END_TEST

int main(void) {
        Suite *s = suite_create("durable-file");
        TCase *tc = tcase_create("durable-file");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_prepare);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
