/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Holds on the event loop: a pipe's read end watched for EPOLLHUP (the last
 * copy of its write end closed, anywhere), a pidfd for EPOLLIN (its process
 * exited), a cgroup's cgroup.events for EPOLLPRI, re-read at each wake-up.
 * Under a service manager, each hold's descriptor is also kept in its store
 * under one name per cookie (record/fd-name.h), so that across a restart or
 * a crash the pipe, the pidfd or the cgroup stays open (the kernel keeps the
 * bound: the device is in the store as well), and comes back at start to its
 * record entry, matched by cookie and kind. */

#include "record/holds.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "record/fd-name.h"
#include "util/log.h"

/* Holds that end at once (a thousand processes killed together) are read
 * this many a call from the private epoll set, and all end in one
 * transaction. */
#define HOLDS_BATCH 256
/* A wake-up this soon after holds ended is taken for the same burst. */
#define HOLDS_BURST_USEC 10000u

void holds_init(Holds *hs, sd_event *event, unsigned max, void (*ended)(Hold *first, void *userdata), void *userdata) {
        *hs = (Holds){ .event = event, .max = max, .ended = ended, .userdata = userdata, .epoll_fd = -1 };
        removals_init(&hs->removals);
}

void holds_done(Holds *hs) {
        for (size_t i = 0; i < hs->n_stored; i++)
                if (hs->stored[i].fd >= 0)
                        close(hs->stored[i].fd);
        free(hs->stored);
        hs->stored = NULL;
        hs->n_stored = 0;
        for (Hold *h = hs->head, *next; h; h = next) {
                next = h->next;
                hold_free(h);
        }
        removals_done(&hs->removals);
        hs->source = sd_event_source_disable_unref(hs->source);
        if (hs->epoll_fd >= 0)
                close(hs->epoll_fd);
        hs->epoll_fd = -1;
}

static void hold_unstore(Hold *h);

/* The descriptor h is watched by: cgroup.events for a cgroup, else its own. */
static int watch_fd(const Hold *h) {
        return h->events_fd >= 0 ? h->events_fd : h->fd;
}

/* Out of the epoll set before its descriptor is closed: the set watches the
 * open file, which a copy elsewhere (the store's, a holder's) keeps open. */
static void unwatch(Hold *h) {
        if (h->watched)
                (void) epoll_ctl(h->holds->epoll_fd, EPOLL_CTL_DEL, watch_fd(h), NULL);
        h->watched = false;
}

/* A descriptor hold's pipe read end is watched one-shot: once its HUP was
 * read, the set reports it no more, and it need not leave the set — it
 * leaves by itself when the file is released (pmqosd's close, the store's
 * once told to let go; nobody else ever has this end). When a thousand
 * processes die holding ten thousand, the epoll_ctl() saved for each is a
 * third of the release (measured: all HUPs read in 21.6 → 15.4 ms, median of
 * 12). A pidfd is one-shot too (its exit is reported once), but the caller's
 * copy may outlive ours: it leaves the set in hold_free(), after the kernel
 * write, not before it. A cgroup's file is watched on (another change is
 * not its end): it leaves the set at once. */
static void unwatch_fired(Hold *h) {
        if (h->kind == HOLD_FD)
                h->watched = false;
        else if (h->kind == HOLD_CGROUP)
                unwatch(h);
}

Hold *hold_free(Hold *h) {
        if (!h)
                return NULL;
        Holds *hs = h->holds;
        if (h->prev)
                h->prev->next = h->next;
        else
                hs->head = h->next;
        if (h->next)
                h->next->prev = h->prev;
        hs->n--;
        hold_unstore(h);
        unwatch(h);
        removal_unwatch(&hs->removals, &h->removal);
        if (h->fd >= 0)
                close(h->fd);
        if (h->events_fd >= 0)
                close(h->events_fd);
        free(h);
        return NULL;
}

/* Its request ended otherwise (cancelled, expired, at shutdown). */
static void on_emptied(RequestOwner *o) {
        Hold *h = (Hold *) o;
        if (!h->ending)
                hold_free(h);
}

