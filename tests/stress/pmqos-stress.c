/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos-stress: N client processes make, update and cancel requests at
 * random and die at random (clean exit or SIGKILL) against a running broker
 * ($DBUS_SYSTEM_BUS_ADDRESS). At every quiet point all live workers park
 * between operations, and the observer checks that GetLatencyRequests and
 * GetLatency equal the model built from what each worker saw acknowledged,
 * and that the kernel holds at most the model's minimum.
 *
 *   pmqos-stress [--workers N] [--seconds S] [--device PATH]
 *
 * Prints operations, errors (must be 0) and checks; exits 1 on any error. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "contract.h"

#define BUS_NAME PMQOS_BUS_NAME
#define PATH PMQOS_OBJECT_PATH
#define QOS PMQOS_QOS_INTERFACE
#define NATIVE PMQOS_NATIVE_INTERFACE
#define MAX_LIVE 8
#define MAX_WORKERS 512

typedef struct Slot {
        _Atomic pid_t pid; /* 0: free */
        _Atomic int parked;
        _Atomic int n_live;
        uint32_t cookies[MAX_LIVE];
        int32_t values[MAX_LIVE];
        _Atomic uint64_t ops;
        _Atomic uint64_t errors;
} Slot;

typedef struct Shared {
        _Atomic int pause;
        Slot slots[MAX_WORKERS];
} Shared;

static Shared *shared;

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* ---- a worker ---- */

static int call_u(sd_bus *bus, const char *iface, const char *member, uint32_t *ret, const char *sig, ...) {
        sd_bus_message *m = NULL, *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        va_list ap;
        int r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, PATH, iface, member);
        if (r >= 0) {
                va_start(ap, sig);
                r = sd_bus_message_appendv(m, sig, ap);
                va_end(ap);
        }
        if (r >= 0)
                r = sd_bus_call(bus, m, 0, &e, &reply);
        if (r >= 0 && ret)
                r = sd_bus_message_read(reply, "u", ret);
        sd_bus_message_unref(m);
        sd_bus_message_unref(reply);
        sd_bus_error_free(&e);
        return r;
}

static void worker(Slot *slot, unsigned seed) {
        sd_bus *bus;
        if (sd_bus_open_system(&bus) < 0)
                _exit(2);
        int life = 20 + rand_r(&seed) % 400; /* operations before a clean exit */

        for (int i = 0; i < life; i++) {
                if (atomic_load(&shared->pause)) {
                        atomic_store(&slot->parked, 1);
                        while (atomic_load(&shared->pause))
                                usleep(1000);
                        atomic_store(&slot->parked, 0);
                }
                int n = atomic_load(&slot->n_live);
                int op = rand_r(&seed) % 100;
                int32_t v = rand_r(&seed) % 20 == 0 ? -1 : 50 + rand_r(&seed) % 100000;
                int r;
                if (n == 0 || (op < 45 && n < MAX_LIVE)) {
                        uint32_t cookie;
                        r = call_u(bus, QOS, "RequestLatency", &cookie, "sib", "cpu_dma", v, 0);
                        if (r >= 0) {
                                slot->cookies[n] = cookie;
                                slot->values[n] = v;
                                atomic_store(&slot->n_live, n + 1);
                        }
                } else if (op < 75) {
                        int k = rand_r(&seed) % n;
                        r = call_u(bus, NATIVE, "Update", NULL, "ui", slot->cookies[k], v);
                        if (r >= 0)
                                slot->values[k] = v;
                } else {
                        int k = rand_r(&seed) % n;
                        r = call_u(bus, QOS, "CancelRequest", NULL, "u", slot->cookies[k]);
                        if (r >= 0) {
                                slot->cookies[k] = slot->cookies[n - 1];
                                slot->values[k] = slot->values[n - 1];
                                atomic_store(&slot->n_live, n - 1);
                        }
                }
                if (r < 0)
                        atomic_fetch_add(&slot->errors, 1);
                atomic_fetch_add(&slot->ops, 1);
        }
        sd_bus_flush_close_unref(bus);
        _exit(0);
}

