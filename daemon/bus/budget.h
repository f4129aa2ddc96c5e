/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What one caller may make pmqosd send. The bus keeps every reply that its
 * receiver has not read yet and counts it against pmqosd, the sender:
 * dbus-daemon stops reading pmqosd once 127 MiB of its messages wait, and
 * pmqosd then answers nobody. So every method call any caller can reach —
 * the vtables' and sd-bus's own (Introspect, Properties, Peer) — passes one
 * bus filter first, which counts per connection and per user:
 *
 *  - calls per second (a token bucket per user, a call costing one token
 *    per started 4 KiB of the reply it asks for): past it, a short
 *    LimitsExceeded;
 *  - the bytes sent to a connection since it last showed that it reads: a
 *    connection past MaxUnreadBytesPerConnection, or any of a user past
 *    MaxUnreadBytesPerUser, is asked org.freedesktop.DBus.Peer.Ping (which
 *    every D-Bus library answers when it reads), and its calls wait until
 *    the answer comes (a few; the rest get no answer at all) — it is
 *    dropped from service until it reads. What waits in the bus for one
 *    user stays bounded;
 *  - a connection's user is known one bus round trip after its first call:
 *    until then a call asking for more than 4 KiB waits for it, and what
 *    all such connections are sent together is bounded as one user's.
 *
 * Root is exempt. Bytes are the estimates of budget_estimate(), on the
 * high side. No timer: the bucket refills when the next call comes. */
#pragma once

#include <stdint.h>
#include <systemd/sd-bus.h>

#include "bus/calls.h"
#include "bus/client.h"
#include "conf/config.h"
#include "core/core.h"

typedef struct Budget Budget;

/* Installs the filter and the departure watch on bus; add it after every
 * other filter (sd-bus runs the last added first). */
int budget_new(Budget **ret, sd_bus *bus, Clients *clients, Calls *calls, const Limits *limits, const Core *core);
Budget *budget_free(Budget *b);
/* The clock the call buckets refill by, in µs (CLOCK_MONOTONIC_COARSE
 * unless a test sets its own). */
void budget_set_clock(Budget *b, uint64_t (*now)(void));

/* The bytes the reply to a call of member of interface will have at most,
 * about: what the filter counts before the call runs. */
uint64_t budget_estimate(const Core *core, const char *interface, const char *member);

/* Ping answers in flight at once, in all and per user: pmqosd's own
 * connection may wait for 128 replies in dbus-daemon, polkit's included. */
#define BUDGET_PINGS_MAX 16u
#define BUDGET_PINGS_PER_UID 2u
/* Calls of a connection past its bound that wait for its Ping answer;
 * more go unanswered. */
#define BUDGET_HELD_PER_CONNECTION 16u
/* Connection records kept beyond MaxClients. */
#define BUDGET_CONNECTIONS_SPARE 1024u
/* Calls a connection may make before the bus said whose it is. */
#define BUDGET_CALLS_UNKNOWN 32u
