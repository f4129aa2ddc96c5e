/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A pidfd says its pid in /proc/self/fdinfo; that pid's /proc entry is read
 * and the pidfd checked alive afterwards, so a pid reused in between cannot
 * lend its owner. A cgroup is its directory on cgroup2 (told by the
 * device), its owner and inode. Nothing asks the descriptor's own
 * file system, which a user may serve (FUSE) and never answer. */

#include "sys/target.h"
#include "util/file-io.h"
#include "util/cgroup2.h"
#include "util/macro.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

void target_done(Target *t) {
        free(t->path);
        t->path = NULL;
        if (t->kind == TARGET_CGROUP && t->fd >= 0)
                close(t->fd);
        t->fd = -1;
}

/* The value after "key:\t" on its own line, as a signed number. */
static int field_i64(const char *text, const char *key, int64_t *ret) {
        size_t n = strlen(key);
        for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, key, n) == 0 && p[n] == ':') {
                        char *end;
                        errno = 0;
                        long long v = strtoll(p + n + 1, &end, 10);
                        if (errno || end == p + n + 1)
                                return -EBADMSG;
                        *ret = v;
                        return 0;
                }
        return -ENOENT;
}

bool target_alive(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        return poll(&p, 1, 0) == 0;
}

/* /proc/PID/stat's 22nd field; the command in parentheses may hold anything. */
static int read_start_time(int proc_dir, uint64_t *ret) {
        char buf[1024];
        ssize_t n = read_small_at(proc_dir, "stat", buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        const char *p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        /* After ") ": field 3 (state) … field 22 (starttime). */
        for (int field = 2; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EBADMSG;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p + 1, &end, 10);
        if (errno || end == p + 1)
                return -EBADMSG;
        *ret = v;
        return 0;
}

/* uid and start time of pid, read through /proc/PID. */
static int read_process(pid_t pid, uid_t *ret_uid, uint64_t *ret_start) {
        char path[32], buf[4096] = ""; /* all zeros: clang-analyzer cannot follow read_small_at()'s terminator */
        int64_t uid = 0;
        snprintf(path, sizeof(path), "/proc/%d", (int) pid);
        int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        ssize_t n = read_small_at(dir, "status", buf, sizeof(buf));
        int r = n < 0 ? (int) n : field_i64(buf, "Uid", &uid);
        if (r >= 0)
                r = read_start_time(dir, ret_start);
        close(dir);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        *ret_uid = (uid_t) uid;
        return 0;
}

/* A pidfd's fdinfo says "Pid:". */
static int identify_process(int fd, int64_t pid, Target *t, char *err, size_t err_size) {
        if (pid < 0) {
                snprintf(err, err_size, "The target process has exited already.");
                return -ESRCH;
        }
        if (pid == 0) {
                snprintf(err, err_size, "The target process is not in pmqosd's pid namespace.");
                return -EREMOTE;
        }
        *t = (Target){ .kind = TARGET_PROCESS, .pid = (pid_t) pid };
        int r = read_process(t->pid, &t->uid, &t->start_time);
        if (r == -ESRCH || (r >= 0 && !target_alive(fd))) {
                snprintf(err, err_size, "The target process has exited already.");
                return -ESRCH;
        }
        return r;
}

/* The caller's mount of the cgroup (a subtree mounted anywhere, in a mount
 * namespace of its own) says nothing: the cgroup is found again by the
 * kernel's own words (a thread's cgroup, its id) in pmqosd's own cgroup2
 * mount, and named by the path there. */
static int identify_cgroup(int fd, const struct statx *st, Target *t, char *err, size_t err_size) {
        char path[64], link[4096];

        if (!S_ISDIR(st->stx_mode)) {
                snprintf(err, err_size, "The target is a file of a cgroup, not its directory.");
                return -EINVAL;
        }
        int own = cgroup2_reopen_here(fd, st->stx_ino);
        if (own == -ECHILD) {
                snprintf(err, err_size, "The cgroup has no process in it: its request would end at once.");
                return -ESRCH;
        }
        if (own < 0) {
                snprintf(err, err_size,
                         "The cgroup is not one pmqosd's cgroup2 hierarchy shows (another cgroup "
                         "namespace?).");
                return -EREMOTE;
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", own);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n < 0) {
                int e = errno;
                close(own);
                return -e;
        }
        /* A cgroup's name is any bytes its creator chose: listings, the
         * log and the record get it cleaned, as a command line. */
        *t = (Target){ .kind = TARGET_CGROUP,
                       .uid = st->stx_uid,
                       .cgroup_id = st->stx_ino,
                       .fd = own,
                       .path = text_clean(link, (size_t) n, sizeof(link)) };
        return t->path ? 0 : -ENOMEM;
}

/* Whether device major:minor is cgroup2's. Its one superblock is behind
 * every cgroup2 mount of every namespace, so the caller's mount (whose id
 * means nothing in pmqosd's namespace: systemd gives the unit a mount
 * namespace of its own) has the device of any cgroup2 mount pmqosd sees. */
static bool device_is_cgroup2(unsigned major, unsigned minor) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];
        bool cgroup2 = false;
        while (f && !cgroup2 && fgets(line, sizeof(line), f)) {
                unsigned ma, mi;
                cgroup2 = strstr(line, " - cgroup2 ") && sscanf(line, "%*s %*s %u:%u", &ma, &mi) == 2 && ma == major &&
                          mi == minor;
        }
        if (f)
                fclose(f);
        return cgroup2;
}

