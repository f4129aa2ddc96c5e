/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The gate's thread reads the bus socket in two steps: a peek without room
 * for descriptors (MSG_CTRUNC says whether some ride on what it saw, and
 * nothing is installed), then the same bytes for real. Bytes without
 * descriptors are read at once; descriptors belong to the message whose
 * bytes carry them (the kernel attaches them to the first byte of the
 * bus's write, and a peek stops after them), and the sorter takes them
 * before the gate reads those bytes, so the gate's read drops only the
 * kernel's reference, never the last one. A message goes to sd-bus whole,
 * with as many descriptors as its UNIX_FDS field says. */
#include "bus/gate.h"
#include "bus/gate-buffer.h"
#include "bus/gate-uids.h"
#include "sys/fd-sorter.h"
#include "util/dbus-wire.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* All of p[0..n) to sd-bus, the descriptors with the first byte. */
static int write_all(BusGate *g, const uint8_t *p, size_t n, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr h;
                uint8_t buf[CMSG_SPACE(sizeof(int) * GATE_MAX_FDS)];
        } control = {};
        while (n > 0) {
                struct iovec iov = { .iov_base = (void *) p, .iov_len = n };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
                if (n_fds > 0) {
                        mh.msg_control = &control;
                        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                        *c = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(int) * n_fds),
                                               .cmsg_level = SOL_SOCKET,
                                               .cmsg_type = SCM_RIGHTS };
                        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
                }
                ssize_t k = sendmsg(g->forward, &mh, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EPIPE;
                p += k, n -= (size_t) k, n_fds = 0;
        }
        return 0;
}

static int stand_in(const BusGate *g, char kind) {
        return g->kept_fd[kind == 'f' ? 0 : kind == 's' ? 1 : kind == 'd' ? 2 : 3];
}

/* The first message, size bytes, with its descriptors: the safe copies,
 * stand-ins for the kept ones and, if the kernel dropped some, for those. */
static int forward_with_fds(BusGate *g, size_t size) {
        uint32_t want = 0;
        int list[GATE_MAX_FDS];

        if (dbus_message_unix_fds(g->buf, size, &want) <= 0)
                want = (uint32_t) g->n_fds;
        size_t n = want < GATE_MAX_FDS ? want : GATE_MAX_FDS;
        for (size_t i = 0; i < n; i++)
                list[i] = i >= g->n_fds ? g->refused_fd : g->fds[i] >= 0 ? g->fds[i] : stand_in(g, g->kinds[i]);
        int r = write_all(g, g->buf, size, list, n);
        for (size_t i = 0; i < g->n_fds; i++)
                if (g->fds[i] >= 0)
                        close(g->fds[i]); /* a pidfd or a cgroup2 file: never waits */
        g->n_fds = 0, g->dropped = false;
        gate_buffer_consume(g->buf, &g->len, size);
        return r;
}

/* Every whole message read (up to limit bytes): the first alone if it has
 * descriptors, the others (which cannot) in one write. */
int gate_forward_ready(BusGate *g, size_t limit) {
        int64_t size = dbus_message_size(g->buf, g->len);
        if (size > 0 && (uint64_t) size <= g->len && (g->n_fds > 0 || g->dropped)) {
                if ((uint64_t) size > limit)
                        return 1;
                int r = forward_with_fds(g, (size_t) size);
                if (r < 0)
                        return r;
        }
        size_t off = 0;
        while ((size = dbus_message_size(g->buf + off, g->len - off)) > 0 && (uint64_t) size <= g->len - off &&
               (uint64_t) size <= limit - off)
                off += (size_t) size;
        if (size < 0)
                return log_error_errno((int) size, "The bus sent a message no bus sends; leaving it.");
        int r = off > 0 ? write_all(g, g->buf, off, NULL, 0) : 0;
        gate_buffer_consume(g->buf, &g->len, off);
        if (r < 0)
                return r;
        return size > 0 && (uint64_t) size <= g->len; /* a whole one past the limit */
}

