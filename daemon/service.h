/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosd and its service manager (service.c): the descriptor store, the
 * restart job, and the privilege drop. */
#pragma once

#include <pwd.h>
#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "bus/manager.h"
#include "core/core.h"
#include "record/runtime-record.h"

/* A restart under systemd: the devices' descriptors come back from the
 * store (LISTEN_FDS, by name) into core, the held requests' ones (named by
 * record/fd-name.h) kept for service_store_device_fds(), each to be matched
 * to its record entry; anything else passed is closed. */
void service_take_stored_fds(CoreConfig *core);
/* The service manager keeps a copy of the devices' descriptors, so that the
 * kernel keeps our bounds while we restart; a stop releases them. The held
 * requests' ones taken back go to m's holds, and new ones go to the store. */
void service_store_device_fds(Manager *m, const CoreConfig *core);
/* Raises RLIMIT_NOFILE's soft limit to the hard one, as systemd's daemons
 * do; one warning when that is still short of MaxHeldRequests held requests
 * (two descriptors each at most: a cgroup and its cgroup.events) besides
 * everything else, and a debug line when short of the descriptors of every
 * call that may wait. Returns how many waiting calls'
 * messages the limit leaves room for (calls_set_max_kept()). */
unsigned service_raise_fd_limit(const Limits *l);
/* Whether the service manager stops us only to start us again (systemctl
 * restart, a package upgrade): our unit's pending job is a restart. */
bool service_restart_pending(sd_bus *bus);
/* Becomes pw: no root, no capabilities, no way back, the state directory
 * and the runtime record handed over first. Logged on failure. */
int service_drop_privileges(const struct passwd *pw, const char *state_dir, RuntimeRecord *record);
