/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl run --serve DIR: DIR opened as a descriptor to mount through,
 * with nothing on its path that another user could swap, rename or answer
 * for. */

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "pmqosctl-cli.h"

int setup_fail(const char *what, const char *why) {
        fprintf(stderr, "pmqosctl run: cannot set up the stand-in device: %s: %s\n", what, why);
        return EXIT_RUN_FAILED;
}

static int openat_no_links(int at, const char *path) {
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
        return (int) syscall(SYS_openat2, at, path, &how, sizeof(how));
}

/* Root's, not on FUSE (whose server says who owns it); above DIR not writable by others unless sticky. */
static bool safe_dir(int fd, bool above) {
        struct stat st;
        struct statfs sf;
        return fstat(fd, &st) == 0 && fstatfs(fd, &sf) == 0 && sf.f_type != FUSE_SUPER_MAGIC &&
               (st.st_uid == 0 || st.st_uid == getuid()) &&
               !(above && (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX));
}

/* DIR's parent, a directory at a time without links, each safe_dir() (else its owner could rename it, DIR
 * mounted inside, and put theirs at its path): its descriptor, or -1 with errno (EPERM: *ret_bad_len). */
static int open_parent(const char *parent, int *ret_bad_len) {
        char path[64];
        snprintf(path, sizeof(path), "%s", parent);
        int fd = openat_no_links(AT_FDCWD, "/"), len = 1;
        for (char *save = NULL, *c = strtok_r(path, "/", &save); fd >= 0; c = strtok_r(NULL, "/", &save)) {
                if (!safe_dir(fd, true)) {
                        close(fd);
                        return *ret_bad_len = len, errno = EPERM, -1;
                }
                if (!c)
                        return fd;
                len = (int) (c - path + strlen(c));
                int next = openat_no_links(fd, c);
                close(fd);
                fd = next;
        }
        return -1;
}

/* DIR for --serve, made if missing, as a descriptor: resolved without
 * following a symbolic link anywhere on its path (a link planted at DIR or
 * at any directory above it is refused, not followed), a real directory
 * owned by root. Mounting through this descriptor, a DIR swapped after the
 * check changes nothing. The descriptor, or -1 after saying why. */
int open_serve_dir(const char *dir) {
        char parent[64];
        const char *base = strrchr(dir, '/') + 1; /* absolute: checked by run_parse() */
        snprintf(parent, sizeof(parent), "%.*s", (int) (base - dir), dir);
        if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
                return setup_fail(dir, "--serve wants a directory's path, not ending in /, . or .."), -1;
        int bad = 0, pfd = open_parent(parent, &bad);
        if (pfd < 0 && errno == EPERM) {
                char why[180];
                snprintf(why, sizeof(why),
                         "a directory above it (%.*s) is not root's, or on FUSE, or others may write it without the "
                         "sticky bit: refusing to serve below it",
                         bad, dir);
                return setup_fail(dir, why), -1;
        }
        if (pfd >= 0 && mkdirat(pfd, base, 0755) < 0 && errno != EEXIST) {
                int e = errno;
                close(pfd);
                return setup_fail(dir, strerror(e)), -1;
        }
        int fd = pfd < 0 ? -1 : openat_no_links(pfd, base);
        int e = errno;
        if (pfd >= 0)
                close(pfd);
        if (fd >= 0 && safe_dir(fd, false))
                return fd;
        if (fd >= 0) {
                close(fd);
                return setup_fail(dir, "not owned by root, or on a FUSE file system: refusing to serve over it"), -1;
        }
        if (e == ELOOP)
                return setup_fail(dir, "it, or a directory above it, is a symbolic link: refusing to follow it"), -1;
        if (e == ENOTDIR)
                return setup_fail(dir, "not a directory (a path through something else)"), -1;
        return setup_fail(dir, strerror(e)), -1;
}