int gate_take_plain(BusGate *g, size_t n) {
        int r = gate_buffer_reserve(&g->buf, &g->cap, g->len, n);
        if (r < 0)
                return r;
        struct iovec iov = { .iov_base = g->buf + g->len, .iov_len = n };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t k = recvmsg(g->bus_fd, &mh, MSG_DONTWAIT);
        if (k < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (mh.msg_flags & MSG_CTRUNC)
                g->dropped = true; /* by the kernel, unseen: stand-ins say so */
        g->len += (size_t) k;
        return 1;
}

static bool retired_slot(BusGate *g, size_t *ret) {
        for (size_t i = 0; i < GATE_MAX_RETIRED; i++)
                if (g->retired[i] == 0 || fd_sorter_reaped(g->retired[i])) {
                        gate_uid_release(&g->uids, g->retired[i]);
                        g->retired[i] = 0;
                        *ret = i;
                        return true;
                }
        return false;
}

/* A sorter with room for one more write's descriptors: the current one,
 * or a new one once the current is retired. False: all are full. */
static bool sorter_ready(BusGate *g) {
        size_t slot;
        if (g->sorter.pid > 0 && g->sorter.kept + FD_SORTER_BATCH <= GATE_KEPT_PER_SORTER)
                return true;
        if (g->sorter.pid > 0) {
                if (!retired_slot(g, &slot))
                        return false;
                log_warning("The descriptor sorter keeps %u descriptors nobody can close safely; retiring it.",
                            g->sorter.kept);
                g->retired[slot] = fd_sorter_retire(&g->sorter);
        }
        int r = fd_sorter_start(&g->sorter);
        if (r < 0) {
                log_error_errno(r, "Cannot start a descriptor sorter: %m");
                g->sorter = (FdSorter){ .ctl = -1 };
                return false;
        }
        return true;
}

/* Bytes of which the first want carry descriptors, for the first message. */
static int take_with_fds(BusGate *g, size_t want) {
        int fds[FD_SORTER_BATCH];
        char kinds[FD_SORTER_BATCH];
        size_t peeked = 0, count = 0, kept = 0;
        uid_t uid = 0;

        if (!gate_uid_has_room(&g->uids, g->buf, g->len, g->peek, want, &uid))
                return gate_take_plain(g, want); /* its uid keeps all it may, or the sender is unknown */
        bool ready = sorter_ready(g);
        if (ready != g->sorter_was_ready) /* said once each way: an attacker's flood is no flood of lines */
                log_warning(ready ? "A descriptor sorter has room again."
                                  : "Dropping descriptors sent to pmqosd unseen, refusing RequestFor() with one: the "
                                    "sorters keep all they may (their file systems do not answer).");
        g->sorter_was_ready = ready;
        if (!ready)
                return gate_take_plain(g, want);
        int r = fd_sorter_take(&g->sorter, g->bus_fd, want, &peeked, fds, kinds, &count);
        if (r < 0 || peeked == 0) {
                /* Full from now on: replaced when a place for a retired one is free. */
                log_error_errno(r, "The descriptor sorter failed: %m");
                (void) kill(g->sorter.pid, SIGKILL);
                g->sorter.kept = GATE_KEPT_PER_SORTER;
                return gate_take_plain(g, want);
        }
        for (size_t i = 0; i < count; i++) {
                kept += fds[i] < 0;
                if (g->n_fds < GATE_MAX_FDS) {
                        g->kinds[g->n_fds] = kinds[i];
                        g->fds[g->n_fds++] = fds[i];
                } else if (fds[i] >= 0)
                        close(fds[i]);
        }
        (void) gate_uid_charge(&g->uids, g->sorter.pid, uid, (unsigned) kept);
        return gate_take_plain(g, peeked);
}

/* Waits for the bus socket (or, the loop reading it, a kick or the bus
 * hanging up): 1 readable or kicked, 0 told to stop or the bus gone. A
 * kick is left for the thread's next turn. */
static int wait_readable(BusGate *g, bool bus) {
        struct pollfd p[3] = { { .fd = g->stop[0], .events = POLLIN },
                               { .fd = g->kick, .events = POLLIN },
                               { .fd = g->bus_fd, .events = bus ? POLLIN : 0 } };
        while (poll(p, 3, -1) < 0)
                if (errno != EINTR)
                        return -errno;
        return p[0].revents || (!bus && (p[2].revents & (POLLHUP | POLLERR))) ? 0 : 1;
}

ssize_t gate_peek(BusGate *g, size_t want, bool *ret_ctrunc) {
        struct iovec iov = { .iov_base = g->peek, .iov_len = want };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n = recvmsg(g->bus_fd, &mh, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0)
                return -errno;
        *ret_ctrunc = mh.msg_flags & MSG_CTRUNC;
        return n;
}

/* The size of the first message from what is read and n peeked bytes: 0
 * while its fixed header is not all there. */
static int64_t first_size(BusGate *g, size_t n) {
        uint8_t header[16];
        size_t have = g->len < sizeof(header) ? g->len : sizeof(header);
        memcpy(header, g->buf, have);
        size_t more = sizeof(header) - have < n ? sizeof(header) - have : n;
        memcpy(header + have, g->peek, more);
        return dbus_message_size(header, have + more);
}

/* Forwards what is whole, then reads once: 1 on, 0 at the end. */
static int step(BusGate *g) {
        size_t want = FD_SORTER_CHUNK;
        bool ctrunc = false;
        int r = gate_forward_ready(g, SIZE_MAX);
        if (r < 0)
                return r;
        if (g->drained) {
                g->drained = false;
                r = wait_readable(g, true);
                if (r <= 0)
                        return r;
        }
        for (;;) {
                ssize_t n = gate_peek(g, want, &ctrunc);
                if (n == -EAGAIN || n == -EINTR)
                        return wait_readable(g, true);
                if (n <= 0)
                        return (int) n; /* the bus hung up, or failed */
                if (!ctrunc) {
                        g->drained = (size_t) n < want;
                        return gate_take_plain(g, (size_t) n);
                }
                /* Descriptors ride on these bytes: the first message's, unless it ends before. */
                int64_t size = first_size(g, (size_t) n);
                if (size < 0)
                        return log_error_errno((int) size, "The bus sent a message no bus sends; leaving it.");
                if (size > 0 && (uint64_t) size - g->len < (uint64_t) n) {
                        want = (size_t) ((uint64_t) size - g->len);
                        continue;
                }
                return take_with_fds(g, (size_t) n);
        }
}

/* The broker's SASL lines, passed on as they are, until its last. */
static int step_auth(BusGate *g) {
        bool ctrunc;
        ssize_t n = gate_peek(g, FD_SORTER_CHUNK, &ctrunc);
        if (n == -EAGAIN || n == -EINTR)
                return wait_readable(g, true);
        if (n <= 0)
                return (int) n;
        const uint8_t *nl = memchr(g->peek, '\n', (size_t) n);
        if (!nl)
                return g->len + (size_t) n > 4096 ? -EPROTO : gate_take_plain(g, (size_t) n);
        size_t line = (size_t) (nl - g->peek) + 1;
        int r = gate_take_plain(g, line);
        if (r <= 0)
                return r;
        size_t end = g->len >= 2 && g->buf[g->len - 2] == '\r' ? g->len - 2 : g->len - 1;
        g->authenticated = dbus_auth_line_is_last((const char *) g->buf, end);
        r = write_all(g, g->buf, g->len, NULL, 0);
        g->len = 0;
        return r < 0 ? r : 1;
}

/* Whether the thread owns the gate; it gives it to the loop that asks. */
static bool thread_turn(BusGate *g) {
        eventfd_t v;
        (void) eventfd_read(g->kick, &v);
        pthread_mutex_lock(&g->lock);
        bool given = false;
        if (g->want_loop && !g->on_loop && !g->handed && g->authenticated)
                g->on_loop = given = true;
        bool mine = !g->on_loop;
        pthread_mutex_unlock(&g->lock);
        if (given)
                gate_kick(g->back); /* the loop takes it in a turn of its own, after sd-bus's */
        return mine;
}

/* After a turn the loop handed over (a message with descriptors, or one
 * past what the loop forwards): the gate back to the loop, if it runs. */
static void hand_back(BusGate *g) {
        pthread_mutex_lock(&g->lock);
        bool back = g->handed && g->want_loop;
        g->handed = false;
        g->on_loop = g->on_loop || back;
        pthread_mutex_unlock(&g->lock);
        if (back)
                gate_kick(g->back);
}

static void *gate_thread(void *userdata) {
        BusGate *g = userdata;
        int r = 1;
        while (r > 0)
                if (!thread_turn(g))
                        r = wait_readable(g, false);
                else if ((r = g->authenticated ? step(g) : step_auth(g)) > 0)
                        hand_back(g);
        if (r < 0)
                log_error_errno(r, "Cannot read the bus: %m");
        (void) shutdown(g->forward, SHUT_WR); /* sd-bus sees the bus go */
        return NULL;
}

static int connect_system_bus(int *ret) {
        const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        bool abstract = false;
        char path[sizeof(sa.sun_path)];

        if (!address)
                address = "unix:path=/run/dbus/system_bus_socket";
        if (dbus_address_unix_path(address, path, sizeof(path) - 1, &abstract) < 0)
                return log_error_errno(-EINVAL, "The system bus address %s names no unix socket.", address);
        size_t len = strlen(path);
        memcpy(sa.sun_path + abstract, path, len);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa,
                    (socklen_t) (offsetof(struct sockaddr_un, sun_path) + abstract + len + !abstract)) < 0) {
                int r = -errno;
                close(fd);
                return log_error_errno(r, "Cannot connect to the system bus at %s: %m", address);
        }
        *ret = fd;
        return 0;
}

