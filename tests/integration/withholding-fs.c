/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A hostile user's FUSE file system: one file, "f", whose server answers
 * every request but the FLUSH of a close by the process PID (argument) or
 * a child of it — that close then waits, uninterruptibly, for as long as
 * this server lives (every close of a FUSE descriptor sends FLUSH, process
 * exit included). Each FLUSH withheld prints "withheld TID TGID" on stdout.
 * Usage: pmqos-withholding-fs MOUNTPOINT PID [allow_other] (foreground;
 * fusermount3 -u MOUNTPOINT or SIGTERM ends it, which releases every
 * waiting close). allow_other: other users may open the file too. */

#define FUSE_USE_VERSION 34

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FILE_INO 2

static pid_t victim;

static void attributes(fuse_ino_t ino, struct stat *st) {
        memset(st, 0, sizeof(*st));
        st->st_ino = ino;
        st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
        st->st_nlink = ino == FUSE_ROOT_ID ? 2 : 1;
        st->st_size = ino == FUSE_ROOT_ID ? 0 : 4;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
        struct fuse_entry_param e = { .ino = FILE_INO };
        if (parent != FUSE_ROOT_ID || strcmp(name, "f") != 0) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        attributes(FILE_INO, &e.attr);
        fuse_reply_entry(req, &e);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        struct stat st;
        (void) fi;
        attributes(ino, &st);
        fuse_reply_attr(req, &st, 0);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
        (void) ino, (void) fi;
        fuse_reply_buf(req, "data" + (off < 4 ? off : 4),
                       off < 4 ? (size < (size_t) (4 - off) ? size : (size_t) (4 - off)) : 0);
}

/* Whether tid is a thread of the victim or of one of its children; its
 * process in *ret_tgid. */
static int is_victim(pid_t tid, long *ret_tgid) {
        char path[64], line[256];
        long tgid = -1, ppid = -1;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) tid);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f)) {
                sscanf(line, "Tgid: %ld", &tgid);
                sscanf(line, "PPid: %ld", &ppid);
        }
        if (f)
                fclose(f);
        *ret_tgid = tgid;
        return tgid == victim || ppid == victim;
}

static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        pid_t tid = fuse_req_ctx(req)->pid;
        long tgid = -1;
        (void) ino, (void) fi;
        if (is_victim(tid, &tgid)) {
                printf("withheld %d %ld\n", (int) tid, tgid);
                fflush(stdout);
                return; /* never answered: the closer waits */
        }
        fuse_reply_err(req, 0);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void) ino;
        fuse_reply_open(req, fi);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void) ino, (void) fi;
        fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops operations = {
        .lookup = fs_lookup,
        .getattr = fs_getattr,
        .open = fs_open,
        .read = fs_read,
        .flush = fs_flush,
        .release = fs_release,
};

int main(int argc, char *argv[]) {
        if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "allow_other") != 0)) {
                fprintf(stderr, "Usage: %s MOUNTPOINT PID [allow_other]\n", argv[0]);
                return 2;
        }
        victim = (pid_t) atoi(argv[2]);
        char *args_v[] = { argv[0], "-o", "allow_other", NULL };
        struct fuse_args args = FUSE_ARGS_INIT(argc == 4 ? 3 : 1, args_v);
        struct fuse_session *se = fuse_session_new(&args, &operations, sizeof(operations), NULL);
        if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0)
                return 1;
        printf("mounted\n");
        fflush(stdout);
        int r = fuse_session_loop(se);
        fuse_session_unmount(se);
        fuse_remove_signal_handlers(se);
        fuse_session_destroy(se);
        return r ? 1 : 0;
}
