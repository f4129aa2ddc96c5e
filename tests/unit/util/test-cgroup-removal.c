/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of util/cgroup-removal: cgroups whose directories share a parent
 * share its inotify watch, the removal of one directory there sends every
 * one of that parent to its check (and no other), the watch goes with its
 * last one, and those of a watch the kernel drops are checked and watched
 * anew. On a scratch directory: inotify tells a removal on any file system
 * the same way. */

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cgroup-removal.h"
#include "unit.h"

static bool count(RemovalLink *l, void *userdata) {
        (void) l;
        (*(unsigned *) userdata)++;
        return true;
}

static int dir_at(const char *base, const char *name, char *path, size_t size) {
        snprintf(path, size, "%s/%s", base, name);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static bool readable(int fd, int timeout_ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        return poll(&p, 1, timeout_ms) == 1;
}

START_TEST(test_removal) {
        const char *base = unit_make_dir("cgroup-removal");
        char one[512], a[600], b[600], two[512], c[600];
        Removals rs;
        RemovalLink la, lb, lc;
        int new_fd;
        unsigned checked = 0;

        removals_init(&rs);
        int d1 = dir_at(base, "one", one, sizeof(one)), d2 = dir_at(base, "two", two, sizeof(two));
        int fa = dir_at(one, "a", a, sizeof(a)), fb = dir_at(one, "b", b, sizeof(b)),
            fc = dir_at(two, "c", c, sizeof(c));
        ck_assert_int_eq(removal_watch(&rs, &la, fa, &new_fd), 0);
        ck_assert_int_ge(new_fd, 0); /* the first: the caller adds it to its set */
        ck_assert_int_eq(removal_watch(&rs, &lb, fb, &new_fd), 0);
        ck_assert_int_eq(new_fd, -1);
        ck_assert_int_eq(removal_watch(&rs, &lc, fc, &new_fd), 0);
        ck_assert_ptr_eq(la.watch, lb.watch); /* one watch for "one" */
        ck_assert_ptr_ne(la.watch, lc.watch);
        ck_assert_uint_eq(hashmap_size(&rs.watches), 2);

        /* "a" removed: both of "one" checked, not "c". */
        ck_assert_int_eq(rmdir(a), 0);
        ck_assert(readable(rs.inotify_fd, 1000));
        removals_read(&rs, count, &checked);
        ck_assert_uint_eq(checked, 2);

        /* The watch of "one" goes with its last cgroup; a removal there tells nobody. */
        removal_unwatch(&rs, &la);
        ck_assert_uint_eq(hashmap_size(&rs.watches), 2);
        removal_unwatch(&rs, &lb);
        removal_unwatch(&rs, &lb); /* twice: nothing */
        ck_assert_uint_eq(hashmap_size(&rs.watches), 1);
        ck_assert_int_eq(rmdir(b), 0);
        checked = 0;
        removals_read(&rs, count, &checked);
        ck_assert_uint_eq(checked, 0);

        /* "two" itself removed: its watch dropped by the kernel, "c" checked
         * and (its check saying it is there) watched anew, through d1 here. */
        ck_assert_int_eq(rmdir(c), 0);
        close(fc); /* it pins "two" in the dentry cache, which holds back the kernel's drop */
        lc.dir_fd = d1;
        ck_assert_int_eq(rmdir(two), 0);
        close(d2);
        checked = 0;
        while (readable(rs.inotify_fd, 200))
                removals_read(&rs, count, &checked);
        ck_assert_uint_eq(checked, 2); /* the IN_DELETE of "c", the IN_IGNORED of "two" */
        ck_assert_ptr_nonnull(lc.watch);
        ck_assert_uint_eq(hashmap_size(&rs.watches), 1);
        removal_unwatch(&rs, &lc);
        ck_assert_uint_eq(hashmap_size(&rs.watches), 0);

        removals_done(&rs);
        close(fa);
        close(fb);
        close(d1);
        unit_remove_dir(base);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cgroup-removal");
        TCase *tc = tcase_create("cgroup-removal");
        tcase_add_test(tc, test_removal);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
