/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sys/fd-sorter.h"
#include "sys/target.h"
#include "util/macro.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct SorterReply {
        int32_t peeked; /* or -errno */
        uint32_t count;
        char kind[FD_SORTER_BATCH]; /* target_close_kind() */
} SorterReply;

#define FDS_CONTROL CMSG_SPACE(sizeof(int) * FD_SORTER_BATCH)

static void send_reply(int ctl, const SorterReply *reply, const int *safe, size_t n_safe) {
        union {
                struct cmsghdr h;
                uint8_t buf[FDS_CONTROL];
        } control = {};
        struct iovec iov = { .iov_base = (void *) reply, .iov_len = sizeof(*reply) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n_safe > 0) {
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_safe);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                *c = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(int) * n_safe),
                                       .cmsg_level = SOL_SOCKET,
                                       .cmsg_type = SCM_RIGHTS };
                memcpy(CMSG_DATA(c), safe, sizeof(int) * n_safe);
        }
        (void) sendmsg(ctl, &mh, MSG_NOSIGNAL);
}

/* The descriptors of one received control buffer, at most max. */
static size_t control_fds(struct msghdr *mh, int *fds, size_t max) {
        size_t n = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int fd;
                                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                                if (n < max)
                                        fds[n++] = fd;
                        }
                }
        return n;
}

/* One request: a length and the socket; the peek; the reply. What is not
 * safe stays open here, never closed. */
static int serve_one(int ctl) {
        static uint8_t scratch[FD_SORTER_CHUNK];
        union {
                struct cmsghdr h;
                uint8_t buf[FDS_CONTROL];
        } control;
        uint32_t want = 0;
        int sock = -1, fds[FD_SORTER_BATCH], safe[FD_SORTER_BATCH];
        struct iovec iov = { .iov_base = &want, .iov_len = sizeof(want) };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control)
        };

        ssize_t n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
        if (n <= 0)
                return -1;
        if (control_fds(&mh, &sock, 1) != 1)
                return -1;

        SorterReply reply = {};
        iov = (struct iovec){ .iov_base = scratch, .iov_len = MIN((size_t) want, sizeof(scratch)) };
        mh = (struct msghdr){
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control)
        };
        n = recvmsg(sock, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        reply.peeked = n < 0 ? -errno : (int32_t) n;
        close(sock); /* a copy of pmqosd's bus socket: not its last */
        size_t count = n < 0 ? 0 : control_fds(&mh, fds, FD_SORTER_BATCH), n_safe = 0;
        reply.count = (uint32_t) count;
        for (size_t i = 0; i < count; i++) {
                reply.kind[i] = target_close_kind(fds[i]);
                if (reply.kind[i] == 0)
                        safe[n_safe++] = fds[i];
        }
        send_reply(ctl, &reply, safe, n_safe);
        for (size_t i = 0; i < n_safe; i++)
                close(safe[i]);
        return 0;
}

/* Everything but 0-3: close_range(), or one by one where a seccomp filter
 * refuses it (none of pmqosd's own descriptors can wait at close). */
static void close_inherited(void) {
        if (syscall(SYS_close_range, 4U, ~0U, 0U) == 0)
                return;
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        while (d && (e = readdir(d)))
                if (atoi(e->d_name) > 3 && atoi(e->d_name) != dirfd(d))
                        close(atoi(e->d_name));
        if (d)
                closedir(d);
}

int fd_sorter_start(FdSorter *s) {
        int pair[2];
        pid_t parent = getpid();

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(pair[0]), close(pair[1]);
                return r;
        }
        if (pid == 0) {
                /* Everything of pmqosd's closed here is pmqosd's own: safe to close. */
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent || dup2(pair[1], 3) < 0)
                        _exit(1);
                close_inherited();
                (void) prctl(PR_SET_NAME, "pmqosd-sorter");
                while (serve_one(3) == 0)
                        ;
                _exit(0);
        }
        close(pair[1]);
        *s = (FdSorter){ .pid = pid, .ctl = pair[0] };
        return 0;
}

int fd_sorter_take(FdSorter *s, int sock, size_t want, size_t *ret_peeked, int fds[static FD_SORTER_BATCH],
                   char kinds[static FD_SORTER_BATCH], size_t *ret_count) {
        union {
                struct cmsghdr h;
                uint8_t buf[FDS_CONTROL];
        } control = {};
        uint32_t w = (uint32_t) MIN(want, (size_t) FD_SORTER_CHUNK);
        struct iovec iov = { .iov_base = &w, .iov_len = sizeof(w) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control };
        mh.msg_controllen = CMSG_SPACE(sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        *c = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(int)), .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS };
        memcpy(CMSG_DATA(c), &sock, sizeof(int));
        if (sendmsg(s->ctl, &mh, MSG_NOSIGNAL) < 0)
                return -errno;

        /* The sorter asks nothing of those file systems (fdinfo, the inode
         * as cached): it answers at once, or something is wrong with it. */
        struct pollfd p = { .fd = s->ctl, .events = POLLIN };
        int k = poll(&p, 1, FD_SORTER_TIMEOUT_MSEC);
        if (k <= 0)
                return k < 0 ? -errno : -ETIMEDOUT;
        SorterReply reply = {};
        iov = (struct iovec){ .iov_base = &reply, .iov_len = sizeof(reply) };
        mh = (struct msghdr){
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control)
        };
        ssize_t n = recvmsg(s->ctl, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        int safe[FD_SORTER_BATCH];
        size_t n_safe = control_fds(&mh, safe, FD_SORTER_BATCH), used = 0;
        if (n != (ssize_t) sizeof(reply) || reply.count > FD_SORTER_BATCH) {
                for (size_t i = 0; i < n_safe; i++)
                        close(safe[i]);
                return -EPROTO;
        }
        if (reply.peeked < 0)
                return reply.peeked;
        for (size_t i = 0; i < reply.count; i++) {
                fds[i] = reply.kind[i] == 0 && used < n_safe ? safe[used++] : -1;
                kinds[i] = reply.kind[i] == 0 ? 'o' : reply.kind[i];
                s->kept += fds[i] < 0;
        }
        *ret_peeked = (size_t) reply.peeked;
        *ret_count = reply.count;
        return 0;
}

pid_t fd_sorter_retire(FdSorter *s) {
        pid_t pid = s->pid;
        if (pid > 0)
                (void) kill(pid, SIGKILL);
        if (s->ctl >= 0)
                close(s->ctl);
        *s = (FdSorter){ .ctl = -1 };
        return pid;
}

bool fd_sorter_reaped(pid_t pid) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        return r == pid || (r < 0 && errno == ECHILD);
}
