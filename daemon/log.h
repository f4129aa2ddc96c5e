/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One-line log messages on stderr (the journal adds time and unit). */
#pragma once

#include <stdbool.h>

void log_set_verbose(bool verbose);
bool log_is_verbose(void);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
