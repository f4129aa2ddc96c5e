/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "bus/gate-uids.h"
#include "util/dbus-wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static int open_bus(GateUids *u) {
        const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        sd_bus *bus = NULL;
        int r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, address ? address : "unix:path=/run/dbus/system_bus_socket");
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, true);
        if (r >= 0)
                r = sd_bus_negotiate_fds(bus, false);
        if (r >= 0)
                r = sd_bus_set_method_call_timeout(bus, 2 * 1000 * 1000);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0) {
                sd_bus_flush_close_unref(bus);
                return r;
        }
        u->bus = bus;
        return 0;
}

/* Whether anything waits on the look-up connection that it did not ask
 * for: any peer may send it unicast signals, which the bus queues (up to
 * its outgoing limit, 127 MB on dbus-daemon) until the next look-up would
 * read them all, on the gate's thread, before its reply. A little (the
 * bus's NameAcquired) is read and dropped; more, and the connection is
 * closed unread: a new one at the next need. */
static sd_bus *drop_unasked(sd_bus *bus) {
        for (unsigned i = 0; bus; i++) {
                uint64_t queued = 0;
                int n = 0;
                if (sd_bus_get_n_queued_read(bus, &queued) < 0 || ioctl(sd_bus_get_fd(bus), FIONREAD, &n) < 0)
                        return sd_bus_flush_close_unref(bus);
                if (queued == 0 && n == 0)
                        return bus;
                if (i == GATE_UNASKED_MAX || (unsigned) n > GATE_UNASKED_BYTES || sd_bus_process(bus, NULL) < 0)
                        return sd_bus_flush_close_unref(bus);
        }
        return bus;
}

int gate_uid_of(GateUids *u, const char *sender, uid_t *ret) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        uint32_t uid;

        for (size_t i = 0; i < GATE_NAMES; i++)
                if (strcmp(u->names[i].name, sender) == 0) {
                        *ret = u->names[i].uid;
                        return 0;
                }
        u->bus = drop_unasked(u->bus);
        int r = u->bus ? 0 : open_bus(u);
        if (r >= 0)
                r = sd_bus_call_method(u->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                       "GetConnectionUnixUser", &error, &reply, "s", sender);
        if (r >= 0)
                r = sd_bus_message_read(reply, "u", &uid);
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
        /* Read before the reply: what was sent within one round trip. */
        u->bus = r < 0 ? sd_bus_flush_close_unref(u->bus) : drop_unasked(u->bus);
        if (r < 0)
                return r;
        if (strlen(sender) < sizeof(u->names[0].name)) {
                strcpy(u->names[u->next_name].name, sender);
                u->names[u->next_name].uid = (uid_t) uid;
                u->next_name = (u->next_name + 1) % GATE_NAMES;
        }
        *ret = (uid_t) uid;
        return 0;
}

/* Whose the message is whose first len bytes are in buf and then peek
 * (the header may be cut between the two), and how many descriptors it
 * carries: -EAGAIN if its header is not all there. */
static int sender_of(GateUids *u, const uint8_t *buf, size_t len, const uint8_t *peek, size_t n, uid_t *ret_uid,
                     uint32_t *ret_fds) {
        uint8_t *joined = NULL;
        const uint8_t *p = len == 0 ? peek : buf;
        size_t size = len == 0 ? n : len;
        char sender[256];

        if (len > 0 && dbus_message_sender(buf, len, sender, sizeof(sender)) == 0) {
                joined = malloc(len + n); /* rare: a message cut mid-header */
                if (!joined)
                        return -ENOMEM;
                memcpy(joined, buf, len);
                memcpy(joined + len, peek, n);
                p = joined, size = len + n;
        }
        int r = dbus_message_sender(p, size, sender, sizeof(sender));
        if (r > 0)
                r = dbus_message_unix_fds(p, size, ret_fds);
        free(joined);
        if (r <= 0)
                return r < 0 ? r : -EAGAIN;
        return gate_uid_of(u, sender, ret_uid);
}

bool gate_uid_has_room(GateUids *u, const uint8_t *buf, size_t len, const uint8_t *peek, size_t n, uid_t *ret_uid) {
        uint32_t n_fds = 0;
        if (sender_of(u, buf, len, peek, n, ret_uid, &n_fds) < 0)
                return false;
        return gate_uid_kept(u, *ret_uid) + n_fds <= GATE_KEPT_PER_UID;
}

unsigned gate_uid_kept(const GateUids *u, uid_t uid) {
        unsigned kept = 0;
        for (size_t i = 0; i < GATE_CHARGES; i++)
                if (u->charges[i].sorter > 0 && u->charges[i].uid == uid)
                        kept += u->charges[i].kept;
        return kept;
}

bool gate_uid_charge(GateUids *u, pid_t sorter, uid_t uid, unsigned n) {
        GateCharge *free_one = NULL;
        for (size_t i = 0; i < GATE_CHARGES; i++) {
                GateCharge *c = &u->charges[i];
                if (c->sorter == sorter && c->uid == uid) {
                        c->kept += n;
                        return true;
                }
                if (c->sorter <= 0 && !free_one)
                        free_one = c;
        }
        if (!free_one)
                return false;
        *free_one = (GateCharge){ .sorter = sorter, .uid = uid, .kept = n };
        return true;
}

void gate_uid_release(GateUids *u, pid_t sorter) {
        for (size_t i = 0; i < GATE_CHARGES; i++)
                if (u->charges[i].sorter == sorter)
                        u->charges[i] = (GateCharge){};
}

void gate_uids_done(GateUids *u) {
        u->bus = sd_bus_flush_close_unref(u->bus);
}