bool cgroup_events_populated(const char *text, size_t len) {
        /* "populated 0\nfrozen 0\n": one "key value" a line. */
        for (size_t i = 0; i < len;) {
                const char *line = text + i, *nl = memchr(line, '\n', len - i);
                size_t n = nl ? (size_t) (nl - line) : len - i;
                if (n == 11 && memcmp(line, "populated 1", 11) == 0)
                        return true;
                i += n + 1;
        }
        return false;
}

/* Negative: cannot be read (-ENODEV: the cgroup is gone); else whether it is populated. */
static int read_populated(int events_fd) {
        char buf[256];
        ssize_t n = pread(events_fd, buf, sizeof(buf), 0);
        if (n < 0)
                return -errno;
        return cgroup_events_populated(buf, (size_t) n);
}

/* Whether what h serves is gone, at revents from the epoll set. */
static bool hold_over(const Hold *h, uint32_t revents) {
        /* Another change of a cgroup (frozen, a process moved): still populated. */
        return h->kind != HOLD_CGROUP || (revents & (EPOLLERR | EPOLLHUP)) || read_populated(h->events_fd) <= 0;
}

/* The holds on the list of first end together: their requests in one
 * transaction (ended()), then each hold is freed. */
static void end_all(Holds *hs, Hold *first) {
        if (!first)
                return;
        hs->ended(first, hs->userdata);
        for (Hold *h = first, *next; h; h = next) {
                next = h->ended_next;
                hold_free(h);
        }
}

/* h's target is gone: h leaves the set at once and joins the list of those
 * that end together (once: a cgroup may be told twice, by its cgroup.events
 * and by its parent directory). */
static void mark_ended(Hold *h, Hold **ended) {
        if (h->ending)
                return;
        unwatch_fired(h);
        h->ending = true;
        h->ended_next = *ended;
        *ended = h;
}

/* A held cgroup's parent directory changed (a cgroup of it removed): is it
 * still there, and populated? */
static bool check_cgroup(RemovalLink *l, void *userdata) {
        Hold *h = (Hold *) ((char *) l - offsetof(Hold, removal));
        if (!h->ending && hold_over(h, 0))
                mark_ended(h, userdata);
        return !h->ending;
}

/* The private epoll set has a hold ready: every hold ready now is read (a
 * batch a call, until a call returns less than a batch: the set is empty),
 * those that ended leave the set at once and end together. */
static int on_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Holds *hs = userdata;
        struct epoll_event events[HOLDS_BATCH];
        Hold *ended = NULL;
        int n;

        (void) s, (void) revents;
        /* Woken again right after holds ended: a dying process closing its
         * descriptors one by one, each close waking pmqosd, which preempts
         * it where they share a CPU. It runs first and closes the rest, read
         * in one go. A lone release is not delayed by the yield. */
        uint64_t now = 0;
        (void) sd_event_now(hs->event, CLOCK_MONOTONIC, &now);
        if (hs->ended_usec > 0 && now - hs->ended_usec < HOLDS_BURST_USEC)
                (void) sched_yield();
        do {
                n = epoll_wait(fd, events, HOLDS_BATCH, 0);
                for (int i = 0; i < n; i++) {
                        if (events[i].data.ptr == hs) {
                                removals_read(&hs->removals, check_cgroup, &ended);
                                continue;
                        }
                        Hold *h = events[i].data.ptr;
                        if (!h->ending && hold_over(h, events[i].events))
                                mark_ended(h, &ended);
                }
        } while (n == HOLDS_BATCH || (n < 0 && errno == EINTR));
        if (n < 0 && errno != EINTR)
                log_warning("Cannot read which held requests ended: %s", strerror(errno));
        if (ended)
                hs->ended_usec = now;
        end_all(hs, ended);
        return 0;
}

