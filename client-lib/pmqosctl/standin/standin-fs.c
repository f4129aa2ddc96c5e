// SPDX-License-Identifier: LGPL-2.1-or-later
/* The stand-in's FUSE operations. Each file behaves as the kernel's device
 * of its name: open adds a request of its type that constrains nothing, a
 * write sets its value (as cpu_latency_qos_write() reads it; the wakeup
 * device takes writes alike), a read gives the machine's value for that
 * type (4 bytes, from the file offset), the release of the open file
 * description (the last close of it, whatever dup() and fork() made) ends
 * it. Both files share the bound on opens served at once. */

#define FUSE_USE_VERSION 31

#include "standin-fs.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include "standin-parse.h"

#define DEVICE_NAME "/cpu_dma_latency"
/* Linux 6.19's second device: requests of type cpu_wakeup. Where pmqosd has
 * no wakeup device its open fails with ENODEV, never reaching the real one. */
#define WAKEUP_NAME "/cpu_wakeup_latency"

static standin *current(void) {
        return fuse_get_context()->private_data;
}

static void *standin_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
        (void) conn;
        cfg->direct_io = 1; /* no page cache: every read and write comes here */
        cfg->attr_timeout = 0;
        cfg->entry_timeout = 0;
        cfg->negative_timeout = 0;
        return current();
}

static int standin_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
        (void) fi;
        standin *s = current();
        memset(st, 0, sizeof(*st));
        st->st_uid = s->uid;
        st->st_gid = s->gid;
        if (strcmp(path, "/") == 0) {
                st->st_mode = S_IFDIR | 0700;
                st->st_nlink = 2;
                return 0;
        }
        if (strcmp(path, DEVICE_NAME) != 0 && (strcmp(path, WAKEUP_NAME) != 0 || !s->wakeup))
                return -ENOENT;
        st->st_mode = S_IFREG | 0600; /* as the device: its owner only */
        st->st_nlink = 1;
        return 0;
}

static int standin_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t offset, struct fuse_file_info *fi,
                           enum fuse_readdir_flags flags) {
        (void) offset, (void) fi, (void) flags;
        if (strcmp(path, "/") != 0)
                return -ENOENT;
        fill(buf, ".", NULL, 0, 0);
        fill(buf, "..", NULL, 0, 0);
        fill(buf, DEVICE_NAME + 1, NULL, 0, 0);
        if (current()->wakeup)
                fill(buf, WAKEUP_NAME + 1, NULL, 0, 0);
        return 0;
}

