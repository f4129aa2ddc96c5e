/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /etc/pmqos/pmqosd.conf: "Key=Value" lines, "#" comments, an optional
 * [pmqosd] section header. Pure parsing here; reading the file is main.c's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PMQOS_DEFAULT_CONFIG "/etc/pmqos/pmqosd.conf"
#define CONFIG_FILE_MAX (64u * 1024u)

typedef struct Config {
        unsigned max_per_connection;
        unsigned max_per_uid;
        uint32_t max_timeout_sec;
        int32_t default_floor; /* -1: none */
        char *state_dir;       /* NULL: not set in the file */
} Config;

/* Which keys the file set (so that command-line options can win over them). */
enum {
        CONFIG_SET_MAX_PER_CONNECTION = 1 << 0,
        CONFIG_SET_MAX_PER_UID = 1 << 1,
        CONFIG_SET_MAX_TIMEOUT = 1 << 2,
        CONFIG_SET_DEFAULT_FLOOR = 1 << 3,
        CONFIG_SET_STATE_DIR = 1 << 4,
};

void config_done(Config *c);

/* Parses text into *ret, starting from the defaults already in *ret. Returns
 * 0, or -EINVAL with "PATH:LINE: Key: problem" in err and *ret untouched. */
int config_parse(const char *path, const char *text, size_t len, Config *ret, unsigned *ret_set, char *err,
                 size_t err_size);
