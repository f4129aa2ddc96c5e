/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gate's buffer of bytes read from the bus and not yet forwarded, and
 * the send buffer of the pair it forwards them into. */
#include "bus/gate-buffer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int gate_buffer_reserve(uint8_t **buf, size_t *cap, size_t len, size_t more) {
        if (*cap - len >= more)
                return 0;
        size_t n = len + more > 2 * *cap ? len + more : 2 * *cap;
        uint8_t *p = realloc(*buf, n);
        if (!p)
                return -ENOMEM;
        *buf = p, *cap = n;
        return 0;
}

void gate_buffer_consume(uint8_t *buf, size_t *len, size_t n) {
        memmove(buf, buf + n, *len - n);
        *len -= n;
}

int gate_pair_sndbuf(int fd) {
        int size = GATE_PAIR_SNDBUF, got = 0;
        socklen_t len = sizeof(got);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        return getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len) < 0 ? 0 : got;
}
