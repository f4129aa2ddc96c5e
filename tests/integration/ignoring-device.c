/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A stand-in for a kernel that ignores latency writes (as some vendor
 * kernels do): a FUSE file system with one file, "device", that accepts
 * every write and always reads back 2000000000, the "no constraint" value.
 * Usage: pmqos-ignoring-device MOUNTPOINT (stays in the foreground;
 * fusermount3 -u MOUNTPOINT or SIGTERM ends it). */

#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fuse.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define DEVICE_NAME "device"
static const int32_t constant = 2000000000;

static int ignoring_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
        (void) fi;
        memset(st, 0, sizeof(*st));
        if (strcmp(path, "/") == 0) {
                st->st_mode = S_IFDIR | 0755;
                st->st_nlink = 2;
                return 0;
        }
        if (strcmp(path, "/" DEVICE_NAME) != 0)
                return -ENOENT;
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = sizeof(constant);
        return 0;
}

static int ignoring_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t offset, struct fuse_file_info *fi,
                            enum fuse_readdir_flags flags) {
        (void) offset, (void) fi, (void) flags;
        if (strcmp(path, "/") != 0)
                return -ENOENT;
        fill(buf, ".", NULL, 0, 0);
        fill(buf, "..", NULL, 0, 0);
        fill(buf, DEVICE_NAME, NULL, 0, 0);
        return 0;
}

static int ignoring_open(const char *path, struct fuse_file_info *fi) {
        if (strcmp(path, "/" DEVICE_NAME) != 0)
                return -ENOENT;
        fi->direct_io = 1; /* no page cache: every read asks us */
        return 0;
}

static int ignoring_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
        (void) path, (void) fi;
        if (offset >= (off_t) sizeof(constant))
                return 0;
        size_t n = sizeof(constant) - (size_t) offset;
        if (n > size)
                n = size;
        memcpy(buf, (const char *) &constant + offset, n);
        return (int) n;
}

static int ignoring_write(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
        (void) path, (void) buf, (void) offset, (void) fi;
        return (int) size; /* accepted, and without effect */
}

static int ignoring_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
        (void) path, (void) size, (void) fi;
        return 0;
}

static const struct fuse_operations operations = {
        .getattr = ignoring_getattr,
        .readdir = ignoring_readdir,
        .open = ignoring_open,
        .read = ignoring_read,
        .write = ignoring_write,
        .truncate = ignoring_truncate,
};

int main(int argc, char *argv[]) {
        if (argc != 2) {
                fprintf(stderr, "Usage: %s MOUNTPOINT\n", argv[0]);
                return 2;
        }
        char *args[] = { argv[0], "-f", "-s", argv[1], NULL };
        return fuse_main(4, args, &operations, NULL);
}
