/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Requests that live as long as a descriptor, a process or a cgroup rather
 * than a bus connection: each is one Hold, the owner of its one request,
 * told by the kernel (epoll) when what it serves is gone — no bus message. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "model/store.h"

typedef struct Hold Hold;

typedef struct Holds {
        sd_event *event;
        Hold *head;
        unsigned n;   /* live holds: each keeps one or two descriptors open */
        unsigned max; /* MaxHeldRequests */
        /* What h serves is gone: the request it owns is to end now (the
         * manager drops h->owner); h is freed right after. */
        void (*ended)(Hold *h, void *userdata);
        void *userdata;
} Holds;

struct Hold {
        RequestOwner owner; /* of one request; its emptied() frees the hold when that request ends otherwise */
        Holds *holds;
        RequestHold kind;
        int fd;        /* ours: the pipe's read end (HOLD_FD), the pidfd, or the cgroup's directory */
        int events_fd; /* HOLD_CGROUP: the cgroup's cgroup.events; else -1 */
        sd_event_source *source;
        bool ending; /* ended() runs: the request goes, the hold stays until it returned */
        Hold *prev, *next;
};

void holds_init(Holds *hs, sd_event *event, unsigned max, void (*ended)(Hold *h, void *userdata), void *userdata);
/* Frees every hold; their requests are the store's (store_done() first frees
 * those, and with them the holds). */
void holds_done(Holds *hs);

/* A pipe: the hold keeps its read end and is told when every copy of the
 * write end, *ret_peer_fd (the caller's to send and close), is closed.
 * fd >= 0 instead: that read end, taken back from the service manager. */
int hold_new_fd(Holds *hs, int fd, Hold **ret, int *ret_peer_fd);
/* Takes pidfd: told when that process exits. */
int hold_new_process(Holds *hs, int pidfd, Hold **ret);
/* Takes dir_fd (a cgroup v2 directory): told when cgroup.events says
 * "populated 0", or the cgroup is removed. -ENOENT: no cgroup.events (the
 * root cgroup); -ECHILD: already empty. */
int hold_new_cgroup(Holds *hs, int dir_fd, Hold **ret);
/* Closes its descriptors; its request, if any, is not touched. NULL-safe. */
Hold *hold_free(Hold *h);

/* The request h owns, or NULL. */
static inline Request *hold_request(const Hold *h) {
        return h->owner.head;
}

/* Whether a cgroup.events text says the cgroup has a process in it. */
bool cgroup_events_populated(const char *text, size_t len);
