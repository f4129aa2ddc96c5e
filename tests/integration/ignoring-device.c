/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A stand-in for a kernel that ignores latency writes (as some vendor
 * kernels do): a FUSE file system with one file, "device", that accepts
 * every write and always reads back 2000000000, the "no constraint" value.
 * Usage: pmqos-ignoring-device MOUNTPOINT [NAME [hang]] (stays in the
 * foreground; fusermount3 -u MOUNTPOINT or SIGTERM ends it). NAME names the
 * file ("device" by default); with "hang", once the file has been opened
 * every later getattr never returns — a file system whose server stalls,
 * as a hostile user's FUSE mount can. Attributes are never cached. */

#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fuse.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const int32_t constant = 2000000000;
static char device_path[256] = "/device";
static bool hang;
static volatile bool opened;

static int ignoring_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
        (void) fi;
        memset(st, 0, sizeof(*st));
        if (strcmp(path, "/") == 0) {
                st->st_mode = S_IFDIR | 0755;
                st->st_nlink = 2;
                return 0;
        }
        if (strcmp(path, device_path) != 0)
                return -ENOENT;
        while (hang && opened)
                pause(); /* a stalled server: the caller waits until it is killed */
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
        fill(buf, device_path + 1, NULL, 0, 0);
        return 0;
}

static int ignoring_open(const char *path, struct fuse_file_info *fi) {
        if (strcmp(path, device_path) != 0)
                return -ENOENT;
        fi->direct_io = 1; /* no page cache: every read asks us */
        opened = true;
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
        if (argc < 2 || argc > 4 || (argc == 4 && strcmp(argv[3], "hang") != 0)) {
                fprintf(stderr, "Usage: %s MOUNTPOINT [NAME [hang]]\n", argv[0]);
                return 2;
        }
        if (argc > 2)
                snprintf(device_path, sizeof(device_path), "/%s", argv[2]);
        hang = argc == 4;
        char *args[] = { argv[0], "-f", "-s", "-o", "attr_timeout=0,entry_timeout=0", argv[1], NULL };
        return fuse_main(6, args, &operations, NULL);
}
