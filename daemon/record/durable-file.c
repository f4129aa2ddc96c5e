/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A crash at any instant leaves either the old file or the new one, whole:
 * the new one is complete (and, when asked, on disk) before rename() makes
 * it the file. A damaged file is moved aside, never silently dropped. */

#include "record/durable-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/file-io.h"
#include "util/log.h"

#define DURABLE_PROBE_NAME ".state.tmp"

int durable_dir_prepare(const char *dir, uid_t owner) {
        char probe[4096];
        struct stat st;

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        /* Never through a symbolic link, and only a directory that nobody
         * else could have prepared for us. */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                int r = -errno;
                if (r == -ELOOP || r == -ENOTDIR)
                        log_error("State directory %s is not a directory (a symbolic link?); refusing it.", dir);
                return r;
        }
        int r = fstat(dfd, &st) < 0 ? -errno : 0;
        close(dfd);
        if (r < 0)
                return r;
        if (st.st_uid != geteuid() && st.st_uid != owner) {
                log_error("State directory %s belongs to uid %u, not to pmqosd (uid %u%s); refusing it. Remove it or "
                          "chown it to pmqosd's user.",
                          dir, (unsigned) st.st_uid, (unsigned) geteuid(), owner != geteuid() ? " or its --user" : "");
                return -EPERM;
        }
        if (st.st_mode & (S_IWGRP | S_IWOTH)) {
                log_error("State directory %s is writable by group or others (mode %04o); refusing it. Make it 0700.",
                          dir, (unsigned) (st.st_mode & 07777));
                return -EPERM;
        }

        /* access() says yes to root even on a read-only mount: really try. */
        snprintf(probe, sizeof(probe), "%s/%s", dir, DURABLE_PROBE_NAME);
        (void) unlink(probe);
        int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        close(fd);
        unlink(probe);
        return 0;
}

int durable_file_hand_over(const char *dir, const char *name, uid_t uid, gid_t gid) {
        struct stat st;
        int r = 0;

        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        /* The file first: once the directory is the user's, root without
         * CAP_DAC_OVERRIDE (the unit's case) cannot look into it. Whatever
         * "state" is now, it is changed only through a descriptor of a regular
         * file with one link: never a symlink, FIFO or hard link. */
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                r = -errno;
        else if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        r = -errno;
                else if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
                        r = -EMLINK;
                else if (fchown(fd, uid, gid) < 0)
                        r = -errno;
                close(fd);
        }
        if (r == 0 && fchown(dfd, uid, gid) < 0)
                r = -errno;
        close(dfd);
        return r;
}

void durable_file_move_aside(const char *dir, const char *name, const char *why) {
        char aside[4096], path[4096];
        long long now = (long long) time(NULL);
        int r = -1;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        /* Never over an earlier one: the evidence of each damaged file is kept. */
        for (unsigned n = 0; n < 100 && r < 0; n++) {
                if (n == 0)
                        snprintf(aside, sizeof(aside), "%s/%s.corrupt-%lld", dir, name, now);
                else
                        snprintf(aside, sizeof(aside), "%s/%s.corrupt-%lld.%u", dir, name, now, n);
                r = renameat2(AT_FDCWD, path, AT_FDCWD, aside, RENAME_NOREPLACE);
                if (r < 0 && errno == EINVAL) /* a file system without it: as before */
                        r = rename(path, aside);
                if (r < 0 && errno != EEXIST)
                        break;
        }
        if (r < 0)
                log_error_errno(errno, "%s is unusable (%s) and cannot be moved aside: %m; starting empty.", path, why);
        else
                log_error("%s is unusable (%s); moved it to %s and starting empty.", path, why, aside);
}

int durable_file_read(const char *dir, const char *name, size_t max, char **ret, size_t *ret_len) {
        char path[4096], why[64];

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int r = read_file_bounded(path, max, ret, ret_len);
        if (r == -ENOENT || r >= 0)
                return r;
        if (r == -EFBIG)
                snprintf(why, sizeof(why), "larger than %zu MiB", max / (1024 * 1024));
        else
                snprintf(why, sizeof(why), "%s", r == -EBADMSG ? "not a regular file" : strerror(-r));
        durable_file_move_aside(dir, name, why);
        return -EBADMSG;
}

int durable_file_write(const char *dir, const char *name, const char *data, size_t len, bool sync, bool durable) {
        char tmp[4096], path[4096];
        int r = 0;

        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
        snprintf(path, sizeof(path), "%s/%s", dir, name);

        /* A fresh file: whatever had that name (a link planted there) is not written through. */
        (void) unlink(tmp);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = pwrite_all(fd, data, len, 0); /* a fresh file: from its start */
        if (r == 0 && sync && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return r;
        }

        /* Without it a power cut may bring back the previous file, which is
         * whole: fine when what changed is lost with a reboot anyway. */
        if (!durable)
                return 0;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        if (fsync(dfd) < 0)
                r = -errno;
        close(dfd);
        return r;
}
