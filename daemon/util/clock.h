/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Clocks in µs: the wall clock for request creation times and deadlines,
 * the monotonic one for durations and ages. */
#pragma once

#include <stdint.h>

/* CLOCK_REALTIME in µs since the epoch. */
int64_t now_realtime_usec(void);

/* CLOCK_MONOTONIC in µs: for how long something took, or how old it is. */
int64_t now_monotonic_usec(void);
