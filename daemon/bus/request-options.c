/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The a{sv} options of org.freedesktop.PMQoS.Request, read from the message
 * and checked key by key. */

#include "bus/request-options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"

void request_options_done(RequestOptions *o) {
        free(o->reason);
        free(o->cpus);
        *o = (RequestOptions){};
}

static int option_error(ValidationError *err, const char *key, const char *problem) {
        return validation_fail(err, -EINVAL, SD_BUS_ERROR_INVALID_ARGS, "Option \"", key, problem);
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

static int read_cpus(sd_bus_message *m, RequestOptions *o, ValidationError *err) {
        const void *data;
        size_t size;

        int r = sd_bus_message_read_array(m, 'u', &data, &size);
        if (r < 0)
                return r;
        size_t n = size / sizeof(uint32_t);
        if (n > PMQOS_CPUS_MAX)
                return option_error(err, "cpus", "\" names too many CPUs.");
        const uint32_t *cpus = data;
        for (size_t i = 0; i < n; i++)
                if (cpus[i] >= PMQOS_MAX_CPUS) {
                        char buf[16];
                        snprintf(buf, sizeof(buf), "%" PRIu32, cpus[i]);
                        return validation_fail(err, -EINVAL, SD_BUS_ERROR_INVALID_ARGS, "There is no CPU ", buf, ".");
                }
        if (n > 0) {
                o->cpus = malloc(size);
                if (!o->cpus)
                        return -ENOMEM;
                memcpy(o->cpus, data, size);
                /* Sorted and unique here, before anything looks at sysfs for them. */
                qsort(o->cpus, n, sizeof(uint32_t), cmp_u32);
                size_t k = 1;
                for (size_t i = 1; i < n; i++)
                        if (o->cpus[i] != o->cpus[k - 1])
                                o->cpus[k++] = o->cpus[i];
                n = k;
        }
        o->n_cpus = n;
        return 0;
}

static int read_reason(sd_bus_message *m, RequestOptions *o, uint32_t max_timeout_sec, ValidationError *err) {
        const char *reason;
        int r = sd_bus_message_read(m, "s", &reason);
        if (r < 0)
                return r;
        if (strlen(reason) > PMQOS_REASON_MAX)
                return option_error(err, "reason", "\" is longer than 256 bytes.");
        o->reason = strdup(reason);
        return o->reason ? 0 : -ENOMEM;
}

static int read_persistent(sd_bus_message *m, RequestOptions *o, uint32_t max_timeout_sec, ValidationError *err) {
        int b = 0;
        int r = sd_bus_message_read(m, "b", &b);
        o->persistent = b;
        return r;
}

static int read_timeout(sd_bus_message *m, RequestOptions *o, uint32_t max_timeout_sec, ValidationError *err) {
        int r = sd_bus_message_read(m, "u", &o->timeout_sec);
        if (r >= 0 && (o->timeout_sec < 1 || o->timeout_sec > max_timeout_sec)) {
                char problem[96];
                snprintf(problem, sizeof(problem), "\" must be 1 … %" PRIu32 " seconds.", max_timeout_sec);
                return option_error(err, "timeout", problem);
        }
        return r;
}

static int read_cpus_option(sd_bus_message *m, RequestOptions *o, uint32_t max_timeout_sec, ValidationError *err) {
        return read_cpus(m, o, err);
}

/* The table is the list of options: key, variant type, reader. */
static const struct {
        const char *key, *type;
        int (*read)(sd_bus_message *m, RequestOptions *o, uint32_t max_timeout_sec, ValidationError *err);
} options[] = {
        { "reason", "s", read_reason },
        { "persistent", "b", read_persistent },
        { "timeout", "u", read_timeout },
        { "cpus", "au", read_cpus_option },
};

/* Reads one {sv} entry of the options into o; seen marks the keys read so far. */
static int read_option(sd_bus_message *m, RequestOptions *o, unsigned *seen, uint32_t max_timeout_sec,
                       ValidationError *err) {
        const char *key, *contents;
        size_t i;
        int r;

        r = sd_bus_message_read(m, "s", &key);
        if (r < 0)
                return r;
        for (i = 0; i < ELEMENTSOF(options) && strcmp(key, options[i].key) != 0; i++)
                ;
        if (i == ELEMENTSOF(options))
                return validation_fail(err, -EINVAL, SD_BUS_ERROR_INVALID_ARGS, "Unknown option \"", key,
                                       "\"; known options are reason, persistent, timeout and cpus.");
        if (*seen & (1u << i))
                return option_error(err, key, "\" is given twice.");
        *seen |= 1u << i;

        r = sd_bus_message_peek_type(m, NULL, &contents);
        if (r < 0)
                return r;
        if (strcmp(contents, options[i].type) != 0) {
                char problem[96];
                snprintf(problem, sizeof(problem), "\" must be of type '%s'.", options[i].type);
                return option_error(err, key, problem);
        }
        r = sd_bus_message_enter_container(m, 'v', contents);
        if (r >= 0)
                r = options[i].read(m, o, max_timeout_sec, err);
        if (r >= 0)
                r = sd_bus_message_exit_container(m); /* v */
        return r;
}

int parse_request_options(sd_bus_message *m, uint32_t max_timeout_sec, RequestOptions *ret, ValidationError *err) {
        RequestOptions o = {};
        unsigned seen = 0;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                r = read_option(m, &o, &seen, max_timeout_sec, err);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m); /* e */
                if (r < 0)
                        break;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                request_options_done(&o);
                return r;
        }
        *ret = o;
        return 0;
}
