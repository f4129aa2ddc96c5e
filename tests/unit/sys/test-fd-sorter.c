/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the sorter: it takes the descriptors riding on a socket's
 * bytes without consuming them, hands back a pidfd (or a cgroup2
 * directory) and keeps a regular file (saying what it is), and a retired
 * sorter is reaped. */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/fd-sorter.h"
#include "unit.h"

static void send_with_fds(int sock, const char *text, const int *fds, size_t n) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) text, .iov_len = strlen(text) };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = CMSG_SPACE(sizeof(int) * n)
        };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        *c = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(int) * n),
                               .cmsg_level = SOL_SOCKET,
                               .cmsg_type = SCM_RIGHTS };
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        ck_assert_int_eq(sendmsg(sock, &mh, 0), (ssize_t) strlen(text));
}

/* The first cgroup2 mount's directory. */
static int open_cgroup2(void) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[1024], dir[512];
        int fd = -1;
        while (fd < 0 && f && fgets(line, sizeof(line), f))
                if (strstr(line, " - cgroup2 ") && sscanf(line, "%*s %*s %*s %*s %511s", dir) == 1)
                        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f)
                fclose(f);
        return fd;
}

START_TEST(test_sort) {
        int pair[2], fds[FD_SORTER_BATCH];
        char kinds[FD_SORTER_BATCH], buf[16] = "";
        size_t peeked = 0, count = 0;
        FdSorter s;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        /* A pidfd, or (valgrind knows no pidfd_open) cgroup2's root: both safe. */
        int pidfd = (int) syscall(SYS_pidfd_open, getpid(), 0);
        if (pidfd < 0)
                pidfd = open_cgroup2();
        int file = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(pidfd, 0);
        ck_assert_int_ge(file, 0);
        ck_assert_int_eq(write(pair[0], "head", 4), 4); /* bytes without descriptors first */
        send_with_fds(pair[0], "body", (int[]){ pidfd, file }, 2);
        ck_assert_int_eq(fd_sorter_start(&s), 0);
        ck_assert_int_eq(fd_sorter_take(&s, pair[1], 64, &peeked, fds, kinds, &count), 0);
        ck_assert_uint_eq(peeked, 8); /* the peek ends after the write with descriptors */
        ck_assert_uint_eq(count, 2);
        ck_assert_int_ge(fds[0], 0); /* the pidfd, a copy here */
        ck_assert_int_eq(fds[1], -1);
        ck_assert_int_eq(kinds[1], 'f');
        ck_assert_uint_eq(s.kept, 1);
        /* The bytes stay for the reader, descriptors and all. */
        ck_assert_int_eq(read(pair[1], buf, sizeof(buf)), 8);
        ck_assert_str_eq(buf, "headbody");
        close(fds[0]);
        pid_t pid = fd_sorter_retire(&s);
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
        close(pidfd), close(file), close(pair[0]), close(pair[1]);
}
END_TEST

int main(void) {
        Suite *s = suite_create("fd-sorter");
        TCase *tc = tcase_create("fd-sorter");
        tcase_add_test(tc, test_sort);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