/* The pair sd-bus reads, the stand-ins, the stop pipe. */
static int gate_new(BusGate **ret) {
        BusGate *g = calloc(1, sizeof(*g));
        int pair[2] = { -1, -1 };
        struct stat st;

        if (!g)
                return -ENOMEM;
        *g = (BusGate){ .bus_fd = -1,
                        .forward = -1,
                        .sd_input = -1,
                        .stop = { -1, -1 },
                        .lock = PTHREAD_MUTEX_INITIALIZER,
                        .sorter.ctl = -1,
                        .sorter_was_ready = true };
        g->kept_fd[0] = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        g->kept_fd[1] = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        g->kept_fd[2] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        g->kept_fd[3] = open("/dev/null", O_RDWR | O_CLOEXEC);
        g->refused_fd = eventfd(0, EFD_CLOEXEC);
        g->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        g->back = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (g->kept_fd[0] < 0 || g->kept_fd[1] < 0 || g->kept_fd[2] < 0 || g->kept_fd[3] < 0 || g->refused_fd < 0 ||
            g->kick < 0 || g->back < 0 || fstat(g->refused_fd, &st) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0 || pipe2(g->stop, O_CLOEXEC) < 0) {
                int r = errno > 0 ? -errno : -EIO;
                if (pair[0] >= 0)
                        close(pair[0]), close(pair[1]);
                bus_gate_free(g);
                return r;
        }
        g->refused_dev = st.st_dev, g->refused_ino = st.st_ino;
        g->forward = pair[0], g->sd_input = pair[1];
        g->pair_sndbuf = gate_pair_sndbuf(g->forward);
        *ret = g;
        return 0;
}

