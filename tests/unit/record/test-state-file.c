/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the state file on disk: saves that never write through a
 * planted link, loads that move a damaged file (or a FIFO) aside at once,
 * and the hand-over to pmqosd's user. */

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

static unsigned count_aside(void) {
        DIR *d = opendir(dir);
        struct dirent *de;
        unsigned n = 0;
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                n += strncmp(de->d_name, "state.corrupt-", 14) == 0;
        closedir(d);
        return n;
}

static bool moved_aside(void) {
        DIR *d = opendir(dir);
        struct dirent *de;
        bool found = false;
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                found |= strncmp(de->d_name, "state.corrupt-", 14) == 0;
        closedir(d);
        return found;
}

START_TEST(test_save_never_writes_through_a_link) {
        char victim[400], tmp[400];

        snprintf(victim, sizeof(victim), "%s/victim", dir);
        unit_write_file(dir, "victim", "precious\n");
        snprintf(tmp, sizeof(tmp), "%s/.state.tmp", dir);
        ck_assert_int_eq(symlink(victim, tmp), 0);

        ck_assert_int_eq(state_save(dir, "one\n", 4, true), 0);
        ck_assert_str_eq(unit_read_file(dir, "state"), "one\n");
        ck_assert_str_eq(unit_read_file(dir, "victim"), "precious\n");
        ck_assert_int_eq(access(tmp, F_OK), -1); /* nothing left behind */
        ck_assert_int_eq(state_save(dir, "two\n", 4, false), 0);
        ck_assert_str_eq(unit_read_file(dir, "state"), "two\n");
}
END_TEST

START_TEST(test_load_moves_bad_files_aside) {
        StateData d;

        ck_assert_int_eq(state_load(dir, &d), 0); /* missing: empty */
        ck_assert_uint_eq(d.n_requests, 0);
        state_data_done(&d);

        /* A FIFO must not hang the start: opened without blocking, refused, moved aside. */
        ck_assert_int_eq(mkfifo(state, 0600), 0);
        ck_assert_int_eq(state_load(dir, &d), 0);
        ck_assert(moved_aside());
        ck_assert_int_eq(access(state, F_OK), -1);
        state_data_done(&d);

        /* A second damaged file in the same second keeps the first one aside too. */
        unit_write_file(dir, "state", "not a state file\n");
        ck_assert_int_eq(state_load(dir, &d), 0);
        ck_assert_int_eq(access(state, F_OK), -1);
        ck_assert_int_eq(d.floor, -1);
        ck_assert_uint_eq(count_aside(), 2);
        state_data_done(&d);
}
END_TEST

START_TEST(test_hand_over) {
        char other[400];
        struct stat st;

        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: the hand-over to another user (not root)\n");
                return;
        }
        unit_write_file(dir, "state", "x\n");
        ck_assert_int_eq(state_hand_over(dir, 65534, 65534), 0);
        ck_assert_int_eq(stat(state, &st), 0);
        ck_assert_uint_eq(st.st_uid, 65534);
        ck_assert_int_eq(stat(dir, &st), 0);
        ck_assert_uint_eq(st.st_uid, 65534);

        /* A hard link to somebody else's file is not handed over. */
        ck_assert_int_eq(chown(dir, 0, 0), 0);
        ck_assert_int_eq(unlink(state), 0);
        unit_write_file(dir, "root-file", "secret\n");
        snprintf(other, sizeof(other), "%s/root-file", dir);
        ck_assert_int_eq(link(other, state), 0);
        ck_assert_int_eq(state_hand_over(dir, 65534, 65534), -EMLINK);
        ck_assert_int_eq(stat(other, &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("state-file");
        TCase *tc = tcase_create("state-file");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_save_never_writes_through_a_link);
        tcase_add_test(tc, test_load_moves_bad_files_aside);
        tcase_add_test(tc, test_hand_over);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
