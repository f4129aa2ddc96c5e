/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One-line log messages on stderr (the journal adds time and unit). */
#pragma once

#include <stdbool.h>

void log_set_verbose(bool verbose);
bool log_is_verbose(void);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* text as it is (no format), at level (syslog's: 3 error ... 7 debug). */
void log_text(int level, const char *text);
/* The longest line, in bytes; a longer one is cut at a character boundary. */
#define LOG_LINE_MAX 2047u

/* Lines written together: log_text_batched() keeps a line (in the order
 * of the thread's other lines, which flush it first) until log_flush(), or
 * until the next one would not fit in LOG_BATCH_MAX bytes (PIPE_BUF: one
 * write stays atomic on a pipe). notify(userdata) is called when a batch
 * begins, for its owner to flush it when the event loop has nothing more
 * to do; without a notify set, log_text_batched() is log_text(). */
#define LOG_BATCH_MAX 4096u
void log_text_batched(int level, const char *text);
void log_set_batch_notify(void (*notify)(void *userdata), void *userdata);
void log_flush(void);
void log_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same for a failure: error is a negative (or positive) errno, which
 * "%m" in fmt spells out ("Cannot open %s: %m"). They return -|error|, so
 * a caller can log and fail in one line; errno is left as it was. */
int log_debug_errno(int error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int log_info_errno(int error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int log_warning_errno(int error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int log_error_errno(int error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For failures one caller can cause at will (a polkit check that failed, a
 * caller that left mid-call): at most LOG_CALLER_BURST lines per
 * LOG_CALLER_INTERVAL_SEC, then one line saying how many were suppressed, so a
 * flood cannot drown the journal. Measured on CLOCK_MONOTONIC when a line is
 * logged: no timer. */
#define LOG_CALLER_BURST 20u
#define LOG_CALLER_INTERVAL_SEC 10u
void log_caller_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int log_caller_warning_errno(int error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For tests: moves the current window sec seconds into the past. */
void log_caller_age(unsigned sec);
