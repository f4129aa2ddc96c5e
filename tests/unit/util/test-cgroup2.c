/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of util/cgroup2: a /proc/PID/cgroup text's cgroup2 path, less
 * the levels a thread was found below; and, where this runs as root on a
 * writable cgroup2 hierarchy, a cgroup found again by its threads through
 * this namespace's own mount. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cgroup2.h"
#include "unit.h"

static int path_of(const char *text, unsigned up, char *buf, size_t size) {
        return cgroup2_path_from_proc(text, strlen(text), up, buf, size);
}

START_TEST(test_path_from_proc) {
        char buf[64];
        const char *v1 = "12:pids:/user.slice\n1:name=systemd:/x\n0::/user.slice/app/scope\n";

        ck_assert_int_eq(path_of(v1, 0, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/user.slice/app/scope");
        ck_assert_int_eq(path_of(v1, 1, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/user.slice/app");
        ck_assert_int_eq(path_of(v1, 3, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/");
        ck_assert_int_eq(path_of(v1, 4, buf, sizeof(buf)), -ENOENT); /* above the root */
        ck_assert_int_eq(path_of("0::/\n", 0, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/");
        ck_assert_int_eq(path_of("0::/a", 0, buf, sizeof(buf)), 0); /* no final newline */
        ck_assert_str_eq(buf, "/a");
        /* Outside this cgroup namespace, a v1 line alone, nothing. */
        ck_assert_int_eq(path_of("0::/../../other\n", 0, buf, sizeof(buf)), -ENOENT);
        ck_assert_int_eq(path_of("0::/..\n", 0, buf, sizeof(buf)), -ENOENT);
        ck_assert_int_eq(path_of("0::/..x\n", 0, buf, sizeof(buf)), 0);
        ck_assert_int_eq(path_of("1:name=systemd:/x\n", 0, buf, sizeof(buf)), -ENOENT);
        ck_assert_int_eq(path_of("", 0, buf, sizeof(buf)), -ENOENT);
        ck_assert_int_eq(path_of("0::/a/b/c\n", 0, buf, 6), -ENAMETOOLONG);
        ck_assert_int_eq(path_of("0::/a/b/c\n", 1, buf, 6), 0);
        ck_assert_str_eq(buf, "/a/b");
}
END_TEST

/* A cgroup made for the test at the first writable cgroup2 mount, or NULL. */
static const char *make_cgroup(char *path, size_t size, const char *below) {
        static const char *roots[] = { "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };
        struct stat st;
        for (size_t i = 0; !below && i < 2; i++) {
                char procs[128];
                snprintf(procs, sizeof(procs), "%s/cgroup.procs", roots[i]);
                if (geteuid() == 0 && stat(procs, &st) == 0)
                        below = roots[i];
        }
        if (!below)
                return NULL;
        snprintf(path, size, "%s/pmqos-unit-%d-%zu", below, (int) getpid(), strlen(below));
        return mkdir(path, 0755) == 0 ? path : NULL;
}

START_TEST(test_reopen_here) {
        char top[256], sub[512], procs[600];
        struct stat st, own;

        if (!make_cgroup(top, sizeof(top), NULL)) {
                printf("SKIP: cgroup2_reopen_here on a real cgroup: not root, or no cgroup2 hierarchy\n");
                return;
        }
        ck_assert_ptr_nonnull(make_cgroup(sub, sizeof(sub), top));
        int dir = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir, 0);
        ck_assert_int_eq(fstat(dir, &st), 0);
        ck_assert_int_eq(cgroup2_reopen_here(dir, st.st_ino), -ECHILD); /* no thread in it */

        pid_t child = fork();
        if (child == 0) {
                pause();
                _exit(0);
        }
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", sub);
        FILE *f = fopen(procs, "we");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "%d", (int) child);
        ck_assert_int_eq(fclose(f), 0);
        /* Found by a thread one level below, checked by its id. */
        int fd = cgroup2_reopen_here(dir, st.st_ino);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &own), 0);
        ck_assert_uint_eq(own.st_ino, st.st_ino);
        close(fd);
        ck_assert_int_eq(cgroup2_reopen_here(dir, st.st_ino + 1), -EREMOTE); /* another id: never that one */
        fd = cgroup2_open_full(top);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(cgroup2_open_full("/proc/self"), -1); /* below no cgroup2 mount */

        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        close(dir);
        while (rmdir(sub) < 0 && errno == EBUSY)
                usleep(1000);
        ck_assert_int_eq(rmdir(top), 0);
}
END_TEST

/* A file system mounted over a cgroup below, in a mount namespace of the
 * caller's (a tmpfs here, with a cgroup.threads naming a thread): never
 * entered (a FUSE server there may never answer). */
START_TEST(test_mount_below_not_entered) {
        char top[256], sub[512], threads[600];
        struct stat st;

        if (!make_cgroup(top, sizeof(top), NULL)) {
                printf("SKIP: a mount below a cgroup: not root, or no cgroup2 hierarchy\n");
                return;
        }
        ck_assert_ptr_nonnull(make_cgroup(sub, sizeof(sub), top));
        pid_t child = fork();
        if (child == 0) {
                if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
                    mount("tmpfs", sub, "tmpfs", 0, NULL) < 0)
                        _exit(2);
                snprintf(threads, sizeof(threads), "%s/cgroup.threads", sub);
                FILE *f = fopen(threads, "we");
                if (!f)
                        _exit(3);
                fprintf(f, "%d\n", (int) getpid());
                fclose(f);
                int dir = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dir < 0 || fstat(dir, &st) < 0)
                        _exit(4);
                _exit(cgroup2_reopen_here(dir, st.st_ino) == -ECHILD ? 0 : 5);
        }
        int status;
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert_int_eq(rmdir(sub), 0);
        ck_assert_int_eq(rmdir(top), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("cgroup2");
        TCase *tc = tcase_create("cgroup2");
        tcase_add_test(tc, test_path_from_proc);
        tcase_add_test(tc, test_reopen_here);
        tcase_add_test(tc, test_mount_below_not_entered);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
