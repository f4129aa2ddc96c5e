/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The unified cgroup hierarchy as this mount namespace shows it. */
#pragma once

/* The cgroup at path CG of the unified hierarchy ("/a/b"), opened
 * O_DIRECTORY through a cgroup2 mount of this mount namespace that shows
 * the whole tree. The last such mount listed is tried first: one mounted
 * over another hides it (a container's cgroup2 at /sys/fs/cgroup over a
 * hybrid host's /sys/fs/cgroup/unified). A descriptor, or -1 with errno. */
int cgroup2_open(const char *cg);
