/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* syslog-style "<N>" prefixes let journald file each line at its level. */

#include "util/log.h"
#include "util/text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>

static bool verbose;
static bool journal_prefix;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;

/* Once, whichever thread logs first (the polkit thread logs too). */
static void journal_init(void) {
        journal_prefix = getenv("JOURNAL_STREAM") != NULL;
}

void log_set_verbose(bool v) {
        verbose = v;
}

bool log_is_verbose(void) {
        return verbose;
}

/* Batched lines (log_text_batched()), of the thread that made the first:
 * at most PIPE_BUF bytes, so that their one write stays atomic on a pipe. */
static char batch[LOG_BATCH_MAX];
static size_t batch_len;
static pthread_t batch_thread;
static void (*batch_notify)(void *userdata);
static void *batch_userdata;

void log_set_batch_notify(void (*notify)(void *userdata), void *userdata) {
        batch_notify = notify;
        batch_userdata = userdata;
}

void log_flush(void) {
        size_t done = 0;
        while (done < batch_len) {
                ssize_t n = write(STDERR_FILENO, batch + done, batch_len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break; /* nowhere to log to: the lines go, as a failed writev's do */
                done += (size_t) n;
        }
        batch_len = 0;
}

static void line_prefix(int level, char prefix[static 16]) {
        (void) pthread_once(&journal_once, journal_init);
        snprintf(prefix, 16, journal_prefix ? "<%d>" : "pmqosd: ", level);
}

/* One line to stderr in one write (atomic on a pipe: the polkit thread logs
 * too), cut at LOG_LINE_MAX bytes at a character boundary: the log stays
 * UTF-8. The batch of the same thread goes first: its lines came first. */
static void write_line(int level, const char *text, size_t len) {
        if (len > LOG_LINE_MAX)
                len = utf8_fit(text, LOG_LINE_MAX);
        if (batch_len > 0 && pthread_equal(pthread_self(), batch_thread))
                log_flush();
        char prefix[16];
        line_prefix(level, prefix);
        struct iovec iov[] = {
                { .iov_base = prefix, .iov_len = strlen(prefix) },
                { .iov_base = (void *) text, .iov_len = len },
                { .iov_base = (void *) "\n", .iov_len = 1 },
        };
        (void) writev(STDERR_FILENO, iov, 3);
}

static void log_va(int level, const char *fmt, va_list ap) {
        char line[LOG_LINE_MAX + 1];
        int n = vsnprintf(line, sizeof(line), fmt, ap);
        if (n < 0)
                return;
        /* A line vsnprintf cut ends at a character, never inside one. */
        size_t len = (size_t) n < sizeof(line) ? (size_t) n : utf8_fit(line, sizeof(line) - 1);
        write_line(level, line, len);
}

void log_text(int level, const char *text) {
        if (level >= 7 && !verbose)
                return;
        write_line(level, text, strlen(text));
}

/* n bytes of s (no terminator: the batch is bytes, not a string); the caller made room. */
static void batch_append(const char *s, size_t n) {
        memcpy(batch + batch_len, s, n);
        batch_len += n;
}

void log_text_batched(int level, const char *text) {
        if (level >= 7 && !verbose)
                return;
        if (!batch_notify || (batch_len > 0 && !pthread_equal(pthread_self(), batch_thread))) {
                log_text(level, text);
                return;
        }
        size_t len = strlen(text);
        if (len > LOG_LINE_MAX)
                len = utf8_fit(text, LOG_LINE_MAX);
        char prefix[16];
        line_prefix(level, prefix);
        size_t plen = strlen(prefix);
        if (batch_len + plen + len + 1 > sizeof(batch))
                log_flush();
        if (batch_len == 0) {
                batch_thread = pthread_self();
                batch_notify(batch_userdata);
        }
        batch_append(prefix, plen);
        batch_append(text, len);
        batch_append("\n", 1);
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

/* "%m" is glibc's strerror(errno): errno holds error while fmt is formatted. */
static int log_errno_va(int level, int error, const char *fmt, va_list ap) {
        int saved = errno;
        error = error < 0 ? -error : error;
        errno = error;
        log_va(level, fmt, ap);
        errno = saved;
        return -error;
}

#define LOG_ERRNO_FN(name, level, cond)                      \
        int name(int error, const char *fmt, ...) {          \
                if (!(cond))                                 \
                        return error < 0 ? error : -error;   \
                va_list ap;                                  \
                va_start(ap, fmt);                           \
                int r = log_errno_va(level, error, fmt, ap); \
                va_end(ap);                                  \
                return r;                                    \
        }

LOG_ERRNO_FN(log_debug_errno, 7, verbose)
LOG_ERRNO_FN(log_info_errno, 6, true)
LOG_ERRNO_FN(log_warning_errno, 4, true)
LOG_ERRNO_FN(log_error_errno, 3, true)

static struct {
        uint64_t window_start; /* seconds, CLOCK_MONOTONIC */
        unsigned n_logged;
        unsigned long n_suppressed;
} caller_limit;

static pthread_mutex_t caller_lock = PTHREAD_MUTEX_INITIALIZER; /* the polkit thread logs too */

static void caller_warning_va(int error, const char *fmt, va_list ap) {
        struct timespec ts;

        pthread_mutex_lock(&caller_lock);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t) ts.tv_sec;
        if (caller_limit.n_logged == 0 || now - caller_limit.window_start >= LOG_CALLER_INTERVAL_SEC) {
                if (caller_limit.n_suppressed > 0)
                        log_warning("Suppressed %lu similar messages about callers in %u s.", caller_limit.n_suppressed,
                                    LOG_CALLER_INTERVAL_SEC);
                caller_limit.window_start = now;
                caller_limit.n_logged = 0;
                caller_limit.n_suppressed = 0;
        }
        if (caller_limit.n_logged >= LOG_CALLER_BURST) {
                caller_limit.n_suppressed++;
                pthread_mutex_unlock(&caller_lock);
                return;
        }
        caller_limit.n_logged++;
        if (error != 0)
                (void) log_errno_va(4, error, fmt, ap);
        else
                log_va(4, fmt, ap);
        pthread_mutex_unlock(&caller_lock);
}

void log_caller_warning(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        caller_warning_va(0, fmt, ap);
        va_end(ap);
}

int log_caller_warning_errno(int error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        caller_warning_va(error, fmt, ap);
        va_end(ap);
        return error < 0 ? error : -error;
}

void log_caller_age(unsigned sec) {
        pthread_mutex_lock(&caller_lock);
        caller_limit.window_start -= sec;
        pthread_mutex_unlock(&caller_lock);
}
