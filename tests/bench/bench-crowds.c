/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Figures of many clients at once: crowds of connections, a no-reply flood, mass departures, kernel writes per change.
 */

#include "bench.h"

/* ---- many clients at once ---- */

/* The child of a crowd: per_proc connections with per_conn requests each
 * (held: Hold()s, whose descriptors it keeps, and then the connection goes:
 * only the descriptors bind them). Says so on ready, then waits to die. */
static void crowd_member(const char *destination, int per_proc, int per_conn, bool held, int ready) {
        for (int i = 0; i < per_proc; i++) {
                sd_bus *bus = connect_bus(); /* kept: it dies with the process */
                for (int k = 0; k < per_conn; k++)
                        if (held)
                                hold(bus, 20000 + k, NULL); /* its descriptor kept till the end too */
                        else
                                request_at(bus, destination, 20000 + k);
                if (held)
                        sd_bus_flush_close_unref(bus);
        }
        if (write(ready, "r", 1) != 1)
                _exit(1);
        pause();
        _exit(0);
}

/* Processes of one process group, each with per_proc connections holding
 * per_conn requests; returns the group's id once every request is made.
 * pmqosd's notifications are read meanwhile (a held request's descriptor
 * goes to the store). */
pid_t spawn_crowd(const char *destination, int procs, int per_proc, int per_conn, bool held) {
        int pipefd[2];
        pid_t group = 0;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                die("pipe", errno);
        for (int p = 0; p < procs; p++) {
                pid_t child = fork();
                if (child < 0)
                        die("fork", errno);
                if (child == 0) {
                        setpgid(0, group);
                        crowd_member(destination, per_proc, per_conn, held, pipefd[1]);
                }
                setpgid(child, group);
                if (group == 0)
                        group = child;
        }
        for (int p = 0; p < procs;) {
                struct pollfd fds[2] = { { .fd = pipefd[0], .events = POLLIN }, { .fd = notify_fd, .events = POLLIN } };
                char ch;
                if (poll(fds, notify_fd >= 0 ? 2 : 1, -1) < 0)
                        die("poll", errno);
                if (fds[1].revents)
                        drain_notifications();
                if (!fds[0].revents)
                        continue;
                if (read(pipefd[0], &ch, 1) != 1)
                        die("crowd client", EIO);
                p++;
        }
        close(pipefd[0]);
        close(pipefd[1]);
        return group;
}

static void reap_crowd(pid_t group, int procs) {
        kill(-group, SIGKILL);
        for (int p = 0; p < procs; p++)
                waitpid(-group, NULL, 0);
}

/* hostile flood: another user sends no-reply calls as fast as it can (the
 * 128-reply bound does not hold them back); the receiver's memory and honest
 * callers' latency (GetLatency) meanwhile. Without polkitd on the bench's bus
 * every call is refused at once: the adversary suite has the polkitd case. */
typedef struct Flood {
        int calls, honest_calls;
        double secs, p50_before, p50_during;
        long rss_growth;
        double receiver_ms, bus_ms; /* CPU time during the flood */
} Flood;