/* The private epoll set, and its one source on the event loop, at the first hold. */
static int holds_watch(Holds *hs) {
        if (hs->epoll_fd >= 0)
                return 0;
        int fd = epoll_create1(EPOLL_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = sd_event_add_io(hs->event, &hs->source, fd, EPOLLIN, on_ready, hs);
        if (r < 0) {
                close(fd);
                return r;
        }
        hs->epoll_fd = fd;
        return 0;
}

static int hold_new(Holds *hs, RequestHold kind, int fd, int events_fd, uint32_t events, Hold **ret) {
        int r = holds_watch(hs);
        if (r < 0)
                return r;
        Hold *h = calloc(1, sizeof(Hold));
        if (!h)
                return -ENOMEM;
        *h = (Hold){ .owner = { .emptied = on_emptied }, .holds = hs, .kind = kind, .fd = fd, .events_fd = events_fd };
        struct epoll_event ev = { .events = events, .data.ptr = h };
        if (epoll_ctl(hs->epoll_fd, EPOLL_CTL_ADD, watch_fd(h), &ev) < 0) {
                r = -errno;
                free(h);
                return r < 0 ? r : -EIO;
        }
        h->watched = true;
        h->next = hs->head;
        if (hs->head)
                hs->head->prev = h;
        hs->head = h;
        hs->n++;
        *ret = h;
        return 0;
}

int hold_new_fd(Holds *hs, int fd, Hold **ret, int *ret_peer_fd) {
        int p[2] = { fd, -1 };

        if (fd < 0 && pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        /* No EPOLLIN: what a holder writes into its end wakes nobody; the
         * last close is EPOLLHUP, which epoll always reports. */
        int r = hold_new(hs, HOLD_FD, p[0], -1, EPOLLONESHOT, ret);
        if (r < 0) {
                if (fd < 0)
                        close(p[0]);
                if (p[1] >= 0)
                        close(p[1]);
                return r;
        }
        if (ret_peer_fd)
                *ret_peer_fd = p[1];
        else if (p[1] >= 0)
                close(p[1]);
        return 0;
}

int hold_new_process(Holds *hs, int pidfd, Hold **ret) {
        return hold_new(hs, HOLD_PROCESS, pidfd, -1, EPOLLIN | EPOLLONESHOT, ret);
}

/* h's cgroup's parent directory watched too, its inotify descriptor in the
 * epoll set with the first. */
static int watch_removal(Holds *hs, Hold *h) {
        int new_fd;
        int r = removal_watch(&hs->removals, &h->removal, h->fd, &new_fd);
        if (r < 0 || new_fd < 0)
                return r;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = hs };
        if (epoll_ctl(hs->epoll_fd, EPOLL_CTL_ADD, new_fd, &ev) < 0) {
                r = -errno;
                removal_unwatch(&hs->removals, &h->removal);
                removals_done(&hs->removals); /* the descriptor too: the next hold tries anew */
                removals_init(&hs->removals);
                return r;
        }
        return 0;
}

int hold_new_cgroup(Holds *hs, int dir_fd, Hold **ret) {
        int events_fd = openat(dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (events_fd < 0)
                return errno == ENOENT ? -ENOENT : -errno;
        /* Watched first (cgroup.events, then the removal), read second: a
         * change in between wakes us. */
        int r = hold_new(hs, HOLD_CGROUP, dir_fd, events_fd, EPOLLPRI, ret);
        if (r < 0) {
                close(events_fd);
                return r;
        }
        r = watch_removal(hs, *ret);
        if (r >= 0)
                r = read_populated(events_fd);
        if (r <= 0) {
                (*ret)->fd = -1; /* dir_fd stays the caller's on failure */
                *ret = hold_free(*ret);
                return r == 0 || r == -ENODEV ? -ECHILD : r;
        }
        return 0;
}

/* The service manager's store. */

static FdNameKind name_kind(RequestHold kind) {
        return kind == HOLD_PROCESS ? FD_NAME_PROCESS : kind == HOLD_CGROUP ? FD_NAME_CGROUP : FD_NAME_HOLD;
}

static void notify_raw(const char *what, const char *name, const int *fd) {
        char state[64];
        snprintf(state, sizeof(state), "%s\nFDNAME=%s", what, name);
        int r = fd ? sd_pid_notify_with_fds(0, false, state, fd, 1) : sd_notify(false, state);
        if (r <= 0)
                log_warning("Cannot %s %s in the service manager's descriptor store (%s)%s.", fd ? "keep" : "remove",
                            name, r < 0 ? strerror(-r) : "not supported",
                            fd ? ": its request ends if pmqosd restarts. Is FileDescriptorStoreMax= large enough?"
                               : "");
}

static void notify_name(const char *what, RequestHold kind, uint32_t cookie, const int *fd) {
        char name[FD_NAME_MAX];
        notify_raw(what, fd_name_format(name, name_kind(kind), cookie), fd);
}

void hold_store(Hold *h, uint32_t cookie) {
        if (!h->holds->fdstore || h->fd < 0 || cookie == 0)
                return;
        notify_name("FDSTORE=1", h->kind, cookie, &h->fd);
        h->stored_cookie = cookie;
}

static void hold_unstore(Hold *h) {
        if (h->stored_cookie && h->holds->fdstore)
                notify_name("FDSTOREREMOVE=1", h->kind, h->stored_cookie, NULL);
        h->stored_cookie = 0;
}

static int hold_on(Holds *hs, RequestHold kind, int fd, Hold **ret) {
        switch (kind) {
        case HOLD_FD:
                return hold_new_fd(hs, fd, ret, NULL);
        case HOLD_PROCESS:
                return hold_new_process(hs, fd, ret);
        default:
                return hold_new_cgroup(hs, fd, ret);
        }
}

static int stored_compare(const void *a, const void *b) {
        const StoredFd *x = a, *y = b;
        return x->cookie < y->cookie ? -1 : x->cookie > y->cookie;
}

void holds_set_stored(Holds *hs, StoredFd *stored, size_t n) {
        assert(!hs->stored);
        if (n > 1)
                qsort(stored, n, sizeof(*stored), stored_compare);
        hs->stored = stored;
        hs->n_stored = n;
}

Hold *holds_take_stored(Holds *hs, RequestHold kind, uint32_t cookie) {
        size_t lo = 0, hi = hs->n_stored;
        while (lo < hi) { /* the first entry of cookie, if any */
                size_t mid = lo + (hi - lo) / 2;
                if (hs->stored[mid].cookie < cookie)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < hs->n_stored && hs->stored[i].cookie == cookie; i++) {
                StoredFd *s = &hs->stored[i];
                if (s->fd < 0 || s->kind != kind)
                        continue;
                Hold *h = NULL;
                int fd = s->fd;
                s->fd = -1;
                int r = hold_on(hs, kind, fd, &h);
                if (r < 0 || !h) {
                        /* A cgroup emptied while pmqosd was away (-ECHILD), or no memory. */
                        close(fd);
                        if (hs->fdstore)
                                notify_raw("FDSTOREREMOVE=1", s->name, NULL);
                        return NULL;
                }
                char name[FD_NAME_MAX];
                if (strcmp(s->name, fd_name_format(name, name_kind(kind), cookie)) == 0)
                        h->stored_cookie = cookie; /* in the store already */
                else if (hs->fdstore) {
                        /* Stored by 0.1.0: kept again under today's name. */
                        notify_raw("FDSTOREREMOVE=1", s->name, NULL);
                        hold_store(h, cookie);
                }
                return h;
        }
        return NULL;
}

/* A live hold whose name is (kind, cookie), or NULL. */
static Hold *find_stored(Holds *hs, RequestHold kind, uint32_t cookie) {
        for (Hold *h = hs->head; h; h = h->next)
                if (h->stored_cookie == cookie && h->kind == kind)
                        return h;
        return NULL;
}

void holds_drop_stored(Holds *hs) {
        size_t n = 0;
        for (size_t i = 0; i < hs->n_stored; i++) {
                StoredFd *s = &hs->stored[i];
                if (s->fd < 0)
                        continue;
                log_warning("Closing descriptor %d (\"%s\") passed by the service manager: no request of the runtime "
                            "record is request %" PRIu32 " of that kind.",
                            s->fd, s->name, s->cookie);
                close(s->fd);
                s->fd = -1;
                n++;
                if (!hs->fdstore)
                        continue;
                notify_raw("FDSTOREREMOVE=1", s->name, NULL);
                /* The removal took every entry of that name: a duplicate of a
                 * live hold's goes back in. */
                Hold *live = find_stored(hs, s->kind, s->cookie);
                if (live)
                        notify_name("FDSTORE=1", live->kind, live->stored_cookie, &live->fd);
        }
        free(hs->stored);
        hs->stored = NULL;
        hs->n_stored = 0;
        if (n > 0)
                log_info("Closed %zu stored descriptor(s) that no recorded request claimed.", n);
}
