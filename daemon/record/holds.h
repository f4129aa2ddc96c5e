/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Requests that live as long as a descriptor, a process or a cgroup rather
 * than a bus connection: each is one Hold, the owner of its one request,
 * told by the kernel (epoll) when what it serves is gone — no bus message.
 * All holds are in one private epoll set, one source on the event loop:
 * the holds that end at once are read together and end in one transaction. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/cgroup-removal.h"
#include "model/store.h"
#include "record/fd-name.h"

typedef struct Hold Hold;

/* A held request's descriptor handed back by the service manager's store
 * at start (named by record/fd-name.h), waiting for its record entry. */
typedef struct StoredFd {
        RequestHold kind;
        uint32_t cookie;
        int fd;                 /* -1 once taken */
        char name[FD_NAME_MAX]; /* as the store named it: 0.1.0's names differ */
} StoredFd;

typedef struct Holds {
        sd_event *event;
        int epoll_fd;            /* the private epoll set of every hold's descriptor, from the first hold; else -1 */
        sd_event_source *source; /* epoll_fd on the event loop */
        Removals removals;       /* held cgroups' parent directories, in the epoll set (its data: the Holds) */
        uint64_t ended_usec;     /* CLOCK_MONOTONIC: when holds last ended, or 0 */
        Hold *head;
        unsigned n;   /* live holds: each keeps one or two descriptors open */
        unsigned max; /* MaxHeldRequests */
        /* What the holds on the list of first (through ended_next) serve
         * is gone: the requests they own are to end now, together (the
         * manager drops them in one transaction); each is freed right after. */
        void (*ended)(Hold *first, void *userdata);
        void *userdata;
        /* Under a service manager with a store: each hold's descriptor is
         * kept there too (hold_store()), and removed when its request ends.
         * Cleared at shutdown, so a stop or restart removes none. */
        bool fdstore;
        StoredFd *stored; /* taken at start, until holds_drop_stored() */
        size_t n_stored;
} Holds;

struct Hold {
        RequestOwner owner; /* of one request; its emptied() frees the hold when that request ends otherwise */
        Holds *holds;
        RequestHold kind;
        int fd;                 /* ours: the pipe's read end (HOLD_FD), the pidfd, or the cgroup's directory */
        int events_fd;          /* HOLD_CGROUP: the cgroup's cgroup.events; else -1 */
        bool watched;           /* in Holds.epoll_fd, its data the hold */
        bool ending;            /* ended() runs: the request goes, the hold stays until it returned */
        uint32_t stored_cookie; /* its name in the service manager's store, or 0 */
        Hold *prev, *next;
        Hold *ended_next;    /* ending: the next hold that ends with it */
        RemovalLink removal; /* HOLD_CGROUP: its parent directory watched (cgroup-removal.h) */
};

void holds_init(Holds *hs, sd_event *event, unsigned max, void (*ended)(Hold *first, void *userdata), void *userdata);
/* Frees every hold; their requests are the store's (store_done() first frees
 * those, and with them the holds). */
void holds_done(Holds *hs);

/* A pipe: the hold keeps its read end and is told when every copy of the
 * write end, *ret_peer_fd (the caller's to send and close), is closed.
 * fd >= 0 instead: that read end, taken back from the service manager. */
int hold_new_fd(Holds *hs, int fd, Hold **ret, int *ret_peer_fd);
/* Takes pidfd: told when that process exits. */
int hold_new_process(Holds *hs, int pidfd, Hold **ret);
/* Takes dir_fd (a cgroup v2 directory, opened through pmqosd's own cgroup2
 * mount): told when cgroup.events says "populated 0", or when its parent
 * directory says a cgroup was removed and cgroup.events says so or can be
 * read no more. -ENOENT: no cgroup.events (the root cgroup); -ECHILD:
 * already empty or removed. */
int hold_new_cgroup(Holds *hs, int dir_fd, Hold **ret);
/* Closes its descriptors; its request, if any, is not touched. NULL-safe. */
Hold *hold_free(Hold *h);

/* Hands h's descriptor (the pipe's read end, the pidfd, the cgroup's
 * directory) to the service manager's store as the name of (h->kind,
 * cookie), if Holds.fdstore; hold_free() removes it again. */
void hold_store(Hold *h, uint32_t cookie);
/* Takes stored (malloc'd, n entries): the descriptors the store handed back
 * at start, kept sorted by cookie so that each record entry finds its own
 * in O(log n) (10,000 held requests made a quadratic take-back). */
void holds_set_stored(Holds *hs, StoredFd *stored, size_t n);
/* The hold of cookie's descriptor handed back by the store, if one of
 * kind came back: a new hold on it, in the store already; else NULL (none,
 * or what it served is gone: the descriptor is closed and removed). */
Hold *holds_take_stored(Holds *hs, RequestHold kind, uint32_t cookie);
/* Closes (and removes from the store) every descriptor the store handed
 * back that no record entry took, saying so. */
void holds_drop_stored(Holds *hs);

/* The request h owns, or NULL. */
static inline Request *hold_request(const Hold *h) {
        return h->owner.head;
}

/* Whether a cgroup.events text says the cgroup has a process in it. */
bool cgroup_events_populated(const char *text, size_t len);