/* ---- the observer ---- */

static int spawn(int i, unsigned seed) {
        Slot *s = &shared->slots[i];
        atomic_store(&s->n_live, 0);
        atomic_store(&s->parked, 0);
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                worker(s, seed);
        atomic_store(&s->pid, pid);
        return 0;
}

static uint64_t total_ops, total_errors;

static void reap(int i) {
        Slot *s = &shared->slots[i];
        total_ops += atomic_load(&s->ops);
        total_errors += atomic_load(&s->errors);
        atomic_store(&s->ops, 0);
        atomic_store(&s->errors, 0);
        atomic_store(&s->n_live, 0);
        atomic_store(&s->pid, 0);
}

/* A worker that ended by itself: account for it. A non-zero exit is an error. */
static bool reap_if_exited(int i, unsigned *exits) {
        pid_t pid = atomic_load(&shared->slots[i].pid);
        int status;
        if (!pid || waitpid(pid, &status, WNOHANG) != pid)
                return false;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                total_errors++;
        reap(i);
        (*exits)++;
        return true;
}

static int32_t kernel_read(const char *device) {
        int32_t v = -1;
        int fd = open(device, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                if (pread(fd, &v, sizeof(v), 0) != sizeof(v))
                        v = -1;
                close(fd);
        }
        return v;
}

/* Returns the number of mismatches between the broker and the model. */
static int check(sd_bus *bus, int n_workers, const char *device, bool final_try) {
        sd_bus_message *reply = NULL;
        size_t model_n = 0, broker_n = 0;
        int32_t model_min = -1;
        int bad = 0;

        for (int i = 0; i < n_workers; i++) {
                Slot *s = &shared->slots[i];
                if (!atomic_load(&s->pid))
                        continue;
                for (int k = 0; k < atomic_load(&s->n_live); k++) {
                        model_n++;
                        int32_t v = s->values[k];
                        if (v >= 0 && (model_min < 0 || v < model_min))
                                model_min = v;
                }
        }

        if (sd_bus_call_method(bus, BUS_NAME, PATH, QOS, "GetLatencyRequests", NULL, &reply, "") < 0)
                return 1000000;
        sd_bus_message_enter_container(reply, 'a', "(uuusxbssi)");
        uint32_t cookie, uid, pid;
        const char *exec, *type, *reason;
        int64_t ts;
        int persistent;
        int32_t value;
        while (sd_bus_message_read(reply, "(uuusxbssi)", &cookie, &uid, &pid, &exec, &ts, &persistent, &type, &reason,
                                   &value) > 0) {
                broker_n++;
                bool found = false;
                for (int i = 0; i < n_workers && !found; i++) {
                        Slot *s = &shared->slots[i];
                        if (atomic_load(&s->pid) != (pid_t) pid)
                                continue;
                        for (int k = 0; k < atomic_load(&s->n_live); k++)
                                if (s->cookies[k] == cookie) {
                                        found = true;
                                        if (s->values[k] != value) {
                                                bad++;
                                                if (final_try)
                                                        fprintf(stderr, "request %" PRIu32 ": broker %d, model %d\n",
                                                                cookie, value, s->values[k]);
                                        }
                                }
                }
                if (!found) {
                        bad++;
                        if (final_try)
                                fprintf(stderr, "request %" PRIu32 " of pid %" PRIu32 " is not in the model\n", cookie,
                                        pid);
                }
        }
        sd_bus_message_unref(reply);
        if (broker_n != model_n) {
                bad++;
                if (final_try)
                        fprintf(stderr, "broker lists %zu requests, model has %zu\n", broker_n, model_n);
        }

        int32_t effective = 0;
        if (sd_bus_call_method(bus, BUS_NAME, PATH, QOS, "GetLatency", NULL, &reply, "s", "cpu_dma") >= 0) {
                sd_bus_message_read(reply, "i", &effective);
                sd_bus_message_unref(reply);
        }
        if (effective != model_min) {
                bad++;
                if (final_try)
                        fprintf(stderr, "effective %d, model %d\n", effective, model_min);
        }
        if (device && model_min >= 0 && kernel_read(device) > model_min) {
                bad++;
                if (final_try)
                        fprintf(stderr, "kernel %d above model %d\n", kernel_read(device), model_min);
        }
        return bad;
}

