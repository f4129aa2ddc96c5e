/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A crash at any instant leaves either the old file or the new one, whole:
 * the new one is complete and on disk before rename() makes it the file. */

#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define STATE_NAME "state"
#define STATE_TMP_NAME ".state.tmp"

int state_dir_prepare(const char *dir) {
        char probe[4096];

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        struct stat st;
        if (stat(dir, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;

        /* access() says yes to root even on a read-only mount: really try. */
        snprintf(probe, sizeof(probe), "%s/%s", dir, STATE_TMP_NAME);
        int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        close(fd);
        unlink(probe);
        return 0;
}

static int read_file(const char *path, char **ret, size_t *ret_len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;

        struct stat st;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                close(fd);
                return -EBADMSG;
        }
        if ((uint64_t) st.st_size > STATE_FILE_MAX) {
                close(fd);
                return -EFBIG;
        }

        size_t cap = (size_t) st.st_size + 1, len = 0;
        char *buf = malloc(cap);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        int r = -errno;
                        free(buf);
                        close(fd);
                        return r;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len == cap) { /* grew while we read: refuse rather than chase it */
                        free(buf);
                        close(fd);
                        return -EFBIG;
                }
        }
        close(fd);
        *ret = buf;
        *ret_len = len;
        return 0;
}

static void move_aside(const char *dir, const char *path, const char *why) {
        char aside[4096];
        snprintf(aside, sizeof(aside), "%s/%s.corrupt-%lld", dir, STATE_NAME, (long long) time(NULL));
        if (rename(path, aside) < 0)
                log_error("State file %s is unusable (%s) and cannot be moved aside: %s; starting empty.", path, why,
                          strerror(errno));
        else
                log_error("State file %s is unusable (%s); moved it to %s and starting empty.", path, why, aside);
}

int state_load(const char *dir, StateData *ret) {
        char path[4096], err[256];
        char *buf = NULL;
        size_t len = 0;

        *ret = (StateData){ .floor = PMQOS_LATENCY_NONE };
        snprintf(path, sizeof(path), "%s/%s", dir, STATE_NAME);

        int r = read_file(path, &buf, &len);
        if (r == -ENOENT)
                return 0;
        if (r == -EFBIG || r == -EBADMSG) {
                move_aside(dir, path, r == -EFBIG ? "larger than 16 MiB" : "not a regular file");
                return 0;
        }
        if (r < 0) {
                move_aside(dir, path, strerror(-r));
                return 0;
        }

        r = state_parse(buf, len, ret, err, sizeof(err));
        free(buf);
        if (r == -EBADMSG) {
                move_aside(dir, path, err);
                return 0;
        }
        return r;
}

int state_save(const char *dir, const char *data, size_t len) {
        char tmp[4096], path[4096];
        int r = 0;

        snprintf(tmp, sizeof(tmp), "%s/%s", dir, STATE_TMP_NAME);
        snprintf(path, sizeof(path), "%s/%s", dir, STATE_NAME);

        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < len;) {
                ssize_t n = write(fd, data + done, len - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                done += (size_t) n;
        }
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                return r;
        }

        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        if (fsync(dfd) < 0)
                r = -errno;
        close(dfd);
        return r;
}
