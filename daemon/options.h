/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosd's command line and pmqosd.conf(5) → one configuration (options.c). */
#pragma once

#include <pwd.h>
#include <stdbool.h>
#include <stddef.h>

#include "bus/manager.h"
#include "conf/config.h"
#include "conf/rules.h"

typedef struct Options {
        ManagerConfig config;
        const char *config_path;
        bool config_path_given;
        unsigned cli_set; /* CONFIG_SET_* given on the command line: they win over the file */
        bool upower_name;
        const char *user;
        bool verbose;
        bool check_config;         /* --check-config: read the files, say what is wrong, exit */
        const char *rules_dirs[2]; /* unit rules: the first directory's files win by name */
        size_t n_rules_dirs;
        ForeignPolicy foreign_writes; /* ForeignWrites= */
} Options;

/* Returns 1 to run, 0 to exit successfully (--help, --version), negative on
 * a usage error (said on stderr). */
int options_parse_argv(int argc, char *argv[], Options *o);

/* --check-config: reads the configuration file and the unit rules as a
 * start or a reload would, says on stderr what is wrong (file:line: key:
 * why, with the whole refused value), and returns the exit status: 0 when
 * both would be taken, 1 when not. Touches nothing else. */
int options_check_config(Options *o);

/* Reads the configuration file into o->config, keeping command-line values.
 * A missing default file is fine; a missing explicit one or a bad one is not
 * (logged). On error nothing in o->config changes. A StateDirectory= the
 * command line did not override comes back in *ret_state_dir (free() it). */
int options_load_config(Options *o, char **ret_state_dir);

/* The unit rules of o's directories, all or nothing (a bad one is logged). */
int options_load_rules(const Options *o, RuleSet *ret);

/* Looks --user up while the user database is still readable: *ret for
 * dropping privileges, and the state's owner and the helper's user in
 * o->config. Without --user, pmqosd stays who it is. */
int options_resolve_user(Options *o, struct passwd *ret);
