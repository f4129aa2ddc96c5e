/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the a{sv} options of Request read from real sd-bus
 * messages: every key, wrong types, repeats, unknown keys, bounds. */

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>

#include "bus/request-options.h"
#include "model/validate.h"
#include "unit.h"

static sd_bus *fake_bus(void) {
        /* Messages need a started bus object; nothing is ever sent on it. */
        static sd_bus *bus;
        if (!bus) {
                int sv[2];
                ck_assert_int_ge(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
                ck_assert_int_ge(sd_bus_new(&bus), 0);
                ck_assert_int_ge(sd_bus_set_fd(bus, sv[0], sv[0]), 0);
                ck_assert_int_ge(sd_bus_start(bus), 0);
        }
        return bus;
}

/* Options from a types/values list: "reason", 's', "text", … */
static int parse(RequestOptions *o, ValidationError *e, const char *key, const char *type, ...) {
        sd_bus_message *m;
        va_list ap;

        ck_assert_int_ge(sd_bus_message_new_method_call(fake_bus(), &m, "x.y", "/x", "x.y", "Request"), 0);
        ck_assert_int_ge(sd_bus_message_open_container(m, 'a', "{sv}"), 0);
        va_start(ap, type);
        while (key) {
                ck_assert_int_ge(sd_bus_message_open_container(m, 'e', "sv"), 0);
                ck_assert_int_ge(sd_bus_message_append(m, "s", key), 0);
                ck_assert_int_ge(sd_bus_message_open_container(m, 'v', type), 0);
                if (strcmp(type, "au") == 0) {
                        const uint32_t *cpus = va_arg(ap, const uint32_t *);
                        size_t n = va_arg(ap, size_t);
                        ck_assert_int_ge(sd_bus_message_append_array(m, 'u', cpus, n * sizeof(uint32_t)), 0);
                } else if (strcmp(type, "s") == 0)
                        ck_assert_int_ge(sd_bus_message_append(m, "s", va_arg(ap, const char *)), 0);
                else
                        ck_assert_int_ge(sd_bus_message_append_basic(m, type[0], &(uint32_t){ va_arg(ap, uint32_t) }),
                                         0);
                ck_assert_int_ge(sd_bus_message_close_container(m), 0);
                ck_assert_int_ge(sd_bus_message_close_container(m), 0);
                key = va_arg(ap, const char *);
                if (key)
                        type = va_arg(ap, const char *);
        }
        va_end(ap);
        ck_assert_int_ge(sd_bus_message_close_container(m), 0);
        ck_assert_int_ge(sd_bus_message_seal(m, 1, 0), 0);
        ck_assert_int_ge(sd_bus_message_rewind(m, true), 0);
        *e = (ValidationError){};
        int r = parse_request_options(m, 600, o, e);
        sd_bus_message_unref(m);
        return r;
}

START_TEST(test_request_options) {
        RequestOptions o;
        ValidationError e;
        uint32_t cpus[] = { 3, 1, 3, 3, 0 };

        ck_assert_int_eq(parse(&o, &e, "reason", "s", "night build", "persistent", "b", 1u, "timeout", "u", 600u,
                               "cpus", "au", cpus, (size_t) 5, NULL),
                         0);
        ck_assert_str_eq(o.reason, "night build");
        ck_assert(o.persistent);
        ck_assert_uint_eq(o.timeout_sec, 600);
        ck_assert_uint_eq(o.n_cpus, 3); /* sorted, unique: before anything looks at sysfs */
        ck_assert_uint_eq(o.cpus[0], 0);
        ck_assert_uint_eq(o.cpus[1], 1);
        ck_assert_uint_eq(o.cpus[2], 3);
        request_options_done(&o);

        ck_assert_int_eq(parse(&o, &e, NULL, NULL), 0); /* none at all */
        ck_assert_ptr_null(o.reason);

        ck_assert_int_eq(parse(&o, &e, "colour", "s", "red", NULL), -EINVAL);
        ck_assert_str_eq(e.name, SD_BUS_ERROR_INVALID_ARGS);
        ck_assert_ptr_nonnull(strstr(e.message, "Unknown option"));
        ck_assert_int_eq(parse(&o, &e, "timeout", "u", 5u, "timeout", "u", 6u, NULL), -EINVAL);
        ck_assert_ptr_nonnull(strstr(e.message, "given twice"));
        ck_assert_int_eq(parse(&o, &e, "persistent", "u", 1u, NULL), -EINVAL);
        ck_assert_ptr_nonnull(strstr(e.message, "must be of type 'b'"));
        ck_assert_int_eq(parse(&o, &e, "timeout", "u", 601u, NULL), -EINVAL);
        ck_assert_int_eq(parse(&o, &e, "timeout", "u", 0u, NULL), -EINVAL);

        char reason[300];
        memset(reason, 'r', sizeof(reason) - 1);
        reason[sizeof(reason) - 1] = 0;
        ck_assert_int_eq(parse(&o, &e, "reason", "s", reason, NULL), -EINVAL);
        reason[PMQOS_REASON_MAX] = 0;
        ck_assert_int_eq(parse(&o, &e, "reason", "s", reason, NULL), 0);
        request_options_done(&o);

        uint32_t *many = calloc(PMQOS_CPUS_MAX + 1, sizeof(uint32_t));
        ck_assert_int_eq(parse(&o, &e, "cpus", "au", many, (size_t) PMQOS_CPUS_MAX, NULL), 0);
        ck_assert_uint_eq(o.n_cpus, 1); /* 1024 times CPU 0 */
        request_options_done(&o);
        ck_assert_int_eq(parse(&o, &e, "cpus", "au", many, (size_t) PMQOS_CPUS_MAX + 1, NULL), -EINVAL);
        many[0] = PMQOS_MAX_CPUS;
        ck_assert_int_eq(parse(&o, &e, "cpus", "au", many, (size_t) 1, NULL), -EINVAL);
        free(many);
}
END_TEST

int main(void) {
        Suite *s = suite_create("request-options");
        TCase *tc = tcase_create("request-options");
        tcase_add_test(tc, test_request_options);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
