/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The external-holder scan and its helper process. The helper takes no input
 * but a byte that means "scan now", so the capabilities it keeps serve one
 * fixed question and nothing a client sends reaches them. */

#include "sys/holders.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/kcmp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"

int holder_target_init(HolderTarget *target, int fd, const char *path) {
        *target = (HolderTarget){};
        if (fstat(fd, &target->st) < 0)
                return -errno;
        const char *slash = strrchr(path, '/');
        snprintf(target->basename, sizeof(target->basename), "%s", slash ? slash + 1 : path);
        target->owner = getpid();
        target->owner_fd = fd;
        return 0;
}

/* Where descriptor name of the directory dir leads, as statx() says without
 * asking the file system (AT_STATX_DONT_SYNC): a FUSE or NFS file of the
 * same name, whose server could take forever to answer, costs nothing. */
static bool leads_to(int dir, const char *name, const struct stat *target) {
        struct statx stx;
        if (statx(dir, name, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) < 0)
                return false;
        if (S_ISCHR(stx.stx_mode) || S_ISCHR(target->st_mode))
                return S_ISCHR(stx.stx_mode) && S_ISCHR(target->st_mode) &&
                       makedev(stx.stx_rdev_major, stx.stx_rdev_minor) == target->st_rdev;
        return makedev(stx.stx_dev_major, stx.stx_dev_minor) == target->st_dev && stx.stx_ino == target->st_ino;
}

/* Whether the link text names a file called target->basename. */
static bool link_matches(const char *link, const HolderTarget *target) {
        const char *slash = strrchr(link, '/');
        return slash && strcmp(slash + 1, target->basename) == 0;
}

/* Whether descriptor fd of pid is the very open file pmqosd holds. */
static bool is_owners(const HolderTarget *target, unsigned long pid, const char *fd) {
        return target->owner > 0 &&
               syscall(SYS_kcmp, target->owner, (pid_t) pid, KCMP_FILE, target->owner_fd, atoi(fd)) == 0;
}

/* Whether descriptor fd of pid was opened for reading or writing: an O_PATH
 * one (anyone may open the device so, without permission) holds no request.
 * Unreadable fdinfo counts as a holder, as before the check. */
static bool opened_for_io(int proc_fd, const char *pid, const char *fd) {
        char path[600], buf[256];
        snprintf(path, sizeof(path), "%s/fdinfo/%s", pid, fd);
        int info = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        if (info < 0)
                return true;
        ssize_t n = read(info, buf, sizeof(buf) - 1);
        close(info);
        if (n <= 0)
                return true;
        buf[n] = 0;
        const char *flags = strstr(buf, "flags:");
        if (!flags)
                return true;
        unsigned long v = strtoul(flags + strlen("flags:"), NULL, 8);
        return !(v & O_PATH);
}

/* 1 if process pid holds target, 0 if not, -EACCES if its descriptors are hidden from us. */
static int scan_process(int proc_fd, const char *pid, const HolderTarget *target, unsigned *budget) {
        char path[64];
        snprintf(path, sizeof(path), "%s/fd", pid);
        int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -EACCES; /* gone meanwhile, or not ours to see */
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return 0;
        }
        int found = 0;
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (*budget == 0) {
                        found = -E2BIG;
                        break;
                }
                (*budget)--;
                char link[512];
                ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
                if (n <= 0)
                        continue;
                link[n] = 0;
                if (link_matches(link, target) && leads_to(dirfd(d), de->d_name, &target->st) &&
                    opened_for_io(proc_fd, pid, de->d_name) && !is_owners(target, strtoul(pid, NULL, 10), de->d_name))
                        found = 1;
        }
        closedir(d);
        return found;
}

void holders_scan(int proc_fd, const HolderTarget *target, const pid_t *skip, size_t n_skip, HolderScan *ret) {
        *ret = (HolderScan){ .complete = true };
        int fd = openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                ret->complete = false;
                return;
        }
        unsigned budget = HOLDERS_SCAN_FDS_MAX;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                unsigned long pid = strtoul(de->d_name, &end, 10);
                if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end || pid > INT32_MAX)
                        continue;
                bool skipped = false;
                for (size_t i = 0; i < n_skip; i++)
                        skipped |= (unsigned long) skip[i] == pid;
                if (skipped)
                        continue;
                int r = scan_process(proc_fd, de->d_name, target, &budget);
                if (r == -E2BIG) {
                        ret->complete = false;
                        break;
                }
                if (r < 0)
                        ret->complete = false;
                else if (r > 0) {
                        if (ret->n == HOLDERS_MAX) {
                                ret->complete = false;
                                break;
                        }
                        ret->pids[ret->n++] = (uint32_t) pid;
                }
        }
        closedir(d);
}

