/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The removal of held cgroups, told by inotify on each one's parent
 * directory (IN_DELETE): cgroup.events alone may never say that a cgroup
 * removed right after its last process left is empty (the kernel sends at
 * most one notice per 10 ms, and drops the one it delayed at the removal). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/hashmap.h"

typedef struct RemovalWatch RemovalWatch;

/* Where a watched cgroup is, embedded in its hold. */
typedef struct RemovalLink {
        RemovalWatch *watch;             /* on its parent directory, or NULL */
        struct RemovalLink *prev, *next; /* the other cgroups of that directory */
        int dir_fd;                      /* the cgroup's directory (borrowed: pmqosd's own descriptor of it) */
} RemovalLink;

/* One inotify watch: the parent directory of one or more held cgroups. */
struct RemovalWatch {
        uint32_t wd;       /* the key in Removals.watches */
        RemovalLink *head; /* the cgroups in that directory */
};

typedef struct Removals {
        int inotify_fd;  /* from the first watch; else -1 */
        Hashmap watches; /* wd → RemovalWatch */
} Removals;

void removals_init(Removals *rs);
void removals_done(Removals *rs);

/* Watches the directory that holds the cgroup dir_fd (pmqosd's own
 * descriptor of it: its ".." stays on cgroup2); a new inotify descriptor,
 * *ret_new_fd, for the caller to add to its epoll set, when this is the
 * first; else -1 there. */
int removal_watch(Removals *rs, RemovalLink *l, int dir_fd, int *ret_new_fd);
/* l watched no more; the watch goes with its last cgroup. NULL-safe watch. */
void removal_unwatch(Removals *rs, RemovalLink *l);

/* Reads one batch of inotify events (the descriptor stays readable for
 * the rest); calls check(l) once for each cgroup whose directory changed
 * (every one when the queue overflowed). check() says
 * whether that cgroup is still there: those of a watch the kernel dropped
 * are then watched anew. */
void removals_read(Removals *rs, bool (*check)(RemovalLink *l, void *userdata), void *userdata);
