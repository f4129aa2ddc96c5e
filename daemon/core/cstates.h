/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* C-state names where the administrator writes a latency (pmqosd.conf's
 * floors, a unit rule's Latency=): conf/ keeps them as written, and here,
 * the lowest layer that sees both conf/ and sys/, they become microseconds
 * against this machine's cpuidle (util/cpuidle.h), when the files are read. */
#pragma once

#include <stddef.h>

#include "conf/config.h"
#include "conf/rules.h"

/* c's C-state names (set by the file path) into its floors, the names
 * dropped. Returns 0; -EINVAL with "PATH:LINE: Key: invalid value \"NAME\",
 * expected …" in err and c's floors untouched (an unknown name, or no
 * cpuidle under sysfs_root); or -ENOMEM. */
int core_resolve_config_cstates(Config *c, const char *path, const char *sysfs_root, char *err, size_t err_size);

/* Each rule's Latency= given as a name into its latency. Returns as above,
 * "FILE:LINE: Latency: …" in err and no rule changed. */
int core_resolve_rule_cstates(RuleSet *s, const char *sysfs_root, char *err, size_t err_size);
