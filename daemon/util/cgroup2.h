/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The unified cgroup hierarchy as this mount namespace shows it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The cgroup at path CG of the unified hierarchy ("/a/b"), opened
 * O_DIRECTORY through a cgroup2 mount of this mount namespace that shows
 * the whole tree, never leaving it (no symbolic link, no other file system
 * mounted on the way). The last such mount listed is tried first: one mounted
 * over another hides it (a container's cgroup2 at /sys/fs/cgroup over a
 * hybrid host's /sys/fs/cgroup/unified). A descriptor, or -1 with errno. */
int cgroup2_open(const char *cg);
/* The same by its full path in this mount namespace ("/sys/fs/cgroup/a/b"),
 * opened only below the cgroup2 mount that path starts with. */
int cgroup2_open_full(const char *path);

/* The cgroup2 path ("/a/b") of a /proc/PID/cgroup text's "0::" line, less
 * its last up components, into buf. -ENOENT: no such line, not that deep,
 * or outside this cgroup namespace ("/.."); -ENAMETOOLONG. */
int cgroup2_path_from_proc(const char *text, size_t len, unsigned up, char *buf, size_t size);

/* The cgroup v2 directory dir_fd (opened through any mount, of any mount
 * namespace, of any subtree), opened anew through this namespace's own
 * cgroup2 mount: found by the path the kernel gives a thread in it or
 * below it (/proc/TID/cgroup, in this cgroup namespace), and checked to be
 * cgroup id (its inode). Never by a path the descriptor's mount shows. A
 * descriptor; -ECHILD: no thread in it or in the first cgroups below it;
 * -EREMOTE: not found in this namespace's hierarchy. */
int cgroup2_reopen_here(int dir_fd, uint64_t id);