/* Nothing here reaches the descriptor's file system: a caller's descriptor
 * on a FUSE (or network) mount whose server never answers would stall the
 * loop for everyone, before any authorization. A pidfd is told by its
 * fdinfo, a cgroup by its device; a file's type, owner and device come
 * from the inode as cached (AT_STATX_DONT_SYNC). */
int target_identify(int fd, Target *ret, char *err, size_t err_size) {
        char path[64], buf[1024] = ""; /* pos, flags, mnt_id, ino, Pid come first */
        int64_t pid = 0;
        struct statx st;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        ssize_t n = read_small_at(AT_FDCWD, path, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        if (field_i64(buf, "Pid", &pid) >= 0)
                return identify_process(fd, pid, ret, err, err_size);
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_UID | STATX_INO, &st) < 0)
                return -errno;
        if (device_is_cgroup2(st.stx_dev_major, st.stx_dev_minor))
                return identify_cgroup(fd, &st, ret, err, err_size);
        snprintf(err, err_size, "The target is neither a pidfd nor a cgroup v2 directory (%s).",
                 S_ISSOCK(st.stx_mode)  ? "it is a socket"
                 : S_ISREG(st.stx_mode) ? "it is a regular file"
                 : S_ISDIR(st.stx_mode) ? "it is a directory outside cgroup2"
                                        : "it is another kind of file");
        return -EINVAL;
}

/* A pidfd by the name the kernel gives it, not by its fdinfo as
 * target_identify() does: what fdinfo prints is the file's to say, and an
 * epoll set lists every watch (a caller's, hundreds of thousands: 0.7 s a
 * read). Then the device of the inode as cached. */
char target_close_kind(int fd) {
        static const char pidfd[] = "anon_inode:[pidfd]";
        char path[64], name[sizeof(pidfd)];
        struct statx st;

        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if (readlink(path, name, sizeof(name)) == (ssize_t) strlen(pidfd) && memcmp(name, pidfd, strlen(pidfd)) == 0)
                return 0;
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &st) < 0)
                return 'o';
        if (device_is_cgroup2(st.stx_dev_major, st.stx_dev_minor))
                return 0;
        return S_ISREG(st.stx_mode) ? 'f' : S_ISSOCK(st.stx_mode) ? 's' : S_ISDIR(st.stx_mode) ? 'd' : 'o';
}

int target_reopen_process(pid_t pid, uint64_t start_time) {
        uid_t uid = 0;
        uint64_t start = 0;

        int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        /* The pidfd first, its pid's start time second: a match is that very process. */
        int r = read_process(pid, &uid, &start);
        if (r < 0 || start != start_time || !target_alive(fd)) {
                close(fd);
                return r < 0 && r != -ESRCH ? r : -ESRCH;
        }
        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
        return fd;
}

int target_reopen_cgroup(const char *path, uint64_t id) {
        struct statfs sfs;
        struct stat st;

        /* pmqosd's own path of it (an older record may hold another's):
         * opened below a cgroup2 mount of pmqosd's only, then checked. */
        int fd = cgroup2_open_full(path);
        if (fd < 0)
                return errno == ENOENT || errno == EXDEV || errno == ELOOP ? -ESRCH : -errno;
        if (fstatfs(fd, &sfs) < 0 || fstat(fd, &st) < 0 || (uint32_t) sfs.f_type != CGROUP2_SUPER_MAGIC ||
            st.st_ino != id) {
                close(fd);
                return -ESRCH;
        }
        return fd;
}
