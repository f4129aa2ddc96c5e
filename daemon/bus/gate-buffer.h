/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gate's byte buffer (what was read from the bus and not yet
 * forwarded), and the size of the pair's send buffer. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Asked of the pair's send buffer: room for the loop's turns (at most 3 ×
 * 64 KiB, gate-loop.c), whatever net.core.wmem_default says. */
#define GATE_PAIR_SNDBUF (1 << 20)

/* Room in *buf (of *cap bytes, len used) for more bytes: 0, or -ENOMEM. */
int gate_buffer_reserve(uint8_t **buf, size_t *cap, size_t len, size_t more);
/* The first n of *len bytes of buf gone. */
void gate_buffer_consume(uint8_t *buf, size_t *len, size_t n);
/* fd's send buffer raised to GATE_PAIR_SNDBUF (SO_SNDBUFFORCE with
 * CAP_NET_ADMIN, else SO_SNDBUF up to net.core.wmem_max): what it got as
 * the kernel counts it (doubled), 0 if unknown. */
int gate_pair_sndbuf(int fd);