static void flood_at(const Config *c, sd_bus *bus, const char *destination, pid_t receiver, Flood *f) {
        int calls = c->quick ? 10000 : 100000, honest = 200;
        uint64_t *before = calloc(honest, sizeof(uint64_t)), *during = calloc(200000, sizeof(uint64_t));
        if (!before || !during)
                die("memory", ENOMEM);
        for (int i = 0; i < honest; i++) {
                uint64_t t = now_ns();
                get_latency_at(bus, destination);
                before[i] = now_ns() - t;
        }
        long rss0 = status_field(receiver, NULL, "VmRSS"), peak = rss0;
        uint64_t r0 = cpu_ticks(receiver), b0 = cpu_ticks(bus_pid);

        pid_t child = fork();
        if (child < 0)
                die("fork", errno);
        if (child == 0) {
                sd_bus *b = NULL;
                if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0 ||
                    sd_bus_open_system(&b) < 0)
                        _exit(1);
                for (int i = 0; i < calls; i++) {
                        sd_bus_message *m = NULL;
                        if (sd_bus_message_new_method_call(b, &m, destination, PATH, QOS, "SetMinimumLatency") < 0 ||
                            sd_bus_message_append(m, "si", "cpu_dma", 5) < 0 ||
                            sd_bus_message_set_expect_reply(m, false) < 0 || sd_bus_send(b, m, NULL) < 0)
                                _exit(1);
                        sd_bus_message_unref(m);
                        if (i % 256 == 0)
                                (void) sd_bus_flush(b);
                }
                (void) sd_bus_flush(b);
                _exit(0);
        }
        int n = 0;
        uint64_t t0 = now_ns();
        while (n < 200000) {
                if (waitpid(child, NULL, WNOHANG) == child) {
                        /* What the flood left queued is behind this one: the next
                         * figure starts on a quiet bus. */
                        get_latency_at(bus, destination);
                        break;
                }
                uint64_t t = now_ns();
                get_latency_at(bus, destination);
                during[n++] = now_ns() - t;
                if (n % 16 == 0) {
                        long rss = status_field(receiver, NULL, "VmRSS");
                        if (rss > peak)
                                peak = rss;
                }
        }
        double tick_ms = 1000.0 / (double) sysconf(_SC_CLK_TCK);
        *f = (Flood){ .calls = calls,
                      .honest_calls = n,
                      .secs = (double) (now_ns() - t0) / 1e9,
                      .p50_before = p50_us(before, honest),
                      .rss_growth = peak - rss0,
                      .receiver_ms = (double) (cpu_ticks(receiver) - r0) * tick_ms,
                      .bus_ms = (double) (cpu_ticks(bus_pid) - b0) * tick_ms };
        f->p50_during = n > 0 ? p50_us(during, n) : f->p50_before;
        free(before);
        free(during);
}

/* The same flood at the reference peer, which drops each call at once: what
 * the bus alone does to an honest caller's latency meanwhile. */
void measure_flood(const Config *c, sd_bus *bus) {
        Flood f, ref;
        flood_at(c, bus, REFERENCE_NAME, reference_pid, &ref);
        flood_at(c, bus, BUS_NAME, daemon_pid, &f);
        Row *r = add_row("hostile flood");
        snprintf(r->value, sizeof(r->value),
                 "%d no-reply calls in %.1f s: RSS +%ld KiB; honest p50 %.0f µs = %.2f × before (reference "
                 "%.2f ×); CPU pmqosd %.0f, bus %.0f ms (reference %.0f, %.0f)",
                 f.calls, f.secs, f.rss_growth, f.p50_during, f.p50_during / f.p50_before,
                 ref.p50_during / ref.p50_before, f.receiver_ms, f.bus_ms, ref.receiver_ms, ref.bus_ms);
        snprintf(r->target, sizeof(r->target), "≤ 8192 KiB, ≤ 3 × before");
        r->number = f.p50_during / f.p50_before;
        r->has_target = true;
        r->pass = f.rss_growth <= 8192 && r->number <= 3;
}

typedef struct MassVanish {
        double released_ms; /* the kernel back at the baseline (pmqosd only), -1: not seen */
        double done_ms;     /* every RequestsChanged received */
        int changes;
        double receiver_ms, bus_ms; /* CPU time meanwhile (ticks of 10 ms) */
} MassVanish;

