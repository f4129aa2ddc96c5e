/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A cgroup is removed by rmdir(2) only, which tells its parent directory's
 * inotify watches (IN_DELETE) reliably: not rate-limited like cgroup.events,
 * and unlike IN_DELETE_SELF not held back while a descriptor of the cgroup
 * (pmqosd's own) is open. The parent is ".." of pmqosd's own descriptor of
 * the cgroup, opened through pmqosd's own cgroup2 mount, so it stays on
 * cgroup2 (".." of a caller's mount of a subtree could lead anywhere).
 * Cgroups in one directory share its watch (inotify gives an inode one wd).
 * An event only says "look": the caller re-reads each cgroup.events, whose
 * read fails once the cgroup is gone. */

#include "util/cgroup-removal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "util/log.h"

#define REMOVAL_MASK (IN_DELETE | IN_ONLYDIR)

void removals_init(Removals *rs) {
        rs->inotify_fd = -1;
        hashmap_init(&rs->watches, &hashmap_u32_ops);
}

void removals_done(Removals *rs) {
        void *v;
        for (size_t i = 0; hashmap_next(&rs->watches, &i, &v);)
                free(v);
        hashmap_clear(&rs->watches);
        if (rs->inotify_fd >= 0)
                close(rs->inotify_fd);
        rs->inotify_fd = -1;
}

/* The watch descriptor of the directory the cgroup dir_fd is in. */
static int add_parent(int inotify_fd, int dir_fd) {
        char path[64];
        int parent = openat(dir_fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0)
                return -errno;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", parent);
        int wd = inotify_add_watch(inotify_fd, path, REMOVAL_MASK);
        int e = errno;
        close(parent);
        return wd < 0 ? -e : wd;
}

int removal_watch(Removals *rs, RemovalLink *l, int dir_fd, int *ret_new_fd) {
        *ret_new_fd = -1;
        if (rs->inotify_fd < 0) {
                rs->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
                if (rs->inotify_fd < 0)
                        return -errno;
                *ret_new_fd = rs->inotify_fd;
        }
        int wd = add_parent(rs->inotify_fd, dir_fd);
        if (wd < 0)
                return wd;
        uint32_t key = (uint32_t) wd;
        RemovalWatch *w = hashmap_get(&rs->watches, &key);
        if (!w) {
                w = calloc(1, sizeof(RemovalWatch));
                if (w)
                        w->wd = key;
                if (!w || hashmap_put(&rs->watches, &w->wd, w) < 0) {
                        free(w);
                        (void) inotify_rm_watch(rs->inotify_fd, wd);
                        return -ENOMEM;
                }
        }
        *l = (RemovalLink){ .watch = w, .next = w->head, .dir_fd = dir_fd };
        if (w->head)
                w->head->prev = l;
        w->head = l;
        return 0;
}

/* Off its watch's list; the watch freed (and, unless the kernel dropped it
 * already, removed) with its last cgroup. */
static void unlink_one(Removals *rs, RemovalLink *l, bool dropped) {
        RemovalWatch *w = l->watch;
        if (l->prev)
                l->prev->next = l->next;
        else
                w->head = l->next;
        if (l->next)
                l->next->prev = l->prev;
        l->watch = NULL;
        l->prev = l->next = NULL;
        if (w->head)
                return;
        if (!dropped) {
                (void) hashmap_remove(&rs->watches, &w->wd);
                (void) inotify_rm_watch(rs->inotify_fd, (int) w->wd);
        }
        free(w);
}

void removal_unwatch(Removals *rs, RemovalLink *l) {
        if (l->watch)
                unlink_one(rs, l, false);
}

/* The kernel dropped w (its directory gone, or its file system): each of
 * its cgroups is checked, and those still there watched anew. */
static void on_dropped(Removals *rs, RemovalWatch *w, bool (*check)(RemovalLink *l, void *userdata), void *userdata) {
        (void) hashmap_remove(&rs->watches, &w->wd);
        for (RemovalLink *l = w->head, *next; l; l = next) {
                next = l->next; /* w is freed with its last cgroup */
                bool there = check(l, userdata);
                int ignored, r = 0;
                unlink_one(rs, l, true);
                if (there)
                        r = removal_watch(rs, l, l->dir_fd, &ignored);
                if (r < 0)
                        log_warning("Cannot watch for the removal of a held cgroup anew: %s.", strerror(-r));
        }
}

/* Each watch's cgroups checked once a batch: a removal loop beside them
 * gives one event a removal, each a re-read of every cgroup there. */
static bool seen_before(uint32_t *seen, size_t *n_seen, uint32_t wd) {
        for (size_t i = 0; i < *n_seen; i++)
                if (seen[i] == wd)
                        return true;
        seen[(*n_seen)++] = wd;
        return false;
}

static void on_event(Removals *rs, const struct inotify_event *ev, bool (*check)(RemovalLink *l, void *userdata),
                     void *userdata, uint32_t *seen, size_t *n_seen) {
        void *v;
        if (ev->mask & IN_Q_OVERFLOW) {
                for (size_t i = 0; hashmap_next(&rs->watches, &i, &v);)
                        for (RemovalLink *l = ((RemovalWatch *) v)->head; l; l = l->next)
                                (void) check(l, userdata);
                return;
        }
        uint32_t key = (uint32_t) ev->wd;
        RemovalWatch *w = hashmap_get(&rs->watches, &key);
        if (!w)
                return; /* removed by us: its IN_IGNORED */
        if (ev->mask & IN_IGNORED) {
                on_dropped(rs, w, check, userdata);
                return;
        }
        if (seen_before(seen, n_seen, key))
                return;
        for (RemovalLink *l = w->head; l; l = l->next)
                (void) check(l, userdata);
}

/* One read a wake-up: the descriptor stays readable, and the loop comes
 * back to it after what else is ready (someone removing cgroups as fast
 * as the kernel allows kept it here for as long). */
void removals_read(Removals *rs, bool (*check)(RemovalLink *l, void *userdata), void *userdata) {
        _Alignas(struct inotify_event) char buf[4096];
        uint32_t seen[sizeof(buf) / sizeof(struct inotify_event)];
        size_t n_seen = 0;
        ssize_t n;
        do
                n = read(rs->inotify_fd, buf, sizeof(buf));
        while (n < 0 && errno == EINTR);
        for (char *p = buf; n > 0 && p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *) p;
                on_event(rs, ev, check, userdata, seen, &n_seen);
                p += sizeof(*ev) + ev->len;
        }
}
