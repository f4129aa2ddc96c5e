/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Opening a cgroup by its path in the unified hierarchy, through whichever
 * cgroup2 mount this mount namespace has; and finding a cgroup given as a
 * descriptor there, by what the kernel says of it (a thread's cgroup, the
 * cgroup id), not by the path its mount shows. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cgroup2.h"

#define MOUNTS_TRIED 8

typedef struct Mounts {
        char at[MOUNTS_TRIED][2048]; /* the last MOUNTS_TRIED listed, through n % MOUNTS_TRIED */
        int n;
} Mounts;

/* The cgroup2 mounts of this mount namespace that show the whole tree. */
static void list_mounts(Mounts *m) {
        char line[4096];
        m->n = 0;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        while (f && fgets(line, sizeof(line), f)) {
                char root[2048];
                if (strstr(line, " - cgroup2 ") &&
                    sscanf(line, "%*s %*s %*s %2047s %2047s", root, m->at[m->n % MOUNTS_TRIED]) == 2 &&
                    strcmp(root, "/") == 0)
                        m->n++;
        }
        if (f)
                fclose(f);
}

/* cg ("/a/b") below mount point mnt, never leaving that mount (no other
 * file system, no symbolic link: only cgroup2 is asked). */
static int open_beneath(const char *mnt, const char *cg) {
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int root = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -1;
        while (*cg == '/')
                cg++;
        int fd = (int) syscall(SYS_openat2, root, *cg ? cg : ".", &how, sizeof(how));
        if (fd < 0 && errno == ENOSYS) /* before Linux 5.6, or under valgrind: as before, a plain open */
                fd = openat(root, *cg ? cg : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int e = errno;
        close(root);
        errno = e;
        return fd;
}

int cgroup2_open(const char *cg) {
        Mounts m;
        int fd = -1, e = ENOENT;

        list_mounts(&m);
        for (int i = m.n - 1; i >= 0 && i >= m.n - MOUNTS_TRIED && fd < 0; i--) {
                fd = open_beneath(m.at[i % MOUNTS_TRIED], cg);
                if (fd < 0)
                        e = errno;
        }
        if (fd < 0)
                errno = e;
        return fd;
}

int cgroup2_open_full(const char *path) {
        Mounts m;
        int fd = -1, e = ENOENT;

        list_mounts(&m);
        for (int i = m.n - 1; i >= 0 && i >= m.n - MOUNTS_TRIED && fd < 0; i--) {
                const char *mnt = m.at[i % MOUNTS_TRIED];
                size_t k = strcmp(mnt, "/") == 0 ? 0 : strlen(mnt);
                if (strncmp(path, mnt, k) != 0 || (path[k] != '/' && path[k] != 0))
                        continue;
                fd = open_beneath(mnt, path + k);
                if (fd < 0)
                        e = errno;
        }
        if (fd < 0)
                errno = e;
        return fd;
}

int cgroup2_path_from_proc(const char *text, size_t len, unsigned up, char *buf, size_t size) {
        for (size_t i = 0; i < len;) {
                const char *line = text + i, *nl = memchr(line, '\n', len - i);
                size_t n = nl ? (size_t) (nl - line) : len - i;
                i += n + 1;
                if (n < 4 || memcmp(line, "0::/", 4) != 0)
                        continue;
                line += 3, n -= 3;
                for (; up > 0 && n > 1; up--) /* drop "/last" */
                        while (n > 0 && line[--n] != '/')
                                ;
                if (up > 0 || (n >= 3 && memcmp(line, "/..", 3) == 0 && (n == 3 || line[3] == '/')))
                        return -ENOENT;
                if (n == 0)
                        n = 1; /* the root: "/" */
                if (n >= size)
                        return -ENAMETOOLONG;
                memcpy(buf, line, n);
                buf[n] = 0;
                return 0;
        }
        return -ENOENT;
}

/* The mount id of descriptor fd, from /proc/self/fdinfo (asking nothing
 * of its file system), or -1. */
static long mount_id(int fd) {
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        int f = open(path, O_RDONLY | O_CLOEXEC);
        if (f < 0)
                return -1;
        ssize_t n = read(f, buf, sizeof(buf) - 1);
        close(f);
        buf[n > 0 ? n : 0] = 0;
        const char *p = strstr(buf, "\nmnt_id:");
        return p ? strtol(p + 8, NULL, 10) : -1;
}

/* name in dir (a caller's cgroup2 directory), opened only if it is on
 * dir's own mount: the caller's mount namespace may have anything mounted
 * over a file or directory of its cgroup (a FUSE file system whose server
 * never answers), which no path walk of pmqosd's may enter. openat2()
 * refuses to cross it; without openat2 (valgrind), the O_PATH descriptor
 * (no open of that file system) has its mount compared first. */
static int open_same_mount(int dir, const char *name, int flags) {
        struct open_how how = { .flags = (uint64_t) flags | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH };
        int fd = (int) syscall(SYS_openat2, dir, name, &how, sizeof(how));
        if (fd >= 0 || errno != ENOSYS)
                return fd;
        char path[64];
        int p = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (p < 0)
                return -1;
        long m = mount_id(p);
        if (m < 0 || m != mount_id(dir)) {
                close(p);
                errno = EXDEV;
                return -1;
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", p);
        fd = open(path, flags | O_CLOEXEC);
        int e = errno;
        close(p);
        errno = e;
        return fd;
}

/* Directories below the cgroup searched for a thread, and threads tried in each. */
#define SEARCH_DIRS 64
#define TIDS_TRIED 4

typedef struct Search {
        uint64_t id;
        unsigned dirs_left;
        bool thread_seen;
} Search;

/* The cgroup up levels above thread tid's, if it is s->id. */
static int try_thread(const Search *s, long tid, unsigned up) {
        char path[64], text[4096], cg[4096];
        struct stat st;

        snprintf(path, sizeof(path), "/proc/%ld/cgroup", tid);
        int f = open(path, O_RDONLY | O_CLOEXEC);
        if (f < 0)
                return -EREMOTE;
        ssize_t n = read(f, text, sizeof(text));
        close(f);
        if (n <= 0 || cgroup2_path_from_proc(text, (size_t) n, up, cg, sizeof(cg)) < 0)
                return -EREMOTE;
        int fd = cgroup2_open(cg);
        if (fd < 0)
                return -EREMOTE;
        if (fstat(fd, &st) < 0 || st.st_ino != s->id) {
                close(fd); /* the thread moved, or its tid is another's now */
                return -EREMOTE;
        }
        return fd;
}

/* A few threads of dir's cgroup.threads tried. */
static int try_threads(Search *s, int dir, unsigned depth) {
        char buf[256];
        int f = open_same_mount(dir, "cgroup.threads", O_RDONLY);
        if (f < 0)
                return -EREMOTE;
        ssize_t n = read(f, buf, sizeof(buf) - 1);
        close(f);
        if (n <= 0)
                return -EREMOTE;
        buf[n] = 0;
        char *p = buf;
        for (int i = 0; i < TIDS_TRIED; i++) {
                char *end;
                long tid = strtol(p, &end, 10);
                if (end == p || *end != '\n') /* none, or cut by the buffer */
                        break;
                s->thread_seen = true;
                int fd = try_thread(s, tid, depth);
                if (fd >= 0)
                        return fd;
                p = end + 1;
        }
        return -EREMOTE;
}

/* dir and the cgroups below it, depth first, until SEARCH_DIRS were read. */
static int search(Search *s, int dir, unsigned depth) {
        if (s->dirs_left == 0)
                return -EREMOTE;
        s->dirs_left--;
        int fd = try_threads(s, dir, depth);
        if (fd >= 0)
                return fd;
        int d = open_same_mount(dir, ".", O_RDONLY | O_DIRECTORY);
        DIR *list = d >= 0 ? fdopendir(d) : NULL;
        if (!list) {
                if (d >= 0)
                        close(d);
                return -EREMOTE;
        }
        struct dirent *de;
        while (fd < 0 && s->dirs_left > 0 && (de = readdir(list)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                        int child = open_same_mount(dir, de->d_name, O_RDONLY | O_DIRECTORY);
                        if (child >= 0) {
                                fd = search(s, child, depth + 1);
                                close(child);
                        }
                }
        closedir(list);
        return fd;
}

int cgroup2_reopen_here(int dir_fd, uint64_t id) {
        Search s = { .id = id, .dirs_left = SEARCH_DIRS };
        int fd = search(&s, dir_fd, 0);
        return fd >= 0 ? fd : s.thread_seen ? -EREMOTE : -ECHILD;
}
