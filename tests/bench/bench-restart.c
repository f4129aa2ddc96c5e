/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Figures of restarts: the runtime record's size and a restart's gap with the descriptor kept. */

#include "bench.h"

/* ---- restarts ---- */

typedef struct CountReply {
        bool done;
        int r;
        uint32_t n;
} CountReply;

static int on_count(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        CountReply *c = userdata;
        (void) error;
        c->done = true;
        c->r = sd_bus_message_is_method_error(m, NULL) ? -sd_bus_message_get_errno(m)
                                                       : sd_bus_message_read(m, "v", "u", &c->n);
        return 0;
}

/* Read while pmqosd's notifications are read too, as a service manager
 * reads them: held requests that end together take their descriptors out
 * of the store after the kernel write, thousands of FDSTOREREMOVE=1 in a
 * row, and pmqosd answers nothing while it blocks on a full queue. */
uint32_t request_count(void) {
        sd_bus *bus = connect_bus();
        CountReply c = {};
        int r = sd_bus_call_method_async(bus, NULL, BUS_NAME, PATH, "org.freedesktop.DBus.Properties", "Get", on_count,
                                         &c, "ss", NATIVE, "RequestCount");
        while (r >= 0 && !c.done) {
                drain_notifications();
                r = sd_bus_process(bus, NULL);
                if (r == 0)
                        r = sd_bus_wait(bus, 10000);
        }
        sd_bus_flush_close_unref(bus);
        if (r >= 0)
                r = c.r;
        if (r < 0)
                die("read RequestCount", r);
        return c.n;
}

/* A notification socket nobody reads fills up, and then pmqosd blocks in
 * sd_notify() (systemd always reads): read what has come. */
void drain_notifications(void) {
        while (notify_fd >= 0 && read_notification() >= 0) {
                struct pollfd p = { .fd = notify_fd, .events = POLLIN };
                if (poll(&p, 1, 0) <= 0)
                        return;
        }
}

/* A stop and a start: the held requests' descriptors leave the store (a
 * stop empties systemd's; the device's is kept, as the restart rows need). */
void restart_with(const Config *c, const DaemonOptions *o) {
        if (daemon_pid > 0)
                stop_daemon();
        fdstore_clear();
        daemon_pid = spawn_daemon(c, o);
        if (o->notify)
                (void) wait_ready();
        else
                wait_pingable();
}

/* The runtime record's price: request+cancel pairs with it and without it,
 * pmqosd restarted between slices (one of them owns the name at a time). */
void measure_record(const Config *c) {
        int slices = c->quick ? 2 : 10, per = c->pairs / slices;
        uint64_t *with = calloc((size_t) (per * slices), sizeof(uint64_t));
        uint64_t *without = calloc((size_t) (per * slices), sizeof(uint64_t));
        if (!with || !without)
                die("allocate samples", ENOMEM);

        for (int s = 0; s < slices; s++)
                for (int turn = 0; turn < 2; turn++) {
                        int mode = (turn + s) % 2; /* which goes first alternates: no order bias */
                        restart_with(c, &(DaemonOptions){ .no_record = mode == 1, .listen_fd = -1 });
                        sd_bus *bus = connect_bus();
                        for (int i = 0; i < per / 10; i++)
                                cancel(bus, request(bus, 100 + i));
                        timed_pairs(bus, BUS_NAME, (mode ? without : with) + s * per, per, s * per);
                        sd_bus_flush_close_unref(bus);
                }
        double with_us = p50_us(with, per * slices), without_us = p50_us(without, per * slices);
        Row *r = add_row("record");
        snprintf(r->value, sizeof(r->value), "pair p50 %.1f µs with the runtime record, %.1f without = %.3f ×", with_us,
                 without_us, with_us / without_us);
        snprintf(r->target, sizeof(r->target), "≤ 1.05 × without");
        r->number = with_us / without_us;
        r->has_target = true;
        r->pass = r->number <= 1.05;
        free(with);
        free(without);
}

static void sample(int dev, int32_t bound, uint64_t *above, uint64_t *last, long *off) {
        int32_t v = 0;
        if (pread(dev, &v, sizeof(v), 0) != sizeof(v))
                die("read device", errno);
        uint64_t now = now_ns();
        if (v > bound) {
                *above += now - *last;
                ++*off;
        }
        *last = now;
}

