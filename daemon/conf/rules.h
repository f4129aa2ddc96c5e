/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The unit rules on disk: *.conf in /etc/pmqos/rules.d and
 * /usr/lib/pmqos/rules.d, a file in the first overriding one of the same name
 * in the second (an empty file, or a link to /dev/null, masks it), read all
 * or nothing. */
#pragma once

#include <stddef.h>

#include "conf/rule-format.h"

#define PMQOS_RULES_DIR_ETC "/etc/pmqos/rules.d"
#define PMQOS_RULES_DIR_LIB "/usr/lib/pmqos/rules.d"
/* More is not a configuration: every rule costs a bus match. */
#define RULES_MAX 128u

typedef struct RuleSet {
        Rule *rules; /* by file name */
        size_t n;
} RuleSet;

/* Reads the rules of dirs (earlier ones win by file name; a missing
 * directory has none). Returns 0, or a negative errno with "FILE:LINE:
 * problem" (or what else went wrong) in err and *ret untouched. */
int rules_load(const char *const *dirs, size_t n_dirs, RuleSet *ret, char *err, size_t err_size);
void rule_set_done(RuleSet *s);
