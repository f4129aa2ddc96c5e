/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the request argument checks that the bus handlers use —
 * the "type" string, the value, and the a{sv} options of Request — on
 * messages built from the input: keys, variant types and values chosen by
 * the fuzzer, including duplicates, wrong types and huge arrays. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "bus/request-options.h"
#include "model/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Input {
        const uint8_t *p;
        size_t n;
} Input;

static uint8_t take8(Input *in) {
        if (in->n == 0)
                return 0;
        in->n--;
        return *in->p++;
}

static uint32_t take32(Input *in) {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++)
                v = v << 8 | take8(in);
        return v;
}

/* A NUL-terminated, valid-UTF-8 (ASCII) string of up to len bytes. */
static char *take_string(Input *in, size_t len) {
        char *s = malloc(len + 1);
        size_t k = 0;
        while (k < len && in->n > 0) {
                uint8_t c = take8(in);
                s[k++] = (char) (c % 95 + 32);
        }
        s[k] = 0;
        return s;
}

static sd_bus *fake_bus(void) {
        /* Messages need a started bus object; nothing is ever sent on it. */
        static sd_bus *bus;
        if (!bus) {
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || sd_bus_new(&bus) < 0 ||
                    sd_bus_set_fd(bus, sv[0], sv[0]) < 0 || sd_bus_start(bus) < 0)
                        abort();
        }
        return bus;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const keys[] = { "reason", "persistent", "timeout", "cpus", "", "colour" };
        static const char *const types[] = { "s", "b", "u", "i", "au", "ai", "x" };
        Input in = { data, size };
        sd_bus_message *m = NULL;
        ValidationError err;
        QosType t;

        /* type and value, as RequestLatency/Request read them */
        char *type = take_string(&in, take8(&in) % 16);
        (void) parse_qos_type(type, &t, &err);
        free(type);
        (void) check_latency_value((int32_t) take32(&in), &err);
        uint32_t max_timeout = take32(&in) % 200000 + 1;

        if (sd_bus_message_new_method_call(fake_bus(), &m, "org.freedesktop.PMQoS", "/org/freedesktop/PMQoS",
                                           "org.freedesktop.PMQoS", "Request") < 0)
                abort();
        sd_bus_message_open_container(m, 'a', "{sv}");
        unsigned n_entries = take8(&in) % 8;
        for (unsigned i = 0; i < n_entries; i++) {
                uint8_t k = take8(&in);
                const char *key = keys[k % (sizeof(keys) / sizeof(keys[0]))];
                char *custom = NULL;
                if (k >= 200)
                        key = custom = take_string(&in, take8(&in) % 32);
                const char *ty = types[take8(&in) % (sizeof(types) / sizeof(types[0]))];
                sd_bus_message_open_container(m, 'e', "sv");
                sd_bus_message_append(m, "s", key);
                sd_bus_message_open_container(m, 'v', ty);
                if (strcmp(ty, "s") == 0) {
                        char *s = take_string(&in, take8(&in) * 2u);
                        sd_bus_message_append(m, "s", s);
                        free(s);
                } else if (strcmp(ty, "b") == 0)
                        sd_bus_message_append(m, "b", take8(&in) & 1);
                else if (strcmp(ty, "u") == 0 || strcmp(ty, "i") == 0)
                        sd_bus_message_append_basic(m, ty[0], &(uint32_t){ take32(&in) });
                else if (strcmp(ty, "x") == 0)
                        sd_bus_message_append(m, "x", (int64_t) take32(&in));
                else {
                        size_t n = take8(&in) * 8u;
                        uint32_t *a = calloc(n + 1, sizeof(uint32_t));
                        for (size_t j = 0; j < n; j++)
                                a[j] = take8(&in) < 250 ? take8(&in) : take32(&in);
                        sd_bus_message_append_array(m, ty[1], a, n * sizeof(uint32_t));
                        free(a);
                }
                sd_bus_message_close_container(m);
                sd_bus_message_close_container(m);
                free(custom);
        }
        sd_bus_message_close_container(m);
        if (sd_bus_message_seal(m, 1, 0) < 0 || sd_bus_message_rewind(m, true) < 0)
                abort();

        RequestOptions o;
        err = (ValidationError){};
        int r = parse_request_options(m, max_timeout, &o, &err);
        if (r >= 0) {
                /* What is accepted obeys the rules the daemon relies on. */
                if (o.timeout_sec > max_timeout || (o.reason && strlen(o.reason) > PMQOS_REASON_MAX) ||
                    o.n_cpus > PMQOS_CPUS_MAX)
                        abort();
                for (size_t i = 0; i < o.n_cpus; i++)
                        if (o.cpus[i] >= PMQOS_MAX_CPUS)
                                abort();
                request_options_done(&o);
        } else if (r == -EINVAL && (!err.name || !err.message[0]))
                abort(); /* every refusal says why */
        sd_bus_message_unref(m);
        return 0;
}
