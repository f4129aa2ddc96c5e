/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whatever a hostile owner of pmqosd's name answers to Explain() or
 * ExplainFolded(), libpmqos's reading of it (explain_read(), with the cpus'
 * costs and writers of libpmqos-cpus.c) either refuses it or gives an
 * explanation whose arrays hold what their counts say, and frees it all.
 * The input is a program that builds the reply's a{sv}: each byte picks a
 * key (any the reader knows, or another) and the type of its value, nested
 * dictionaries and arrays of them to a small depth. */

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "libpmqos-client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const keys[] = { "effective",
                                    "kernel",
                                    "floor",
                                    "bound_by",
                                    "binding",
                                    "external_holders",
                                    "cpus",
                                    "kernel_ignores_writes",
                                    "external_holders_complete",
                                    "rules",
                                    "rules_followed",
                                    "wakeup_effective",
                                    "wakeup_kernel",
                                    "external_holders_left_out",
                                    "external_holders_unscanned",
                                    "cpu_groups",
                                    "cpu",
                                    "bound",
                                    "resume_latency",
                                    "foreign",
                                    "cstates",
                                    "shallow_idle",
                                    "blocked_entries",
                                    "verified",
                                    "foreign_writer",
                                    "name",
                                    "latency",
                                    "allowed",
                                    "disabled",
                                    "usage",
                                    "time",
                                    "disabled_by",
                                    "pid",
                                    "comm",
                                    "unit",
                                    "value",
                                    "when",
                                    "uid",
                                    "exec",
                                    "processes",
                                    "file",
                                    "state",
                                    "holds",
                                    "cookie",
                                    "reason",
                                    "other" };
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

typedef struct Input {
        const uint8_t *p;
        size_t n;
} Input;

static unsigned next(Input *in) {
        if (in->n == 0)
                return 0;
        in->n--;
        return *in->p++;
}

static int append_dict(sd_bus_message *m, Input *in, unsigned depth);

/* An aa{sv} of up to 3 dictionaries (or an au of CPU numbers: byte & 1). */
static int append_array(sd_bus_message *m, Input *in, unsigned depth) {
        unsigned n = next(in) % 4;
        int r = sd_bus_message_open_container(m, 'a', "a{sv}");
        for (unsigned i = 0; r >= 0 && i < n; i++)
                r = append_dict(m, in, depth + 1);
        return r < 0 ? r : sd_bus_message_close_container(m);
}

static int append_value(sd_bus_message *m, Input *in, unsigned depth) {
        unsigned type = next(in) % 9, v = next(in);
        switch (type) {
        case 0:
                return sd_bus_message_append(m, "v", "u", v == 255 ? UINT32_MAX : v);
        case 1:
                return sd_bus_message_append(m, "v", "i", (int32_t) v - 2);
        case 2:
                return sd_bus_message_append(m, "v", "t", (uint64_t) v << (v % 40));
        case 3:
                return sd_bus_message_append(m, "v", "x", (int64_t) v - 128);
        case 4:
                return sd_bus_message_append(m, "v", "s", v % 2 ? "n/a" : "");
        case 5:
                return sd_bus_message_append(m, "v", "b", (int) (v & 1));
        case 6: {
                uint32_t cpus[] = { v, v + 1, 9000 };
                return sd_bus_message_append(m, "v", "au", v % 4, cpus[0], cpus[1], cpus[2]);
        }
        case 7: {
                int r = sd_bus_message_open_container(m, 'v', "a{sv}");
                if (r >= 0)
                        r = depth < 4 ? append_dict(m, in, depth + 1) : sd_bus_message_append(m, "a{sv}", 0);
                return r < 0 ? r : sd_bus_message_close_container(m);
        }
        default: {
                int r = sd_bus_message_open_container(m, 'v', "aa{sv}");
                if (r >= 0)
                        r = depth < 4 ? append_array(m, in, depth) : sd_bus_message_append(m, "aa{sv}", 0);
                return r < 0 ? r : sd_bus_message_close_container(m);
        }
        }
}

/* An a{sv} of up to 15 entries: a key, then its value. */
static int append_dict(sd_bus_message *m, Input *in, unsigned depth) {
        unsigned n = next(in) % 16;
        int r = sd_bus_message_open_container(m, 'a', "{sv}");
        for (unsigned i = 0; r >= 0 && i < n && in->n > 0; i++) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", keys[next(in) % N_KEYS]);
                if (r >= 0)
                        r = append_value(m, in, depth);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        return r < 0 ? r : sd_bus_message_close_container(m);
}

/* Touches every string and array the explanation says it has (ASan finds a lie). */
static size_t walk(const pmqos_explanation *e) {
        size_t sum = strlen(e->bound_by);
        for (size_t i = 0; i < e->n_cpus; i++) {
                sum += strlen(e->cpus[i].resume_latency);
                for (size_t k = 0; k < e->cpus[i].n_cstates; k++)
                        sum += strlen(e->cpus[i].cstates[k].name);
                const pmqos_cpu_custody_info *c = pmqos_explanation_custody(e, i);
                if (c) {
                        sum += strlen(c->foreign_writer.comm) + strlen(c->foreign_writer.unit);
                        if (c->n_disabled_by != e->cpus[i].n_cstates)
                                abort();
                        for (size_t k = 0; k < c->n_disabled_by; k++)
                                sum += strlen(c->disabled_by[k].value) + c->disabled_by[k].pid;
                }
        }
        for (size_t i = 0; i < e->n_cpu_costs; i++)
                sum += e->cpu_costs[i].cpu;
        for (size_t i = 0; i < e->n_cpu_groups; i++)
                for (size_t k = 0; k < e->cpu_groups[i].n_cpus; k++)
                        sum += e->cpu_groups[i].cpus[k];
        return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static sd_bus *bus; /* only to make messages: never connected */
        static int fds[2] = { -1, -1 };
        if (!bus) {
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0 || sd_bus_new(&bus) < 0 ||
                    sd_bus_set_fd(bus, fds[0], fds[0]) < 0 || sd_bus_start(bus) < 0)
                        abort();
        }
        sd_bus_message *m = NULL;
        Input in = { data, size };
        int r = sd_bus_message_new_signal(bus, &m, "/org/freedesktop/PMQoS", "org.freedesktop.PMQoS", "Fuzz");
        if (r >= 0)
                r = append_dict(m, &in, 0);
        if (r >= 0)
                r = sd_bus_message_seal(m, 1, 0);
        if (r >= 0) {
                pmqos_explanation *e = NULL;
                if (explain_read(m, &e) >= 0) {
                        volatile size_t sum = walk(e);
                        (void) sum;
                } else if (e)
                        abort(); /* a failure leaves nothing */
                pmqos_explanation_free(e);
        }
        sd_bus_message_unref(m);
        return 0;
}
