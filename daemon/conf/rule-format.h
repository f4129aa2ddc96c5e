/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A unit rule, /etc/pmqos/rules.d/NAME.conf: "while this systemd unit is
 * active, hold this bound". One [Rule] section of Key=Value lines. Pure
 * parsing here; finding and reading the files is rules.c's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RULE_FILE_MAX (64u * 1024u)
#define RULE_UNIT_MAX 255u /* systemd's UNIT_NAME_MAX */

typedef struct Rule {
        char *file; /* the path it was read from: shown as "rule FILE" */
        char *unit; /* a valid unit name with a type suffix, not a template */
        int32_t latency;
        /* Latency= as a C-state name ("C1E"), kept as written with its line
         * for the loader to resolve into latency (options.c): what it stands
         * for is the machine's, which conf/ does not read. NULL: a number. */
        char *latency_cstate;
        unsigned latency_line;
        uint32_t *cpus; /* sorted, unique; NULL: the global device */
        size_t n_cpus;
        char *reason; /* NULL: none */
} Rule;

/* Parses text (the contents of path) into *ret. Returns 0, or -EINVAL with
 * "PATH:LINE: problem" in err (*ret untouched), or -ENOMEM. */
int rule_parse(const char *path, const char *text, size_t len, Rule *ret, char *err, size_t err_size);
void rule_done(Rule *r);
/* Whether two rules ask for the same thing (file, unit, value, CPUs,
 * reason): a name and the number it stood for ask for the same. */
bool rule_equal(const Rule *a, const Rule *b);
/* Whether name is a unit name systemd could have: [A-Za-z0-9:_.\-@] and "\xNN"
 * escapes' backslash, 1 … 255 characters, a known type suffix, a non-empty
 * instance where there is an "@". */
bool rule_unit_name_valid(const char *name);
