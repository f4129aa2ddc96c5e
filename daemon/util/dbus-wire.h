/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The little of the D-Bus wire a gate in front of sd-bus needs: where a
 * message ends (its fixed header says), where the broker's SASL replies
 * end, and the socket a bus address names. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest message the specification allows (128 MiB). */
#define DBUS_MESSAGE_MAX (UINT32_C(1) << 27)

/* The size of the message that begins at p[0..n): 0 while fewer than the
 * 16 bytes of the fixed header are there, -EBADMSG for a header no bus
 * sends (unknown byte order or version, more than DBUS_MESSAGE_MAX). */
int64_t dbus_message_size(const uint8_t *p, size_t n);

/* Whether the SASL line (without its "\r\n") is the broker's last before
 * the messages: the answer to NEGOTIATE_UNIX_FD, or a refusal. */
bool dbus_auth_line_is_last(const char *line, size_t len);

/* The socket of the first "unix:" entry of a bus address with a path= or
 * abstract= key, unescaped ("%2f"), into ret (size bytes): 0, *ret_abstract
 * saying which; -EINVAL for none such or one that does not fit. */
int dbus_address_unix_path(const char *address, char *ret, size_t size, bool *ret_abstract);

/* The UNIX_FDS header field of the message at p[0..n) (0 when it has none):
 * 1, or 0 while its header is not all there, or -EBADMSG. */
int dbus_message_unix_fds(const uint8_t *p, size_t n, uint32_t *ret);

/* Its SENDER field (the bus sets it) into ret (size bytes): 1, 0 while the
 * header is not all there, -ENOENT without one, -EBADMSG. */
int dbus_message_sender(const uint8_t *p, size_t n, char *ret, size_t size);
