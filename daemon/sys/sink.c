/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Writes are binary int32 at offset 0: the device ignores the offset, and a
 * regular file standing in for it (tests without root) reads back the same. */

#include "model/store.h"
#include "sys/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sink_open(Sink *s, const char *path) {
        *s = (Sink) SINK_INIT;
        s->path = strdup(path);
        if (!s->path)
                return -ENOMEM;

        s->fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (s->fd < 0) {
                int r = -errno;
                sink_close(s);
                return r;
        }

        /* A regular file standing in for the device starts out unconstrained. */
        struct stat st;
        if (fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode)) {
                int32_t v = PMQOS_CONTRACT_LATENCY_MAX;
                if (pwrite(s->fd, &v, sizeof(v), 0) != sizeof(v) || ftruncate(s->fd, sizeof(v)) < 0) {
                        int r = errno > 0 ? -errno : -EIO;
                        sink_close(s);
                        return r;
                }
        }
        return 0;
}

int sink_adopt(Sink *s, const char *path, int fd) {
        struct stat a, b;

        *s = (Sink) SINK_INIT;
        if (fstat(fd, &a) < 0 || stat(path, &b) < 0)
                return -EBADF;
        bool same = S_ISCHR(a.st_mode) ? S_ISCHR(b.st_mode) && a.st_rdev == b.st_rdev
                                       : S_ISREG(a.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        int flags = fcntl(fd, F_GETFL);
        if (!same || flags < 0 || (flags & O_ACCMODE) != O_RDWR)
                return -EBADF;
        s->path = strdup(path);
        if (!s->path)
                return -ENOMEM;
        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
        s->fd = fd;
        s->written = SINK_WRITTEN_UNKNOWN;
        return 0;
}

void sink_close(Sink *s) {
        struct stat st;
        /* A regular file standing in for the device forgets nothing by
         * itself: do what the kernel does when our descriptor closes. */
        if (s->fd >= 0 && fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode)) {
                int32_t v = PMQOS_CONTRACT_LATENCY_MAX;
                (void) !pwrite(s->fd, &v, sizeof(v), 0);
        }
        if (s->fd >= 0)
                close(s->fd); /* the kernel drops our request here */
        s->fd = -1;
        free(s->path);
        s->path = NULL;
}

int sink_apply(Sink *s, int32_t usec) {
        int32_t v = usec < 0 ? PMQOS_CONTRACT_LATENCY_MAX : usec;

        if (v == s->written)
                return 0;

        ssize_t n = pwrite(s->fd, &v, sizeof(v), 0);
        if (n < 0)
                return -errno;
        if (n != sizeof(v))
                return -EIO;

        s->written = v;
        s->n_writes++;
        /* Until a constraining write was seen to take effect: a kernel (or a
         * stand-in) that ignores writes does so from the start. */
        int32_t k = 0;
        if (v < PMQOS_CONTRACT_LATENCY_MAX && !s->ignores_writes && !s->honours_writes && sink_read(s, &k) == 0) {
                s->honours_writes = k <= v;
                if (k > v) {
                        s->ignores_writes = true;
                        s->ignored_reported = k; /* the caller tells the journal */
                }
        }
        return 0;
}

int sink_read(Sink *s, int32_t *ret) {
        int32_t v;
        ssize_t n = pread(s->fd, &v, sizeof(v), 0);
        if (n < 0)
                return -errno;
        if (n != sizeof(v))
                return -EIO;
        *ret = v;
        return 0;
}
