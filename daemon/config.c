/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* All or nothing: the first bad line makes the whole file refused, so a
 * reload never applies half a configuration. */

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

void config_done(Config *c) {
        free(c->state_dir);
        c->state_dir = NULL;
}

static char *strip(char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
                s[--n] = 0;
        return s;
}

static int parse_number(const char *s, long long min, long long max, long long *ret) {
        char *end;
        if (!*s || ((*s < '0' || *s > '9') && *s != '-'))
                return -EINVAL;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int config_parse(const char *path, const char *text, size_t len, Config *ret, unsigned *ret_set, char *err,
                 size_t err_size) {
        Config c = *ret;
        unsigned set = 0, lineno = 0;
        int r = 0;

        c.state_dir = NULL;
        if (len > CONFIG_FILE_MAX) {
                snprintf(err, err_size, "%s: file is larger than 64 KiB", path);
                return -EINVAL;
        }
        if (memchr(text, 0, len)) {
                snprintf(err, err_size, "%s: file contains a NUL byte", path);
                return -EINVAL;
        }

        char *copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, text, len);
        copy[len] = 0;

        for (char *line = copy, *next; line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                lineno++;

                char *l = strip(line);
                if (*l == 0 || *l == '#' || *l == ';')
                        continue;
                if (strcmp(l, "[pmqosd]") == 0)
                        continue;

                char *eq = strchr(l, '=');
                if (!eq) {
                        snprintf(err, err_size, "%s:%u: expected Key=Value, got \"%.40s\"", path, lineno, l);
                        r = -EINVAL;
                        break;
                }
                *eq = 0;
                char *key = strip(l), *value = strip(eq + 1);
                long long v;
                unsigned bit;
                const char *expect = NULL;

                if (strcmp(key, "MaxRequestsPerConnection") == 0) {
                        bit = CONFIG_SET_MAX_PER_CONNECTION;
                        if (parse_number(value, 1, 100000000, &v) < 0)
                                expect = "a number from 1 to 100000000";
                        else
                                c.max_per_connection = (unsigned) v;
                } else if (strcmp(key, "MaxRequestsPerUser") == 0) {
                        bit = CONFIG_SET_MAX_PER_UID;
                        if (parse_number(value, 1, 100000000, &v) < 0)
                                expect = "a number from 1 to 100000000";
                        else
                                c.max_per_uid = (unsigned) v;
                } else if (strcmp(key, "MaxTimeoutSec") == 0) {
                        bit = CONFIG_SET_MAX_TIMEOUT;
                        if (parse_number(value, 1, 100000000, &v) < 0)
                                expect = "seconds, from 1 to 100000000";
                        else
                                c.max_timeout_sec = (uint32_t) v;
                } else if (strcmp(key, "DefaultMinimumLatency") == 0) {
                        bit = CONFIG_SET_DEFAULT_FLOOR;
                        if (strcmp(value, "none") == 0)
                                c.default_floor = PMQOS_LATENCY_NONE;
                        else if (parse_number(value, 0, PMQOS_LATENCY_MAX_US, &v) < 0)
                                expect = "microseconds (0 … 2000000000) or \"none\"";
                        else
                                c.default_floor = (int32_t) v;
                } else if (strcmp(key, "StateDirectory") == 0) {
                        bit = CONFIG_SET_STATE_DIR;
                        if (value[0] != '/' || strlen(value) > 1024)
                                expect = "an absolute path";
                        else {
                                free(c.state_dir);
                                c.state_dir = strdup(value);
                                if (!c.state_dir) {
                                        r = -ENOMEM;
                                        break;
                                }
                        }
                } else {
                        snprintf(err, err_size,
                                 "%s:%u: %.40s: unknown key (known: MaxRequestsPerConnection, MaxRequestsPerUser, "
                                 "MaxTimeoutSec, DefaultMinimumLatency, StateDirectory)",
                                 path, lineno, key);
                        r = -EINVAL;
                        break;
                }
                if (expect) {
                        snprintf(err, err_size, "%s:%u: %s: invalid value \"%.40s\", expected %s", path, lineno, key,
                                 value, expect);
                        r = -EINVAL;
                        break;
                }
                set |= bit;
        }
        free(copy);

        if (r < 0) {
                free(c.state_dir);
                return r;
        }
        if (!(set & CONFIG_SET_STATE_DIR))
                c.state_dir = NULL;
        free(ret->state_dir);
        *ret = c;
        *ret_set = set;
        return 0;
}