/* SIGTERM, then a new pmqosd at once, given what o says (the descriptors
 * of a store, or none), the device sampled all along. Returns how long the
 * kernel was above bound (ns); *ret_ready is the time from the new start
 * to READY=1, *ret_off (if not NULL) the samples above bound. */
uint64_t restart_and_watch(const Config *c, const DaemonOptions *o, int32_t bound, uint64_t *ret_ready, long *ret_off) {
        uint64_t above = 0, last;
        long off = 0;
        int dev = open(c->device, O_RDONLY | O_CLOEXEC);
        if (dev < 0)
                die("open device", errno);
        last = now_ns();
        kill(daemon_pid, SIGTERM);
        while (!daemon_exited(0))
                sample(dev, bound, &above, &last, &off);
        uint64_t t0 = now_ns();
        daemon_pid = spawn_daemon(c, o);
        for (;;) {
                sample(dev, bound, &above, &last, &off);
                struct pollfd p = { .fd = notify_fd, .events = POLLIN };
                if (poll(&p, 1, 0) > 0 && read_notification())
                        break;
                if (now_ns() - t0 > 30ull * 1000000000u)
                        die("pmqosd did not say READY=1", ETIMEDOUT);
        }
        *ret_ready = now_ns() - t0;
        for (int i = 0; i < 100; i++) /* until pmqosd has written the bound again */
                sample(dev, bound, &above, &last, &off);
        close(dev);
        if (ret_off)
                *ret_off = off;
        return above;
}

void measure_restart(const Config *c) {
        int conns = 100, per = c->quick ? 10 : 100;
        uint64_t ready_plain, ready_store;

        restart_with(c, &(DaemonOptions){ .notify = true, .listen_fd = -1 });
        sd_bus **held = calloc((size_t) conns, sizeof(sd_bus *));
        if (!held)
                die("allocate connections", ENOMEM);
        hold_many(held, conns, per, 2000);
        uint32_t n = (uint32_t) (conns * per);

        /* Without a store: the device is opened anew, so the bound lapses until the new start. */
        if (stored_fd >= 0)
                close(stored_fd), stored_fd = -1;
        uint64_t gap_plain =
                restart_and_watch(c, &(DaemonOptions){ .notify = true, .listen_fd = -1 }, 2000, &ready_plain, NULL);
        bool all_plain = request_count() == n;
        /* With one: the new pmqosd takes the descriptor the previous one handed over. */
        if (stored_fd < 0)
                die("pmqosd handed no descriptor over (FDSTORE=1)", EIO);
        uint64_t gap_store = restart_and_watch(c, &(DaemonOptions){ .notify = true, .listen_fd = stored_fd }, 2000,
                                               &ready_store, NULL);
        bool all_store = request_count() == n;
        for (int i = 0; i < conns; i++) {
                sd_bus_flush_close_unref(held[i]);
                drain_notifications();
        }
        free(held);

        Row *r = add_row("restart");
        snprintf(r->value, sizeof(r->value), "%u re-adopted, start to READY=1 %.1f ms (%.1f without the store)%s", n,
                 (double) ready_store / 1e6, (double) ready_plain / 1e6,
                 all_plain && all_store ? "" : "; REQUESTS LOST");
        snprintf(r->target, sizeof(r->target), "≤ 100 ms, all %u kept", n);
        r->number = (double) ready_store / 1e6;
        r->has_target = true;
        r->pass = r->number <= 100 && all_plain && all_store;
        r = add_row("restart gap");
        struct stat st;
        if (stat(c->device, &st) == 0 && S_ISREG(st.st_mode)) {
                /* Every descriptor of a file shares its content: a stored one cannot keep a bound. */
                snprintf(r->value, sizeof(r->value), "not measurable on a stand-in file (%.2f ms without the store)",
                         (double) gap_plain / 1e6);
                snprintf(r->target, sizeof(r->target), "(needs the real device)");
                r->number = -1;
                return;
        }
        snprintf(r->value, sizeof(r->value), "kernel above the bound %.2f ms with the fd store, %.2f ms without",
                 (double) gap_store / 1e6, (double) gap_plain / 1e6);
        snprintf(r->target, sizeof(r->target), "0 with the store");
        r->number = (double) gap_store / 1e6;
        r->has_target = true;
        r->pass = gap_store == 0;
}