/* A quiet point: everyone parks between operations, the broker's view is
 * compared with the model, then the workers go on. Returns the mismatches. */
static unsigned quiet_point(sd_bus *bus, int n_workers, const char *device, unsigned *exits, unsigned *seed) {
        atomic_store(&shared->pause, 1);
        for (uint64_t deadline = now_ms() + 20000; now_ms() < deadline;) {
                bool all = true;
                for (int i = 0; i < n_workers; i++) {
                        Slot *s = &shared->slots[i];
                        if (!reap_if_exited(i, exits) && atomic_load(&s->pid) && !atomic_load(&s->parked))
                                all = false;
                }
                if (all)
                        break;
                usleep(2000);
        }
        /* Vanished clients take the broker a moment: allow it one. */
        int bad = 0;
        for (int attempt = 0; attempt < 100; attempt++) {
                bad = check(bus, n_workers, device, false);
                if (bad == 0)
                        break;
                usleep(20000);
        }
        if (bad)
                bad = check(bus, n_workers, device, true);
        atomic_store(&shared->pause, 0);
        for (int i = 0; i < n_workers; i++)
                if (!atomic_load(&shared->slots[i].pid))
                        spawn(i, rand_r(seed));
        return (unsigned) bad;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "workers", required_argument, NULL, 'w' },
                { "seconds", required_argument, NULL, 's' },
                { "device", required_argument, NULL, 'd' },
                {},
        };
        int n_workers = 200, seconds = 60, c;
        const char *device = NULL;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'w':
                        n_workers = atoi(optarg);
                        break;
                case 's':
                        seconds = atoi(optarg);
                        break;
                case 'd':
                        device = optarg;
                        break;
                default:
                        return 2;
                }
        if (n_workers < 1 || n_workers > MAX_WORKERS || seconds < 1)
                return 2;

        shared = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED)
                return 1;
        sd_bus *bus;
        if (sd_bus_open_system(&bus) < 0) {
                fprintf(stderr, "pmqos-stress: no bus\n");
                return 1;
        }

        unsigned seed = 4242;
        for (int i = 0; i < n_workers; i++)
                spawn(i, rand_r(&seed));

        uint64_t end = now_ms() + (uint64_t) seconds * 1000u, next_check = now_ms() + 2000;
        unsigned checks = 0, mismatches = 0, kills = 0, exits = 0;
        while (now_ms() < end) {
                /* Replace workers that finished; kill one now and then. */
                for (int i = 0; i < n_workers; i++)
                        if (reap_if_exited(i, &exits))
                                spawn(i, rand_r(&seed));
                int victim = rand_r(&seed) % n_workers;
                pid_t vp = atomic_load(&shared->slots[victim].pid);
                if (vp && rand_r(&seed) % 4 == 0) {
                        kill(vp, SIGKILL);
                        waitpid(vp, NULL, 0);
                        reap(victim);
                        kills++;
                        spawn(victim, rand_r(&seed));
                }
                usleep(20000);

                if (now_ms() < next_check)
                        continue;
                checks++;
                mismatches += quiet_point(bus, n_workers, device, &exits, &seed);
                next_check = now_ms() + 2000;
        }

        for (int i = 0; i < n_workers; i++) {
                pid_t pid = atomic_load(&shared->slots[i].pid);
                if (pid) {
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                        reap(i);
                }
        }
        sd_bus_flush_close_unref(bus);
        printf("operations %" PRIu64 ", errors %" PRIu64 ", quiet-point checks %u, mismatches %u, "
               "clean exits %u, kills %u\n",
               total_ops, total_errors, checks, mismatches, exits, kills);
        return total_errors == 0 && mismatches == 0 && checks > 0 ? 0 : 1;
}
