/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* syslog-style "<N>" prefixes let journald file each line at its level. */

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool verbose;
static int journal_prefix = -1;

void log_set_verbose(bool v) {
        verbose = v;
}

bool log_is_verbose(void) {
        return verbose;
}

static void log_va(int level, const char *fmt, va_list ap) {
        char line[1024];
        vsnprintf(line, sizeof(line), fmt, ap);
        if (journal_prefix < 0)
                journal_prefix = getenv("JOURNAL_STREAM") != NULL;
        if (journal_prefix)
                fprintf(stderr, "<%d>%s\n", level, line);
        else
                fprintf(stderr, "pmqosd: %s\n", line);
}

#define LOG_FN(name, level, cond)         \
        void name(const char *fmt, ...) { \
                if (!(cond))              \
                        return;           \
                va_list ap;               \
                va_start(ap, fmt);        \
                log_va(level, fmt, ap);   \
                va_end(ap);               \
        }

LOG_FN(log_debug, 7, verbose)
LOG_FN(log_info, 6, true)
LOG_FN(log_warning, 4, true)
LOG_FN(log_error, 3, true)