static void mass_vanish_at(const Config *c, const char *destination, int procs, int per_proc, MassVanish *ret) {
        bool at_pmqosd = strcmp(destination, BUS_NAME) == 0;
        pid_t receiver = at_pmqosd ? daemon_pid : reference_pid;
        int n = procs * per_proc;
        char match[512];

        pid_t group = spawn_crowd(destination, procs, per_proc, 10, false);
        usleep(300000); /* the signals of the requests are routed by now */
        sd_bus *watch = connect_bus();
        snprintf(match, sizeof(match),
                 "type='signal',sender='%s',path='" PATH "',interface='" QOS "',member='RequestsChanged'", destination);
        if (sd_bus_add_match(watch, NULL, match, NULL, NULL) < 0)
                die("watch RequestsChanged", EIO);
        ping(watch);
        int dev = open(c->device, O_RDONLY | O_CLOEXEC);
        uint64_t d0 = cpu_ticks(receiver), b0 = cpu_ticks(bus_pid);
        uint64_t t0 = now_ns(), released = at_pmqosd ? 0 : t0;
        int changes = 0;
        kill(-group, SIGKILL);
        while ((changes < n || !released) && now_ns() - t0 < 10000000000u) {
                sd_bus_message *m = NULL;
                int k = sd_bus_process(watch, &m);
                if (k < 0)
                        die("watch the broker", k);
                if (m && sd_bus_message_is_signal(m, QOS, "RequestsChanged"))
                        changes++;
                sd_bus_message_unref(m);
                int32_t v = 0;
                if (!released && pread(dev, &v, sizeof(v), 0) == sizeof(v) && v == kernel_baseline)
                        released = now_ns();
                if (k == 0 && changes < n)
                        sd_bus_wait(watch, 1000);
        }
        uint64_t done = now_ns();
        double tick_ms = 1000.0 / (double) sysconf(_SC_CLK_TCK);
        *ret = (MassVanish){ .released_ms = released && at_pmqosd ? (double) (released - t0) / 1e6 : -1.0,
                             .done_ms = (double) (done - t0) / 1e6,
                             .changes = changes,
                             .receiver_ms = (double) (cpu_ticks(receiver) - d0) * tick_ms,
                             .bus_ms = (double) (cpu_ticks(bus_pid) - b0) * tick_ms };
        close(dev);
        sd_bus_flush_close_unref(watch);
        for (int p = 0; p < procs; p++)
                waitpid(-group, NULL, 0);
}

void measure_crowds(const Config *c) {
        int procs = 10, per_proc = c->quick ? 10 : 100;
        int n = procs * per_proc;
        Row *r;

        /* connections: what each tracked connection with one request costs,
         * on a fresh pmqosd (memory freed by earlier rows would hide it). */
        restart_with(c, &(DaemonOptions){ .listen_fd = -1 });
        usleep(200000);
        long rss0 = status_field(daemon_pid, NULL, "VmRSS");
        pid_t group = spawn_crowd(BUS_NAME, procs, per_proc, 1, false);
        usleep(300000);
        long rss1 = status_field(daemon_pid, NULL, "VmRSS");
        reap_crowd(group, procs);
        usleep(500000);
        double per = (double) (rss1 - rss0) * 1024.0 / n;
        r = add_row("connections");
        snprintf(r->value, sizeof(r->value), "VmRSS +%ld KiB for %d connections = %.0f B each", rss1 - rss0, n, per);
        snprintf(r->target, sizeof(r->target), "≤ 2048 B each");
        r->number = per;
        r->has_target = true;
        r->pass = per <= 2048;

        /* mass vanish: all of them, 10 requests each, killed at once; and the
         * same at the reference: what the bus takes for those departures and
         * their signals. */
        MassVanish ref, f;
        mass_vanish_at(c, REFERENCE_NAME, procs, per_proc, &ref);
        long rss_before = status_field(daemon_pid, NULL, "VmRSS");
        mass_vanish_at(c, BUS_NAME, procs, per_proc, &f);
        usleep(500000);
        long rss_after = status_field(daemon_pid, NULL, "VmRSS");
        r = add_row("mass vanish");
        snprintf(r->value, sizeof(r->value),
                 "%d×10: free %.1f ms, %d/%d signals %.1f ms (CPU pmqosd %.0f, bus %.0f ms; reference %.1f ms, bus "
                 "%.0f ms); RSS %+ld KiB",
                 n, f.released_ms, f.changes, n, f.done_ms, f.receiver_ms, f.bus_ms, ref.done_ms, ref.bus_ms,
                 rss_after - rss_before);
        snprintf(r->target, sizeof(r->target), "≤ 50 ms, all signals, RSS ±256 KiB");
        r->number = f.done_ms;
        r->has_target = true;
        r->pass = f.released_ms >= 0 && f.changes == n && r->number <= 50 && labs(rss_after - rss_before) <= 256;
}

