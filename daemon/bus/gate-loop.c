/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gate on the event loop, while it runs: a message without
 * descriptors goes from the bus socket to sd-bus in the loop's own turn,
 * with no thread to wake (the hop cost pmqosd as much CPU as all else it
 * does for a request). The thread keeps what may wait — a message with
 * descriptors (the sorter, the uid asked of the bus) — and one larger
 * than the loop forwards, and feeds sd-bus before and after the loop,
 * where pmqosd's synchronous calls are. The loop reads the bus, and takes
 * the gate back from the thread, only after sd-bus has read all it was
 * given (both sources below sd-bus's priority), and writes only when the
 * pair has room for all a turn may write (at most 3 × GATE_LOOP_WRITE):
 * else the thread writes, which may wait for sd-bus. A bus that
 * hangs up wakes the thread (sd-bus's own turns, on the socket's hang-up,
 * would starve the loop's), which tells sd-bus. */
#include "bus/gate.h"
#include "util/log.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define GATE_LOOP_WRITE ((size_t) FD_SORTER_CHUNK)

/* To the thread until it gives the gate back. */
static int hand_to_thread(BusGate *g) {
        (void) sd_event_source_set_enabled(g->io, SD_EVENT_OFF);
        pthread_mutex_lock(&g->lock);
        g->on_loop = false;
        g->handed = true;
        g->drained = false;
        pthread_mutex_unlock(&g->lock);
        gate_kick(g->kick);
        return 0;
}

static int loop_failed(BusGate *g, int r) {
        if (r < 0)
                log_error_errno(r, "Cannot read the bus: %m");
        (void) sd_event_source_set_enabled(g->io, SD_EVENT_OFF);
        (void) shutdown(g->forward, SHUT_WR); /* sd-bus sees the bus go */
        return 0;
}

/* Whether the pair has room for all a turn may write (3 × GATE_LOOP_WRITE:
 * what the thread left, a message with descriptors among it, and one read)
 * with the kernel's overhead on top: a write on the loop that waited for
 * room would wait for sd-bus, which reads on this loop, for ever. */
static bool pair_has_room(const BusGate *g) {
        int queued = 0;
        if (ioctl(g->forward, SIOCOUTQ, &queued) < 0 || queued < 0)
                return false;
        return (size_t) g->pair_sndbuf >= (size_t) queued + 4 * GATE_LOOP_WRITE;
}

/* What is whole to sd-bus, then one read: a message with descriptors, or
 * more than the loop writes, to the thread; so is a turn the pair has no
 * room for (the thread may wait for sd-bus to read). */
static int pump(BusGate *g) {
        bool ctrunc = false;
        if (!pair_has_room(g))
                return hand_to_thread(g);
        int r = gate_forward_ready(g, GATE_LOOP_WRITE);
        if (r != 0)
                return r < 0 ? loop_failed(g, r) : hand_to_thread(g);
        ssize_t n = gate_peek(g, FD_SORTER_CHUNK, &ctrunc);
        if (n == -EAGAIN || n == -EINTR)
                return 0;
        if (n <= 0)
                return loop_failed(g, (int) n); /* the bus hung up, or failed */
        if (ctrunc)
                return hand_to_thread(g);
        r = gate_take_plain(g, (size_t) n);
        if (r < 0)
                return loop_failed(g, r);
        r = gate_forward_ready(g, GATE_LOOP_WRITE);
        if (r != 0)
                return r < 0 ? loop_failed(g, r) : hand_to_thread(g);
        return 0;
}

static int on_bus_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        (void) s, (void) fd, (void) revents;
        return pump(userdata);
}

static int on_back(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        BusGate *g = userdata;
        eventfd_t v;

        (void) s, (void) revents;
        (void) eventfd_read(fd, &v);
        pthread_mutex_lock(&g->lock);
        bool mine = g->on_loop;
        pthread_mutex_unlock(&g->lock);
        if (!mine)
                return 0;
        (void) sd_event_source_set_enabled(g->io, SD_EVENT_ON);
        return pump(g); /* what the thread read last */
}

int bus_gate_attach_event(BusGate *g, sd_event *e) {
        if (!g || !g->running)
                return 0;
        int r = sd_event_add_io(e, &g->io, g->bus_fd, EPOLLIN, on_bus_readable, g);
        if (r >= 0)
                r = sd_event_add_io(e, &g->back_source, g->back, EPOLLIN, on_back, g);
        /* After sd-bus's turns: the pair is empty when the loop writes to it. */
        if (r >= 0)
                r = sd_event_source_set_priority(g->io, SD_EVENT_PRIORITY_NORMAL + 1);
        if (r >= 0)
                r = sd_event_source_set_priority(g->back_source, SD_EVENT_PRIORITY_NORMAL + 1);
        if (r >= 0)
                r = sd_event_source_set_enabled(g->io, SD_EVENT_OFF);
        if (r < 0) {
                bus_gate_detach_event(g);
                return log_warning_errno(r, "The bus gate stays on its thread: %m");
        }
        pthread_mutex_lock(&g->lock);
        g->want_loop = true;
        pthread_mutex_unlock(&g->lock);
        /* No waiting here for the thread, which may be waiting for sd-bus to
         * read the pair: it kicks back when it gives the gate, and on_back
         * takes it in the loop's turn. */
        gate_kick(g->kick);
        return 0;
}

void bus_gate_detach_event(BusGate *g) {
        if (!g || !g->io)
                return;
        g->io = sd_event_source_disable_unref(g->io);
        g->back_source = sd_event_source_disable_unref(g->back_source);
        pthread_mutex_lock(&g->lock);
        g->want_loop = g->on_loop = false;
        pthread_mutex_unlock(&g->lock);
        gate_kick(g->kick);
}

bool bus_gate_is_refused(const BusGate *g, int fd) {
        struct stat st;
        /* Only pidfds, cgroup2 files and the stand-ins reach sd-bus: fstat() cannot wait. */
        return g && fstat(fd, &st) >= 0 && st.st_dev == g->refused_dev && st.st_ino == g->refused_ino;
}

bool bus_gate_input_waiting(const BusGate *g) {
        int n = 0, m = 0;
        return g &&
               ((ioctl(g->sd_input, FIONREAD, &n) >= 0 && n > 0) || (ioctl(g->bus_fd, FIONREAD, &m) >= 0 && m > 0));
}
