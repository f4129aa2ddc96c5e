/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one grammar for numbers an administrator or user types: decimal
 * integers only (never octal, never hex), time spans as systemd writes them
 * ("50us", "2ms", "30s", "5min", "1h", "1h 30min"), latencies in µs bare or
 * as a span. pmqosctl uses it; the Python binding follows the same rules. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define USEC_PER_SEC UINT64_C(1000000)

/* Decimal digits only: no sign, space or base prefix; a leading zero is
 * decimal ("010" is 10). Returns 0, -EINVAL (not a number) or -ERANGE
 * (above max). */
int parse_decimal(const char *s, uint64_t max, uint64_t *ret);

/* One or more NUMBER[UNIT] parts, optionally separated by spaces, summed
 * (NUMBER is decimal, with an optional fraction: "1.5h", "0.1"):
 * us usec µs, ms msec, s sec second(s), m min minute(s), h hr hour(s),
 * d day(s), w week(s). A part without a unit counts in default_unit (µs per
 * unit: USEC_PER_SEC for a timeout in seconds). Returns 0, -EINVAL or
 * -ERANGE. */
int parse_timespan(const char *s, uint64_t default_unit, uint64_t *ret_usec);

/* A latency bound: µs 0 … max, bare ("50") or with a unit ("50us", "2ms";
 * a fraction of a µs is dropped).
 * Returns 0, -EINVAL or -ERANGE. */
int parse_latency(const char *s, int32_t max, int32_t *ret);

/* Whether s is written as a C-state name where a latency is taken ("C1E",
 * "POLL", "haltpoll idle"): a letter first, then letters, digits, "_", "-",
 * "." or spaces, at most 31 bytes, no space last, and not "none" in any
 * case (which says "no bound" where one may be absent). A latency starts
 * with a digit, so a value is one or the other. What a name stands for is the
 * machine's: its caller looks it up. */
bool latency_is_cstate_name(const char *s);
