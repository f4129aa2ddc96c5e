/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Figures of one client: request+cancel pairs against the floor and the reference, scaling with held requests,
 * throughput, vanishing clients, idle wake-ups. */

#include "bench.h"

/* ---- figures ---- */

/* The floor (Ping), the pairs and, if asked, the reference's pairs are
 * measured in alternating slices, so all see the same moments of a machine
 * whose speed drifts. */
enum { SLICES = 20 };

static void timed_pings(sd_bus *bus, uint64_t *t, int n) {
        for (int i = 0; i < n; i++) {
                uint64_t a = now_ns();
                ping(bus);
                t[i] = now_ns() - a;
        }
}

void timed_pairs(sd_bus *bus, const char *destination, uint64_t *t, int n, int first) {
        for (int i = 0; i < n; i++) {
                int32_t v = 100 + ((first + i) % 500); /* differs each time: the kernel is written twice per pair */
                uint64_t a = now_ns();
                uint32_t cookie = request_at(bus, destination, v);
                cancel_at(bus, destination, cookie);
                t[i] = now_ns() - a;
        }
}

/* CPU time of pid's main thread in ns (the scheduler's own count, not ticks). */
static uint64_t cpu_ns(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/schedstat", (int) pid);
        FILE *f = fopen(path, "re");
        unsigned long long ns = 0;
        if (!f || fscanf(f, "%llu", &ns) != 1)
                ns = 0;
        if (f)
                fclose(f);
        return ns;
}

/* CPU per pair of the broker and of the reference, and the working
 * reference's pair p50, over the timed pairs */
double pair_cpu_us, reference_cpu_us, reference_work_cpu_us, reference_work_us;

void measure_pairs(const Config *c, sd_bus *bus, double *ret_floor_us, double *ret_pair_us, double *ret_reference_us) {
        uint64_t *pings = calloc((size_t) c->pings, sizeof(uint64_t));
        uint64_t *pairs = calloc((size_t) c->pairs, sizeof(uint64_t));
        uint64_t *refs = calloc((size_t) c->pairs, sizeof(uint64_t));
        uint64_t *works = calloc((size_t) c->pairs, sizeof(uint64_t));
        if (!pings || !pairs || !refs || !works)
                die("allocate samples", ENOMEM);

        for (int i = 0; i < c->pings / 10; i++) /* warm up every path */
                ping(bus);
        for (int i = 0; i < c->pairs / 10; i++) {
                cancel(bus, request(bus, 100 + i));
                if (ret_reference_us) {
                        cancel_at(bus, REFERENCE_NAME, request_at(bus, REFERENCE_NAME, 100 + i));
                        cancel_at(bus, REFERENCE_WORK_NAME, request_at(bus, REFERENCE_WORK_NAME, 100 + i));
                }
        }

        uint64_t daemon_cpu = 0, reference_cpu = 0, work_cpu = 0;
        for (int s = 0; s < SLICES; s++) {
                int p0 = c->pings * s / SLICES, p1 = c->pings * (s + 1) / SLICES;
                int q0 = c->pairs * s / SLICES, q1 = c->pairs * (s + 1) / SLICES;
                timed_pings(bus, pings + p0, p1 - p0);
                uint64_t d0 = cpu_ns(daemon_pid);
                timed_pairs(bus, BUS_NAME, pairs + q0, q1 - q0, q0);
                daemon_cpu += cpu_ns(daemon_pid) - d0;
                if (ret_reference_us) {
                        uint64_t r0 = cpu_ns(reference_pid);
                        timed_pairs(bus, REFERENCE_NAME, refs + q0, q1 - q0, q0);
                        reference_cpu += cpu_ns(reference_pid) - r0;
                        uint64_t w0 = cpu_ns(reference_work_pid);
                        timed_pairs(bus, REFERENCE_WORK_NAME, works + q0, q1 - q0, q0);
                        work_cpu += cpu_ns(reference_work_pid) - w0;
                }
        }
        if (ret_reference_us) {
                pair_cpu_us = (double) daemon_cpu / 1e3 / c->pairs;
                reference_cpu_us = (double) reference_cpu / 1e3 / c->pairs;
                reference_work_cpu_us = (double) work_cpu / 1e3 / c->pairs;
                reference_work_us = p50_us(works, c->pairs);
        }
        *ret_floor_us = p50_us(pings, c->pings);
        *ret_pair_us = p50_us(pairs, c->pairs);
        if (ret_reference_us)
                *ret_reference_us = p50_us(refs, c->pairs);
        free(pings);
        free(pairs);
        free(refs);
        free(works);
}

