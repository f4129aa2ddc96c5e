/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the request is bound to, and the container's CPUs, from the running
 * system: the init's pidfd or the container's own cgroup. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* *ret_pidfd: a pidfd of the container's init; *ret_cgroup_fd: the
 * container's cgroup v2 directory when the init runs in a cgroup other than
 * the runtime's (the hook's own), else -1. RequestFor() is given the cgroup
 * when there is one, else the pidfd. Returns 0 or a negative errno. */
int oci_target_open(int pid, int *ret_pidfd, int *ret_cgroup_fd, char *err, size_t err_size);
/* The container's CPUs: config_cpus (linux.resources.cpu.cpus) when set,
 * else the cgroup's cpuset.cpus.effective, else the init's affinity. */
int oci_container_cpus(const char *config_cpus, int cgroup_fd, int pid, uint32_t **ret, size_t *ret_n, char *err,
                       size_t err_size);
