/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a write to the stand-in /dev/cpu_dma_latency means: exactly what the
 * kernel makes of a write to the real device (kernel/power/qos.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The kernel's reading of a write of size bytes: exactly 4 bytes are a
 * native-endian int32; any other length is hexadecimal text as
 * kstrtos32_from_user(…, 16, …) takes it (an optional sign, an optional
 * "0x", hex digits, one optional newline; only the first 34 bytes are
 * looked at, a NUL ends the text). Returns 0 and *ret, or the kernel's
 * errno for such a write: -EINVAL (not a number), -ERANGE (out of int32). */
int standin_parse_write(const void *buf, size_t size, int32_t *ret);

/* The value to ask the broker for, for a value the kernel accepted: the
 * kernel takes every int32, but -1 resets the request to "no constraint",
 * other negative values are ignored (no constraint) and values above
 * 2000000000 constrain nothing either; the broker takes 0 … 2000000000 and
 * -1 ("listed, constrains nothing"). */
int32_t standin_broker_value(int32_t kernel_value);
