/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pmqosctl's files share: options, messages and exit status, parsing of
 * latencies, and one function per command. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pmqos.h"

#define EXIT_REFUSED 1 /* the broker refused or failed */
#define EXIT_USAGE 2

extern bool arg_ask_password;
extern const char *arg_sysfs_root;

/* "pmqosctl VERB: …" on stderr; returns EXIT_USAGE. */
int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bad_option(const char *verb, int argc, char *argv[]);
/* The broker's message for the failure (escaped for the terminal) on stderr; returns EXIT_REFUSED. */
int broker_error(pmqos_client *c, const char *what, int r);
/* 0, or an exit status after saying why. */
int connect_broker(pmqos_client **ret);
/* Text from the broker made safe for a terminal (malloc'd). */
char *term_text(const char *s);
int parse_usec(const char *s, int32_t *ret);
/* USEC as microseconds, or as a C-state name of this machine (the largest
 * exit latency an online CPU gives it; *ret_name is then its sysfs spelling,
 * else NULL). Returns 0, or EXIT_USAGE after saying why. */
int parse_usec_or_cstate(const char *verb, const char *arg, int32_t *ret, const char **ret_name);
/* The first line of a sysfs file, without its newline. 0 or a negative errno. */
int read_sysfs_line(const char *path, char *buf, size_t size);
int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *ret);
/* "20 µs", or "none" for -1. */
void format_usec(int32_t v, char *buf, size_t size);

/* Valid UTF-8 JSON whatever the broker sent: every control character (C0,
 * DEL, C1) as \\uXXXX, a byte of no valid sequence as U+FFFD. */
void json_string(const char *s);
/* One request as a JSON object, with the keys of ListRequests. */
void json_request(const pmqos_request_info *q);

int verb_status(int argc, char *argv[]);
int verb_list(int argc, char *argv[]);
int verb_hold(int argc, char *argv[]);
int verb_run(int argc, char *argv[]);