void hold_many(sd_bus **conns, int n_conns, int per_conn, int32_t base) {
        for (int i = 0; i < n_conns; i++) {
                conns[i] = connect_bus();
                for (int k = 0; k < per_conn; k++) {
                        request(conns[i], base + i * per_conn + k);
                        drain_notifications(); /* STATUS= after each change */
                }
        }
}

static void release_many(sd_bus **conns, int n_conns) {
        for (int i = 0; i < n_conns; i++)
                sd_bus_flush_close_unref(conns[i]);
}

typedef struct Counter {
        uint64_t ops;
} Counter;

static void throughput_worker(int secs, const char *destination, bool pings, volatile Counter *out, int idx) {
        sd_bus *bus = connect_bus();
        uint64_t end = now_ns() + (uint64_t) secs * 1000000000u, ops = 0;
        int32_t v = 1000 + idx * 1000;
        while (now_ns() < end) {
                if (pings) {
                        ping(bus);
                        ops++;
                        continue;
                }
                uint32_t cookie = request_at(bus, destination, v++ % 100000 + 1);
                update_at(bus, destination, cookie, v % 100000 + 2);
                cancel_at(bus, destination, cookie);
                ops += 3;
        }
        out[idx].ops = ops;
        sd_bus_flush_close_unref(bus);
        _exit(0);
}

/* Eight workers calling destination (pings: Ping at pmqosd) for a while;
 * the CPU ticks of server (pmqosd or a reference) and of the bus meanwhile. */
