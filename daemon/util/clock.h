/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The wall clock in µs: request creation times and deadlines. */
#pragma once

#include <stdint.h>

/* CLOCK_REALTIME in µs since the epoch. */
int64_t now_realtime_usec(void);
