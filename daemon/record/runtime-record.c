/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A transaction's lines are copied into a shared mapping of the file's
 * tail, space reserved with fallocate() beforehand (a full tmpfs then says
 * ENOSPC there, not SIGBUS at the copy): no system call per change, and
 * what is copied is in the file at once, for whoever reads it after a
 * kill -9. Beyond the lines the file holds zeros, cut off when pmqosd
 * stops; the parser drops them, and a line cut short by a kill, whose
 * change was never acknowledged. Without a window (fallocate or mmap
 * refused) the lines are written with pwrite() at their place. The file is
 * written whole again (temporary file and rename, no fsync) once it holds
 * more than twice the lines it needs, so its size stays bounded by the live
 * requests and each change costs O(1) amortized. */

#include "record/runtime-record.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "record/durable-file.h"
#include "util/file-io.h"

/* Slack before a rewrite: a record of few requests is not rewritten at every change. */
#define RUNTIME_COMPACT_SLACK 1024u
/* The mapped tail of the record: a window is reserved and mapped for about
 * 300 changes at a time. */
#define RUNTIME_WINDOW_BYTES (64u * 1024u)

static void unmap_window(RuntimeRecord *rec) {
        if (rec->map)
                (void) munmap(rec->map, rec->map_len);
        rec->map = NULL;
        rec->map_offset = rec->map_len = 0;
}

/* Cuts the zeros past the lines and lets the file go. */
static void close_record(RuntimeRecord *rec) {
        unmap_window(rec);
        if (rec->fd >= 0) {
                (void) ftruncate(rec->fd, (off_t) rec->used);
                close(rec->fd);
        }
        rec->fd = -1;
        rec->used = 0;
}

int runtime_record_init(RuntimeRecord *rec, const char *dir, uid_t owner) {
        *rec = (RuntimeRecord){ .fd = -1 };
        if (!dir || !*dir)
                return 0;
        int r = durable_dir_prepare(dir, owner);
        if (r < 0) {
                log_warning_errno(
                        r,
                        "Cannot use runtime directory %s: %m; requests that are not persistent will not survive a "
                        "restart of pmqosd.",
                        dir);
                return r;
        }
        rec->dir = strdup(dir);
        return rec->dir ? 0 : -ENOMEM;
}

void runtime_record_done(RuntimeRecord *rec) {
        close_record(rec);
        free(rec->dir);
        *rec = (RuntimeRecord){ .fd = -1 };
}

int runtime_record_load(RuntimeRecord *rec, RuntimeData *ret) {
        char err[256];
        char *buf = NULL;
        size_t len = 0;

        *ret = (RuntimeData){};
        if (!rec->dir)
                return 0;
        int r = durable_file_read(rec->dir, RUNTIME_RECORD_NAME, RUNTIME_FILE_MAX, &buf, &len);
        if (r == -ENOENT || r == -EBADMSG)
                return 0;
        r = runtime_parse_in_place(buf, len, ret, err, sizeof(err)); /* takes buf, which has room for a NUL */
        if (r == -EBADMSG) {
                durable_file_move_aside(rec->dir, RUNTIME_RECORD_NAME, err);
                return 0;
        }
        return r;
}

static int open_for_append(RuntimeRecord *rec) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", rec->dir, RUNTIME_RECORD_NAME);
        close_record(rec);
        /* Read and write: a shared writable mapping needs both. */
        rec->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (rec->fd < 0)
                return -errno;
        if (fstat(rec->fd, &st) < 0) {
                int r = -errno;
                close_record(rec);
                return r;
        }
        rec->used = (size_t) st.st_size;
        return 0;
}

/* Maps a window from the page that holds the end of the lines, with room
 * for at least need more bytes, its blocks reserved first. */
static int map_window(RuntimeRecord *rec, size_t need) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        size_t start = rec->used / page * page;
        size_t len = (rec->used - start + need + RUNTIME_WINDOW_BYTES + page - 1) / page * page;

        unmap_window(rec);
        int r = posix_fallocate(rec->fd, (off_t) start, (off_t) len);
        if (r != 0)
                return -r;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, rec->fd, (off_t) start);
        if (p == MAP_FAILED)
                return -errno;
        rec->map = p;
        rec->map_offset = start;
        rec->map_len = len;
        return 0;
}