static double run_workers(const Config *c, const char *destination, pid_t server, bool pings,
                          uint64_t *ret_daemon_ticks, uint64_t *ret_bus_ticks) {
        enum { N = 8 };
        volatile Counter *counters =
                mmap(NULL, sizeof(Counter) * N, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        uint64_t d0 = cpu_ticks(server), b0 = cpu_ticks(bus_pid);
        uint64_t start = now_ns();
        for (int i = 0; i < N; i++)
                if (fork() == 0)
                        throughput_worker(c->throughput_secs, destination, pings, counters, i);
        for (int i = 0; i < N; i++)
                wait(NULL);
        double secs = (double) (now_ns() - start) / 1e9;
        *ret_daemon_ticks = cpu_ticks(server) - d0;
        *ret_bus_ticks = cpu_ticks(bus_pid) - b0;
        uint64_t total = 0;
        for (int i = 0; i < N; i++)
                total += counters[i].ops;
        munmap((void *) counters, sizeof(Counter) * N);
        return (double) total / secs;
}

/* A child holding vanish_requests requests at destination until killed;
 * its unique bus name in unique. */
static pid_t spawn_vanisher(const Config *c, const char *destination, char *unique, size_t size) {
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                die("pipe", errno);
        pid_t child = fork();
        if (child == 0) {
                sd_bus *bus = connect_bus();
                const char *name = NULL;
                for (int k = 0; k < c->vanish_requests; k++)
                        request_at(bus, destination, 10 + k);
                if (sd_bus_get_unique_name(bus, &name) < 0 ||
                    write(pipefd[1], name, strlen(name) + 1) != (ssize_t) strlen(name) + 1)
                        _exit(1);
                pause();
                _exit(0);
        }
        if (read(pipefd[0], unique, size - 1) <= 0)
                die("vanish child", EIO);
        close(pipefd[0]);
        close(pipefd[1]);
        return child;
}

/* vanish: a client holding vanish_requests requests is killed; the time
 * from the kill to LatencyChanged(-1), sent right after the kernel write.
 * The bus's own share is the time to its NameOwnerChanged for the client,
 * seen by the same watcher: pmqosd cannot act before it hears that. */
static void measure_vanish(const Config *c, const char *destination, double *ret_released_us, double *ret_bus_us) {
        uint64_t *t = calloc((size_t) c->vanish_rounds, sizeof(uint64_t));
        uint64_t *t_bus = calloc((size_t) c->vanish_rounds, sizeof(uint64_t));
        if (!t || !t_bus)
                die("memory", ENOMEM);
        for (int round = 0; round < c->vanish_rounds; round++) {
                char unique[256] = "";
                pid_t child = spawn_vanisher(c, destination, unique, sizeof(unique));
                /* Let the bus finish routing the signals of those requests: the
                 * figure is about a quiet client dying, not about that backlog. */
                usleep(200000);
                bool at_pmqosd = strcmp(destination, BUS_NAME) == 0;
                int fd = open(c->device, O_RDONLY | O_CLOEXEC);
                int32_t v = 0;
                if (at_pmqosd && (pread(fd, &v, sizeof(v), 0) != sizeof(v) || v > 10))
                        die("the vanish client's bound is not in the kernel", EIO);

                /* Block on the signals instead of spinning on the device: on two
                 * cores a spinning reader would steal the CPU the dying client
                 * needs to exit. */
                sd_bus *watch = connect_bus();
                char match[512], released_match[512];
                snprintf(released_match, sizeof(released_match),
                         "type='signal',sender='%s',path='" PATH "',interface='" QOS "',member='LatencyChanged'",
                         destination);
                snprintf(match, sizeof(match),
                         "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                         "member='NameOwnerChanged',arg0='%s'",
                         unique);
                if (sd_bus_add_match(watch, NULL, released_match, NULL, NULL) < 0 ||
                    sd_bus_add_match(watch, NULL, match, NULL, NULL) < 0)
                        die("watch the vanish", EIO);
                ping(watch);
                uint64_t a = now_ns(), reaped = 0, left = 0;
                kill(child, SIGKILL);
                bool released = false;
                while (!released && now_ns() - a < 5000000000u) {
                        sd_bus_message *m = NULL;
                        int r = sd_bus_process(watch, &m);
                        if (r < 0)
                                die("watch the broker", r);
                        if (m && sd_bus_message_is_signal(m, QOS, "LatencyChanged")) {
                                const char *type;
                                int32_t value;
                                if (sd_bus_message_read(m, "si", &type, &value) >= 0 && value == -1)
                                        released = true;
                        } else if (m && sd_bus_message_is_signal(m, "org.freedesktop.DBus", "NameOwnerChanged") &&
                                   !left)
                                left = now_ns();
                        sd_bus_message_unref(m);
                        if (r == 0)
                                sd_bus_wait(watch, 100000);
                }
                t[round] = now_ns() - a;
                t_bus[round] = left ? left - a : t[round];
                if (at_pmqosd && (pread(fd, &v, sizeof(v), 0) != sizeof(v) || v != kernel_baseline))
                        die("the kernel still holds the vanished client's bound", EIO);
                if (waitpid(child, NULL, WNOHANG) == child)
                        reaped = now_ns();
                if (getenv("PMQOS_BENCH_DEBUG"))
                        fprintf(stderr, "vanish at %s: NameOwnerChanged after %.0f µs, released after %.0f µs%s\n",
                                destination, (double) t_bus[round] / 1e3, (double) t[round] / 1e3,
                                reaped ? " (client reaped)" : "");
                sd_bus_flush_close_unref(watch);
                close(fd);
                if (!reaped)
                        waitpid(child, NULL, 0);
        }
        *ret_released_us = p50_us(t, c->vanish_rounds);
        *ret_bus_us = p50_us(t_bus, c->vanish_rounds);
        free(t);
        free(t_bus);
}

/* scaling, and memory while those requests are live */
void measure_scaling(const Config *c, sd_bus *bus, double floor_us, double pair_us, long rss_start) {
        Row *r;

        sd_bus **held = calloc((size_t) c->held_conns, sizeof(sd_bus *));
        hold_many(held, c->held_conns, c->held_per_conn, 1000000);
        double floor_loaded_us, pair_loaded_us;
        measure_pairs(c, bus, &floor_loaded_us, &pair_loaded_us, NULL);
        /* Against the floor measured alongside: the machine's drift between
         * the two phases is not the broker's. Both ratios are shown. */
        double raw = pair_loaded_us / pair_us;
        double corrected = raw / (floor_loaded_us / floor_us);
        r = add_row("scaling");
        snprintf(r->value, sizeof(r->value), "pair p50 %.1f µs with %d live = %.2f × empty, %.2f floor-corrected",
                 pair_loaded_us, c->held_conns * c->held_per_conn, raw, corrected);
        snprintf(r->target, sizeof(r->target), "≤ 1.15 × empty (corrected)");
        r->number = corrected;
        r->has_target = true;
        r->pass = r->number <= 1.15;

        /* memory, while those requests are live */
        long rss_loaded = status_field(daemon_pid, NULL, "VmRSS");
        r = add_row("memory");
        snprintf(r->value, sizeof(r->value), "VmRSS +%ld KiB with %d live", rss_loaded - rss_start,
                 c->held_conns * c->held_per_conn);
        snprintf(r->target, sizeof(r->target), "≤ 4096 KiB");
        r->number = (double) (rss_loaded - rss_start);
        r->has_target = true;
        r->pass = rss_loaded - rss_start <= 4096;
        release_many(held, c->held_conns);
        free(held);
}

void measure_throughput(const Config *c) {
        Row *r;
        uint64_t d_ping, b_ping, d_req, b_req, w_req, bw_req;
        double ping_rate = run_workers(c, BUS_NAME, daemon_pid, true, &d_ping, &b_ping);
        double op_rate = run_workers(c, BUS_NAME, daemon_pid, false, &d_req, &b_req);
        /* The working reference under the same load: what the contract's
         * replies, signals, kernel writes and record lines cost against the
         * bus's routing of them, before any broker work. */
        (void) run_workers(c, REFERENCE_WORK_NAME, reference_work_pid, false, &w_req, &bw_req);
        r = add_row("throughput");
        double cpu_ratio = b_req ? (double) d_req / (double) b_req : 0;
        double work_ratio = bw_req ? (double) w_req / (double) bw_req : 0;
        snprintf(r->value, sizeof(r->value), "%.0f ops/s = %.2f × Ping; CPU pmqosd/bus %.2f (working reference %.2f)",
                 op_rate, op_rate / ping_rate, cpu_ratio, work_ratio);
        snprintf(r->target, sizeof(r->target), "pmqosd CPU ≤ 0.50 × %s", bus_name);
        r->number = cpu_ratio;
        r->has_target = true;
        r->pass = cpu_ratio <= 0.50;
}

void vanish_row(const Config *c) {
        Row *r;
        double vanish_us, bus_us, ref_us, ref_bus_us;
        measure_vanish(c, REFERENCE_NAME, &ref_us, &ref_bus_us);
        measure_vanish(c, BUS_NAME, &vanish_us, &bus_us);
        r = add_row("vanish");
        snprintf(r->value, sizeof(r->value),
                 "p50 %.0f µs to release %d requests (NameOwnerChanged %.0f µs; reference %.0f µs)", vanish_us,
                 c->vanish_requests, bus_us, ref_us);
        snprintf(r->target, sizeof(r->target), "≤ 1000 µs");
        r->number = vanish_us;
        r->has_target = true;
        r->pass = vanish_us <= 1000;
}

void measure_idle(const Config *c) {
        Row *r;
        sd_bus *idle_conn = connect_bus();
        for (int k = 0; k < (c->quick ? 100 : 1000); k++)
                request(idle_conn, 5000 + k);
        usleep(500000);
        long cs0 = ctx_switches(daemon_pid);
        sleep((unsigned) c->idle_secs);
        long cs1 = ctx_switches(daemon_pid);
        r = add_row("idle");
        snprintf(r->value, sizeof(r->value), "%ld context switches in %d s, %d live", cs1 - cs0, c->idle_secs,
                 c->quick ? 100 : 1000);
        snprintf(r->target, sizeof(r->target), "0");
        r->number = (double) (cs1 - cs0);
        r->has_target = r->exact = true;
        r->pass = cs1 - cs0 == 0;

        /* A 0 µs bound held: every state above POLL blocked, the ledger
         * charging it, still no timer. */
        request(idle_conn, 0);
        usleep(500000);
        cs0 = ctx_switches(daemon_pid);
        sleep((unsigned) c->idle_secs);
        cs1 = ctx_switches(daemon_pid);
        r = add_row("idle bound");
        snprintf(r->value, sizeof(r->value), "%ld context switches in %d s, a 0 µs bound held (the ledger on)",
                 cs1 - cs0, c->idle_secs);
        snprintf(r->target, sizeof(r->target), "0");
        r->number = (double) (cs1 - cs0);
        r->has_target = r->exact = true;
        r->pass = cs1 - cs0 == 0;
        sd_bus_flush_close_unref(idle_conn);
        usleep(100000);
}
