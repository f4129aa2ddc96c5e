/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pmqosctl's files share: options, messages and exit status, parsing of
 * latencies, and one function per command. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pmqos.h"
#include "util/macro.h" /* _cleanup_ */

#define EXIT_REFUSED 1 /* the broker refused or failed */
#define EXIT_USAGE 2
/* hold … -- COMMAND, as env(1) and timeout(1): pmqosctl's own failure, and
 * COMMAND that cannot be run or is not found. Else COMMAND's status. */
#define EXIT_LAUNCHER 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

extern bool arg_ask_password;
/* The command may need polkit's authorization (it changes something). */
extern bool arg_may_authorize;
extern const char *arg_sysfs_root;

/* "pmqosctl VERB: …" on stderr; returns EXIT_USAGE. */
int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int bad_option(const char *verb, int argc, char *argv[]);
/* Standard output flushed; if it could not all be written (a full disk; a
 * closed pipe ends pmqosctl by SIGPIPE first), "pmqosctl VERB: cannot write
 * standard output: why" (VERB NULL: "pmqosctl: …") on stderr and
 * EXIT_REFUSED unless r already says a failure. Else r. */
int stdout_written(const char *verb, int r);
/* What would allow a call the broker refused (-EACCES), said after its
 * message; each command sets the one that fits it. */
#define HINT_REQUEST                                                                                                \
        "allowed to an active local session, to members of group pmqos, and with an administrator's password: run " \
        "it on a terminal to be asked, or with sudo"
#define HINT_ADMIN "this needs an administrator's password: run it on a terminal to be asked, or with sudo"
extern const char *denied_hint;
/* The broker's message for the failure (escaped for the terminal; with the
 * hint for a refusal), malloc'd. */
char *broker_reason(pmqos_client *c, int r);
/* "pmqosctl: WHAT: reason" on stderr; returns EXIT_REFUSED. */
int broker_error(pmqos_client *c, const char *what, int r);
/* 0, or an exit status after saying why. On a terminal (unless
 * --no-ask-password) the broker may ask for a password, through pkttyagent. */
int connect_broker(pmqos_client **ret);
/* A text agent for polkit's password questions on this terminal, as
 * systemctl starts one: pkttyagent --notify-fd N --fallback, waited for
 * until it is registered; closed by password_agent_close() or at exit. */
void password_agent_open(void);
void password_agent_close(void);
/* Text from the broker made safe for a terminal (malloc'd). */
char *term_text(const char *s);
/* A writer of a per-CPU file, as status names it: "pid N (comm, unit)". */
void print_writer_who(const pmqos_writer_info *w);
/* How many terminal columns s takes (UTF-8, wide characters counted twice). */
int text_columns(const char *s);
/* The value grammar (parse-value.h): µs bare or with a unit ("50", "2ms"),
 * 0 … PMQOS_LATENCY_MAX. 0 or a negative errno. */
int parse_usec(const char *s, int32_t *ret);
/* USEC as microseconds, or as a C-state name of this machine (the largest
 * exit latency an online CPU gives it; *ret_name is then its sysfs spelling,
 * else NULL). Returns 0, or EXIT_USAGE after saying why. */
int parse_usec_or_cstate(const char *verb, const char *arg, int32_t *ret, const char **ret_name);
/* Decimal only ("010" is 10; no sign, no 0x), min … max. */
int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *ret);
/* A timeout: a time span ("30", "30s", "5min", "1h 30min"; bare numbers are
 * seconds) of whole seconds, 1 s … 2^32-1 s. */
int parse_timeout_sec(const char *s, uint32_t *ret);
/* "20 µs", or "none" for -1. */
void format_usec(int32_t v, char *buf, size_t size);

/* Valid UTF-8 JSON whatever the broker sent: every control character (C0,
 * DEL, C1) as \\uXXXX, a byte of no valid sequence as U+FFFD. */
void json_string(const char *s);
/* One request as a JSON object, with the keys of ListRequests. */
void json_request(const pmqos_request_info *q);

/* status's parts (pmqosctl-verify.c): "cpu0–3,6", CPUs ascending, runs as
 * ranges; "request 12 of uid 0 pid 4711 `cmd` (reason)"; whether a CPU's
 * own bound is stricter than the machine-wide one, and each such row as
 * "; cpu1 10 µs by …" (reqs: the requests, to name who sets it; of_requests:
 * only bounds a request may set, not a file someone else wrote); --check. */
void print_cpu_numbers(const uint32_t *cpus, size_t n);
void print_request_who(const pmqos_request_info *q);
bool has_cpu_bounds(const pmqos_explanation *e, bool of_requests);
void print_cpu_bounds(const pmqos_explanation *e, const pmqos_request_info *reqs, size_t n_reqs);
int status_check(const pmqos_explanation *e);
/* status --json (pmqosctl-status-json.c). */
/* c: the broker, for the Cost line's keys ("cost"); NULL: without them. */
void print_explanation_json(const pmqos_explanation *e, pmqos_client *c);
/* pmqosctl-cost.c: the cost of the bounds in force ("Cost:" lines of
 * status, from Ledger()), and cpus[i]'s figures of it as JSON keys. */
void print_cost(pmqos_client *c, const pmqos_explanation *e);
void json_cpu_cost(const pmqos_explanation *e, size_t i);
/* pmqosctl-writers.c: who wrote the CPUs' knobs, when it was not pmqosd
 * (Explain() asked again only when e is folded and a file may have one). */
void print_writers(pmqos_client *c, const pmqos_explanation *e);
void json_cost(pmqos_client *c, const pmqos_explanation *e);

int verb_status(int argc, char *argv[]);
int verb_metrics(int argc, char *argv[]);
int verb_list(int argc, char *argv[]);
int verb_hold(int argc, char *argv[]);
int verb_request(int argc, char *argv[]);
int verb_run(int argc, char *argv[]);
int verb_check_config(int argc, char *argv[]);
/* pmqosctl run's setup failure: says why, returns 125 (pmqosctl-run-serve.c). */
#define EXIT_RUN_FAILED 125 /* pmqosctl run itself failed: COMMAND did not run */
int setup_fail(const char *what, const char *why);
/* --serve DIR as a descriptor to mount through, or -1 after saying why (pmqosctl-run-serve.c). */
int open_serve_dir(const char *dir);
int verb_route(int argc, char *argv[]);
int verb_unroute(int argc, char *argv[]);