/* sd-bus on the pair's other end and the bus socket, which it owns from
 * then on; the SASL exchange goes through the gate like the rest. */
static int start_sd_bus(BusGate *g, int fd, sd_bus **ret) {
        sd_bus *bus = NULL;
        int r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_fd(bus, g->sd_input, fd);
        if (r < 0) {
                close(fd);
                sd_bus_unref(bus);
                return r;
        }
        (void) sd_bus_set_bus_client(bus, true);
        (void) sd_bus_set_trusted(bus, false);
        (void) sd_bus_set_description(bus, "system");
        r = sd_bus_start(bus);
        if (r < 0) {
                sd_bus_flush_close_unref(bus);
                return r;
        }
        *ret = bus;
        return 0;
}

int bus_gate_open(BusGate **ret_gate, sd_bus **ret_bus) {
        BusGate *g = NULL;
        sd_bus *bus = NULL;
        int fd = -1;

        int r = gate_new(&g);
        if (r < 0 || !g)
                return log_error_errno(r < 0 ? r : -ENOMEM, "Cannot set up the bus gate: %m");
        r = connect_system_bus(&fd);
        if (r >= 0 && (g->bus_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
                r = -errno;
                close(fd);
        }
        if (r >= 0)
                r = start_sd_bus(g, fd, &bus); /* it has fd and sd_input now, whatever comes */
        else
                close(g->sd_input);
        g->sd_input = r >= 0 ? g->sd_input : -1;
        if (r >= 0) {
                /* Credentials with every read would look like cut-short descriptors. */
                (void) setsockopt(g->bus_fd, SOL_SOCKET, SO_PASSCRED, &(int){ 0 }, sizeof(int));
                (void) setsockopt(g->bus_fd, SOL_SOCKET, SO_PASSSEC, &(int){ 0 }, sizeof(int));
                /* No signal for the thread (nor the sorters it forks): the loop's
                 * signalfd must see every one, SIGCHLD included. */
                sigset_t all, saved;
                sigfillset(&all);
                (void) pthread_sigmask(SIG_SETMASK, &all, &saved);
                r = -pthread_create(&g->thread, NULL, gate_thread, g);
                (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
                g->running = r >= 0;
        }
        if (r < 0) {
                sd_bus_flush_close_unref(bus);
                bus_gate_free(g);
                return log_error_errno(r, "Cannot connect to the system bus: %m");
        }
        *ret_gate = g;
        *ret_bus = bus;
        return 0;
}

BusGate *bus_gate_free(BusGate *g) {
        if (!g)
                return NULL;
        if (g->running) {
                (void) write(g->stop[1], "x", 1);
                (void) pthread_join(g->thread, NULL);
        }
        for (size_t i = 0; i < g->n_fds; i++)
                if (g->fds[i] >= 0)
                        close(g->fds[i]);
        (void) fd_sorter_retire(&g->sorter);
        gate_uids_done(&g->uids);
        int fds[] = { g->bus_fd,     g->forward,    g->stop[0],    g->stop[1],    g->kick,      g->back,
                      g->kept_fd[0], g->kept_fd[1], g->kept_fd[2], g->kept_fd[3], g->refused_fd };
        for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(g->buf);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
}