static int append_bytes(RuntimeRecord *rec, const char *data, size_t len) {
        if (!rec->map || rec->used + len > rec->map_offset + rec->map_len)
                (void) map_window(rec, len); /* else no window: see below */
        if (rec->map)
                memcpy(rec->map + (rec->used - rec->map_offset), data, len);
        else {
                /* No window: written through, at the end of the lines (not of
                 * the file, which may hold a reserved tail). */
                int r = pwrite_all(rec->fd, data, len, rec->used);
                if (r < 0)
                        return r;
        }
        rec->used += len;
        return 0;
}

static int rewrite(RuntimeRecord *rec, const Store *s) {
        TextBuffer b = {};
        size_t n = 0;

        runtime_format_header(&b, rec->bus_id);
        STORE_FOREACH(r, s)
        if (!r->persistent && !r->rule) {
                runtime_format_add(&b, r);
                n++;
        }
        int k = b.oom ? -ENOMEM : durable_file_write(rec->dir, RUNTIME_RECORD_NAME, b.data, b.len, false, false);
        free(b.data);
        if (k >= 0)
                k = open_for_append(rec);
        if (k < 0) {
                rec->failed = true;
                return k;
        }
        rec->n_lines = rec->n_live = n;
        rec->failed = false;
        return 0;
}

int runtime_record_start(RuntimeRecord *rec, const char *bus_id, const Store *s) {
        if (!rec->dir)
                return 0;
        snprintf(rec->bus_id, sizeof(rec->bus_id), "%s", bus_id);
        int r = rewrite(rec, s);
        if (r < 0)
                log_error_errno(r,
                                "Cannot write the runtime record in %s: %m; requests that are not persistent will not "
                                "survive a restart until it works.",
                                rec->dir);
        return r;
}

int runtime_record_resume(RuntimeRecord *rec, const char *bus_id, size_t length, size_t n_changes, size_t n_live,
                          const TextBuffer *lines, size_t n_lines, long live_delta, const Store *s) {
        if (!rec->dir)
                return 0;
        snprintf(rec->bus_id, sizeof(rec->bus_id), "%s", bus_id);
        /* What follows the complete lines (the reserved zeros, a line a kill cut short) goes. */
        if (open_for_append(rec) < 0 || rec->used < length || ftruncate(rec->fd, (off_t) length) < 0)
                return runtime_record_start(rec, bus_id, s);
        rec->used = length;
        rec->n_lines = n_changes;
        rec->n_live = n_live;
        rec->failed = false;
        runtime_record_append(rec, lines, n_lines, live_delta, s);
        return 0;
}

/* The whole record again, from s; said once when it fails, and when it works again. */
static void rewrite_logged(RuntimeRecord *rec, const Store *s) {
        bool was_failed = rec->failed;
        int r = rewrite(rec, s);
        if (r < 0 && !was_failed)
                log_error_errno(r, "Cannot update the runtime record in %s: %m; trying again at the next change.",
                                rec->dir);
        else if (r >= 0 && was_failed)
                log_info("The runtime record in %s is up to date again.", rec->dir);
}

static bool too_long(const RuntimeRecord *rec, size_t n_lines, long live_delta) {
        long live = (long) rec->n_live + live_delta;
        return rec->n_lines + n_lines > 2 * (size_t) (live > 0 ? live : 0) + RUNTIME_COMPACT_SLACK;
}

void runtime_record_append(RuntimeRecord *rec, const TextBuffer *lines, size_t n_lines, long live_delta,
                           const Store *s) {
        if (!rec->dir || !rec->bus_id[0] || (lines->len == 0 && !rec->failed))
                return;
        if (lines->oom)
                rec->failed = true;
        if (!rec->failed && rec->fd >= 0) {
                int r = append_bytes(rec, lines->data, lines->len);
                if (r >= 0) {
                        rec->n_lines += n_lines;
                        rec->n_live = (size_t) ((long) rec->n_live + live_delta);
                        if (!too_long(rec, 0, 0))
                                return;
                } else
                        rec->failed = true;
        }
        /* Too long, or a write failed (a full tmpfs): the whole record again. */
        rewrite_logged(rec, s);
}

bool runtime_record_rewrite_due(const RuntimeRecord *rec, size_t n_lines, long live_delta) {
        return rec->dir && rec->bus_id[0] && (rec->failed || rec->fd < 0 || too_long(rec, n_lines, live_delta));
}

void runtime_record_rewrite(RuntimeRecord *rec, const Store *s) {
        if (rec->dir && rec->bus_id[0])
                rewrite_logged(rec, s);
}

int runtime_record_hand_over(RuntimeRecord *rec, uid_t uid, gid_t gid) {
        if (!rec->dir)
                return 0;
        return durable_file_hand_over(rec->dir, RUNTIME_RECORD_NAME, uid, gid);
}