static void count_writes(const Config *c, sd_bus *bus, long *ret_writes, long *ret_changes) {
        /* strace counts pwrite64 calls on the device (-P: the runtime
         * record and the state file are written with pwrite too);
         * LatencyChanged signals count the changes. */
        char out[300], cmd[600];
        snprintf(out, sizeof(out), "%s/strace.txt", tmpdir);
        pid_t tracer = fork();
        if (tracer == 0) {
                char pidbuf[16];
                snprintf(pidbuf, sizeof(pidbuf), "%d", (int) daemon_pid);
                execlp("strace", "strace", "-f", "-qq", "-c", "-e", "trace=pwrite64", "-P", c->device, "-o", out, "-p",
                       pidbuf, (char *) NULL);
                _exit(127);
        }
        usleep(300000); /* strace attaches */

        sd_bus *watch = connect_bus();
        sd_bus_add_match(watch, NULL,
                         "type='signal',sender='" BUS_NAME "',path='" PATH "',interface='" QOS
                         "',member='LatencyChanged'",
                         NULL, NULL);
        sd_bus_call_method(watch, BUS_NAME, PATH, "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, "");

        uint32_t live[64];
        int n_live = 0;
        unsigned seed = 7;
        for (int i = 0; i < c->write_ops; i++) {
                int op = rand_r(&seed) % 100;
                int32_t v = rand_r(&seed) % 10 == 0 ? -1 : rand_r(&seed) % 1000;
                if (n_live == 0 || (op < 40 && n_live < 64))
                        live[n_live++] = request(bus, v);
                else if (op < 70)
                        update(bus, live[rand_r(&seed) % n_live], v);
                else {
                        int k = rand_r(&seed) % n_live;
                        cancel(bus, live[k]);
                        live[k] = live[--n_live];
                }
        }
        while (n_live > 0)
                cancel(bus, live[--n_live]);
        ping(bus);

        long changes = 0;
        sd_bus_message *m = NULL;
        for (uint64_t end = now_ns() + 500000000u; now_ns() < end;) {
                int r = sd_bus_process(watch, &m);
                if (r > 0 && m) {
                        if (sd_bus_message_is_signal(m, QOS, "LatencyChanged"))
                                changes++;
                        m = sd_bus_message_unref(m);
                } else if (r == 0)
                        sd_bus_wait(watch, 50000);
        }
        sd_bus_flush_close_unref(watch);

        kill(tracer, SIGINT);
        waitpid(tracer, NULL, 0);
        snprintf(cmd, sizeof(cmd), "awk '$NF==\"pwrite64\" {print $4}' %s", out);
        FILE *p = popen(cmd, "re");
        long writes = 0;
        if (!p || fscanf(p, "%ld", &writes) != 1)
                writes = -1;
        if (p)
                pclose(p);
        *ret_writes = writes;
        *ret_changes = changes;
}

/* Every figure after the request path: they load the broker and the bus. */
void writes_row(const Config *c, sd_bus *bus) {
        Row *r;
        long writes, changes;
        count_writes(c, bus, &writes, &changes);
        r = add_row("writes");
        snprintf(r->value, sizeof(r->value), "%ld writes / %ld changes = %.2f over %d ops", writes, changes,
                 changes ? (double) writes / (double) changes : 0.0, c->write_ops);
        snprintf(r->target, sizeof(r->target), "exactly 1.00");
        r->number = changes ? (double) writes / (double) changes : -1;
        r->has_target = r->exact = true;
        r->pass = writes == changes && writes > 0;
}