/* The errno an open or write gets when the broker refuses. */
static int refused(standin *s, pid_t pid, int r) {
        if (!s->said_refused) {
                fprintf(stderr, "pmqosctl run: the broker refused the bound of pid %d: %s\n", (int) pid,
                        s->backend.error[0] ? s->backend.error : strerror(-r));
                s->said_refused = true;
        }
        switch (r) {
        case -EACCES:
                return -EACCES;
        case -EUSERS:
                return -EMFILE; /* too many requests for this user */
        case -ENOMEM:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

/* The process (thread group) the thread tid belongs to. While the kernel
 * waits for our answer to its open, that thread cannot exit, so tid and its
 * thread group are not reused meanwhile. */
static pid_t thread_group(pid_t tid) {
        char path[64], line[128];
        snprintf(path, sizeof(path), "/proc/%d/status", (int) tid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        pid_t tgid = -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Tgid: %d", &tgid) == 1)
                        break;
        fclose(f);
        return tgid;
}

/* A request of device's type bound to the process whose thread made the
 * current FUSE call. 0, or the errno for that call. */
static int request_for_caller(standin *s, standin_device device, uint32_t *ret_cookie, pid_t *ret_pid) {
        pid_t pid = thread_group(fuse_get_context()->pid);
        if (pid <= 0)
                return -ESRCH;
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return -errno;
        int r = standin_backend_open(&s->backend, device, pidfd, pid, ret_cookie);
        close(pidfd);
        if (r == -ENODEV)
                return r; /* pmqosd serves no device of that type: said by the errno alone */
        if (r < 0)
                return refused(s, pid, r);
        *ret_pid = pid;
        return 0;
}

static int standin_open_file(const char *path, struct fuse_file_info *fi) {
        struct fuse_context *ctx = fuse_get_context();
        standin *s = ctx->private_data;
        standin_device device;
        if (strcmp(path, DEVICE_NAME) == 0)
                device = STANDIN_CPU_DMA;
        else if (strcmp(path, WAKEUP_NAME) == 0 && s->wakeup)
                device = STANDIN_CPU_WAKEUP;
        else
                return -ENOENT;
        if (ctx->uid != s->uid)
                return -EACCES; /* another user: not through our authorization */
        if (s->n_opens >= STANDIN_MAX_OPENS)
                return -EMFILE;
        unsigned slot = 0;
        while (s->opens[slot].used)
                slot++;
        uint32_t cookie;
        pid_t pid;
        int r = request_for_caller(s, device, &cookie, &pid);
        if (r < 0)
                return r;
        s->opens[slot] = (standin_open){ .cookie = cookie, .pid = pid, .device = device, .used = true };
        s->n_opens++;
        fi->fh = slot;
        fi->direct_io = 1;
        return 0;
}

static standin_open *open_of(standin *s, const struct fuse_file_info *fi) {
        return fi->fh < STANDIN_MAX_OPENS && s->opens[fi->fh].used ? &s->opens[fi->fh] : NULL;
}

/* The kernel's read gives 4 bytes from the file offset, and its write leaves
 * the offset alone; FUSE's write() moves it. So an offset at or past what
 * was written is taken as counted from there (write(), then read(): the 4
 * bytes, as from the device); one below it (pread(), or after pwrite()) as
 * it is. */
static int standin_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
        (void) path;
        standin *s = current();
        standin_open *o = open_of(s, fi);
        int32_t v;
        if (offset < 0 || !o)
                return -EINVAL;
        if ((uint64_t) offset >= o->written)
                offset -= (off_t) o->written;
        if (offset >= (off_t) sizeof(v))
                return 0;
        int r = standin_backend_machine_value(&s->backend, o->device, &v);
        if (r < 0)
                return -EIO;
        size_t n = sizeof(v) - (size_t) offset;
        if (n > size)
                n = size;
        memcpy(buf, (const char *) &v + offset, n);
        return (int) n;
}

static int standin_write(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
        (void) path, (void) offset;
        standin *s = current();
        standin_open *o = open_of(s, fi);
        int32_t v;
        if (!o)
                return -EBADF;
        int r = standin_parse_write(buf, size, &v);
        if (r < 0)
                return r;
        r = standin_backend_set(&s->backend, o->cookie, standin_broker_value(v));
        if (r == -ENOENT) {
                /* The opener died (its request with it) while a child it
                 * forked keeps the descriptor: the writer's own request now. */
                r = request_for_caller(s, o->device, &o->cookie, &o->pid);
                if (r < 0)
                        return r;
                r = standin_backend_set(&s->backend, o->cookie, standin_broker_value(v));
        }
        if (r < 0)
                return refused(s, o->pid, r);
        o->written += size;
        return (int) size;
}

static int standin_release(const char *path, struct fuse_file_info *fi) {
        (void) path;
        standin *s = current();
        standin_open *o = open_of(s, fi);
        if (!o)
                return 0;
        (void) standin_backend_close(&s->backend, o->cookie); /* gone already is fine */
        o->used = false;
        s->n_opens--;
        return 0;
}

static int standin_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
        (void) path, (void) size, (void) fi;
        return 0; /* O_TRUNC, as on the device: nothing to do */
}

static const struct fuse_operations operations = {
        .init = standin_init,
        .getattr = standin_getattr,
        .readdir = standin_readdir,
        .open = standin_open_file,
        .read = standin_read,
        .write = standin_write,
        .release = standin_release,
        .truncate = standin_truncate,
};

struct fuse *standin_fuse_new(standin *s, const char *fuse_opts) {
        char *argv[] = { "pmqosctl", "-o", (char *) fuse_opts, NULL };
        struct fuse_args args = FUSE_ARGS_INIT(3, argv);
        struct fuse *f = fuse_new(&args, &operations, sizeof(operations), s);
        fuse_opt_free_args(&args);
        return f;
}
