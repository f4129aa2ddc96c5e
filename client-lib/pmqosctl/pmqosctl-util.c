/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every pmqosctl command builds on: options shared by all, messages
 * and exit status, connecting to the broker, and the value grammar
 * (parse-value.h) with pmqosctl's messages. Calls nothing above it. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/parse-value.h"
#include "pmqosctl-cli.h"
#include "util/text.h"

bool arg_ask_password = true;
const char *arg_sysfs_root = "/sys";

int usage_error(const char *verb, const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "pmqosctl %s: ", verb);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see pmqosctl %s --help)\n", verb);
        return EXIT_USAGE;
}

int stdout_written(const char *verb, int r) {
        errno = 0;
        bool failed = fflush(stdout) != 0;
        failed = ferror(stdout) || failed; /* an earlier write failed, its bytes lost */
        if (!failed)
                return r;
        fprintf(stderr, "pmqosctl%s%s: cannot write standard output: %s\n", verb ? " " : "", verb ?: "",
                errno ? strerror(errno) : "write error");
        return r ? r : EXIT_REFUSED;
}

int bad_option(const char *verb, int argc, char *argv[]) {
        const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        return usage_error(verb, "unknown option or missing value in \"%s\"", arg);
}

/* Text from the broker made safe for a terminal: control characters and
 * invalid UTF-8 escaped as \\xNN, as pmqosd does with command lines. */
char *term_text(const char *s) {
        size_t len = strlen(s);
        return text_clean(s, len, 4 * len + 8);
}

const char *denied_hint = HINT_REQUEST;
bool arg_may_authorize;

char *broker_reason(pmqos_client *c, int r) {
        const char *msg = c ? pmqos_client_last_error(c) : NULL;
        if (r == -EHOSTDOWN || (r == -ECONNREFUSED && !msg))
                msg = pmqos_strerror(r);
        char *clean = term_text(msg ?: pmqos_strerror(r));
        /* A refusal for an action our hints do not describe (a persistent
         * or long request, another user's workload) says itself what would
         * allow the call: a hint of ours after it would contradict it. */
        bool says_why = msg && (strstr(msg, "org.freedesktop.pmqos.request-latency-persistent") ||
                                strstr(msg, "org.freedesktop.pmqos.request-latency-for-others"));
        if (clean && r == -EACCES && denied_hint && !says_why) {
                char *with_hint = NULL;
                if (asprintf(&with_hint, "%s (%s)", clean, denied_hint) >= 0) {
                        free(clean);
                        clean = with_hint;
                }
        }
        return clean;
}

int broker_error(pmqos_client *c, const char *what, int r) {
        char *why = broker_reason(c, r);
        fprintf(stderr, "pmqosctl: %s: %s\n", what, why ?: "(out of memory)");
        free(why);
        return EXIT_REFUSED;
}

int connect_broker(pmqos_client **ret) {
        int r = pmqos_client_new(ret);
        if (r < 0)
                return broker_error(NULL, "cannot reach pmqosd", r);
        bool ask = arg_ask_password && isatty(STDIN_FILENO);
        pmqos_client_set_allow_interactive(*ret, ask);
        if (ask && arg_may_authorize)
                password_agent_open();
        /* Every verb either ends at once or polls the fd itself (hold, monitor):
         * the library needs no helper thread. */
        (void) pmqos_client_get_fd(*ret);
        return 0;
}

int parse_usec(const char *s, int32_t *ret) {
        return parse_latency(s, PMQOS_LATENCY_MAX, ret);
}

int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *ret) {
        uint64_t v;
        int r = parse_decimal(s, max, &v);
        if (r < 0)
                return r;
        if (v < min)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

int parse_timeout_sec(const char *s, uint32_t *ret) {
        uint64_t usec;
        int r = parse_timespan(s, USEC_PER_SEC, &usec);
        if (r < 0)
                return r;
        if (usec % USEC_PER_SEC != 0 || usec == 0 || usec / USEC_PER_SEC > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) (usec / USEC_PER_SEC);
        return 0;
}

void format_usec(int32_t v, char *buf, size_t size) {
        if (v < 0 || v >= PMQOS_LATENCY_MAX)
                snprintf(buf, size, "none");
        else
                snprintf(buf, size, "%" PRIi32 " µs", v);
}

void print_writer_who(const pmqos_writer_info *w) {
        char *comm = term_text(w->comm), *unit = term_text(w->unit);
        printf("pid %" PRIu32 " (%s%s%s)", w->pid, comm ?: "?", unit && unit[0] ? ", " : "",
               unit && unit[0] ? unit : "");
        free(comm);
        free(unit);
}