size_t holders_encode(const HolderScan *scan, uint8_t buf[HOLDERS_WIRE_MAX]) {
        uint32_t head[2] = { scan->n, scan->complete };
        memcpy(buf, head, sizeof(head));
        memcpy(buf + sizeof(head), scan->pids, scan->n * sizeof(uint32_t));
        return sizeof(head) + scan->n * sizeof(uint32_t);
}

int holders_decode(const uint8_t *buf, size_t len, HolderScan *ret) {
        uint32_t head[2];
        *ret = (HolderScan){};
        if (len < sizeof(head))
                return -EBADMSG;
        memcpy(head, buf, sizeof(head));
        if (head[0] > HOLDERS_MAX || head[1] > 1 || len != sizeof(head) + head[0] * sizeof(uint32_t))
                return -EBADMSG;
        ret->n = head[0];
        ret->complete = head[1];
        memcpy(ret->pids, buf + sizeof(head), ret->n * sizeof(uint32_t));
        for (uint32_t i = 0; i < ret->n; i++)
                if (ret->pids[i] == 0 || ret->pids[i] > INT32_MAX)
                        return -EBADMSG;
        return 0;
}

/* Keeps CAP_SYS_PTRACE (to read where another user's descriptor leads) and
 * CAP_DAC_READ_SEARCH (to open another user's /proc/PID/fd), nothing else,
 * and becomes uid. Without root, the calls fail and the helper scans with
 * what it has: its reports then say "incomplete". */
static void helper_drop_privileges(uid_t uid, gid_t gid) {
        const unsigned long keep = (1ul << CAP_SYS_PTRACE) | (1ul << CAP_DAC_READ_SEARCH);
        if (geteuid() != 0)
                return;
        for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
                if (!(keep & (1ul << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
                        break;
        if (uid != (uid_t) -1) {
                if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
                    setresuid(uid, uid, uid) < 0) {
                        log_error_errno(errno, "The holder scan helper cannot switch users: %m; it ends.");
                        _exit(1);
                }
        }
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = { { .effective = (uint32_t) keep, .permitted = (uint32_t) keep } };
        if (syscall(SYS_capset, &header, data) < 0)
                log_warning_errno(
                        errno,
                        "The holder scan helper cannot keep its capabilities (%m); it sees only what user %u may.",
                        (unsigned) getuid());
        (void) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static _Noreturn void helper_run(int sock, const HolderTarget *target, pid_t parent, uid_t uid, gid_t gid) {
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
                _exit(0);
        (void) prctl(PR_SET_NAME, "pmqosd-holders", 0, 0, 0);
        if (dup2(sock, 3) < 0)
                _exit(1);
        if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
                for (int fd = 4; fd < 1024; fd++)
                        close(fd);
        helper_drop_privileges(uid, gid);

        int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const pid_t skip[] = { parent, getpid() };
        for (;;) {
                char byte;
                ssize_t n = recv(3, &byte, 1, 0);
                if (n == 0 || (n < 0 && errno != EINTR))
                        _exit(0); /* pmqosd closed its end: it is going */
                if (n < 0)
                        continue;
                HolderScan scan = { .complete = false };
                if (proc_fd >= 0)
                        holders_scan(proc_fd, target, skip, 2, &scan);
                uint8_t buf[HOLDERS_WIRE_MAX];
                size_t len = holders_encode(&scan, buf);
                if (send(3, buf, len, MSG_NOSIGNAL) < 0)
                        _exit(0);
        }
}

int holders_helper_start(const HolderTarget *target, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_fd) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0) {
                close(sv[0]);
                helper_run(sv[1], target, parent, uid, gid);
        }
        close(sv[1]);
        *ret_pid = pid;
        *ret_fd = sv[0];
        return 0;
}
