/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bottom of libpmqos: one method call on the broker, the broker's error
 * names mapped to errno values (and its message kept for
 * pmqos_client_last_error()), and dispatching what arrived. Calls nothing
 * above it: the files of the public API build on this one. */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libpmqos-client.h"

uint64_t client_now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

void client_set_last_error(pmqos_client *c, const char *message) {
        free(c->last_error);
        c->last_error = message ? strdup(message) : NULL;
}

int client_map_error(pmqos_client *c, const sd_bus_error *e, int r) {
        static const struct {
                const char *name;
                int errnum;
        } table[] = {
                { SD_BUS_ERROR_ACCESS_DENIED, EACCES },
                { SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, EACCES },
                { SD_BUS_ERROR_INVALID_ARGS, EINVAL },
                { PMQOS_ERROR_NO_SUCH_REQUEST, ENOENT },
                { SD_BUS_ERROR_LIMITS_EXCEEDED, EUSERS },
                { SD_BUS_ERROR_NOT_SUPPORTED, EOPNOTSUPP },
                { SD_BUS_ERROR_SERVICE_UNKNOWN, ECONNREFUSED },
                { SD_BUS_ERROR_NAME_HAS_NO_OWNER, ECONNREFUSED },
                { SD_BUS_ERROR_NO_REPLY, ECONNREFUSED },
                { SD_BUS_ERROR_UNKNOWN_OBJECT, ECONNREFUSED },
                { PMQOS_ERROR_FAILED, EIO },
                { SD_BUS_ERROR_NO_MEMORY, ENOMEM },
                { SD_BUS_ERROR_TIMEOUT, ETIMEDOUT }, /* sd-bus's own: no answer within the call's timeout */
        };

        if (e && sd_bus_error_has_name(e, SD_BUS_ERROR_TIMEOUT)) {
                client_set_last_error(c, "pmqosd did not answer in time.");
                return -ETIMEDOUT;
        }
        if (e && sd_bus_error_is_set(e)) {
                client_set_last_error(c, e->message ?: e->name);
                for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                        if (strcmp(e->name, table[i].name) == 0)
                                return -table[i].errnum;
                int k = sd_bus_error_get_errno(e);
                return k > 0 ? -k : -EIO;
        }
        if (r == -ENOTCONN || r == -ECONNRESET)
                client_set_last_error(c, "The connection to the system bus was lost.");
        return r < 0 ? r : -EIO;
}

_public_ const char *pmqos_strerror(int r) {
        if (r == INT_MIN)
                return "Unknown error";
        switch (r < 0 ? -r : r) {
        case 0:
                return "Success";
        case EACCES:
                return "Not authorized by the system's policy (polkit)";
        case EINVAL:
                return "Invalid argument";
        case ENOENT:
                return "No such request";
        case EUSERS:
                return "Too many requests: a per-connection or per-user limit is reached";
        case EOPNOTSUPP:
                return "Not supported on this kernel";
        case ECONNREFUSED:
                return "pmqosd is not running";
        case EHOSTDOWN:
                return "The system bus is not available";
        case ETIMEDOUT:
                return "pmqosd did not answer in time";
        case EIO:
                return "pmqosd could not write to the kernel";
        case ENOMEM:
                return "Out of memory";
        case EBADMSG:
                return "The answer is not one pmqosd sends";
        case E2BIG:
                return "The answer is too large to be pmqosd's";
        case ENOTCONN:
        case ECONNRESET:
                return "The connection to the system bus was lost";
        default:
                return strerror(r < 0 ? -r : r);
        }
}

/* ---- calls ---- */

uint64_t client_call_timeout(pmqos_client *c) {
        if (c->call_timeout_usec > 0)
                return c->call_timeout_usec;
        return c->interactive ? INTERACTIVE_TIMEOUT_USEC : 0; /* 0: sd-bus's default, 25 s */
}

int client_call(pmqos_client *c, const char *iface, const char *member, sd_bus_message **ret_reply,
                int (*append)(sd_bus_message *m, const void *data), const void *data) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, BUS_NAME, OBJECT_PATH, iface, member);
        if (r < 0)
                return client_map_error(c, NULL, r);
        if (append) {
                r = append(m, data);
                if (r < 0)
                        return client_map_error(c, NULL, r);
        }
        if (c->interactive) {
                r = sd_bus_message_set_allow_interactive_authorization(m, true);
                if (r < 0)
                        return client_map_error(c, NULL, r);
        }
        r = sd_bus_call(c->bus, m, client_call_timeout(c), &e, ret_reply);
        if (r < 0)
                return client_map_error(c, &e, r);
        client_set_last_error(c, NULL);
        return 0;
}

bool client_from_broker(pmqos_client *c, sd_bus_message *m) {
        const char *sender = sd_bus_message_get_sender(m);
        return c->broker && sender && strcmp(sender, c->broker) == 0;
}

void client_emit(pmqos_client *c, pmqos_event event, int32_t usec) {
        if (c->callback)
                c->callback(c, event, usec, c->userdata);
}

int client_dispatch(pmqos_client *c) {
        int r;
        while ((r = sd_bus_process(c->bus, NULL)) > 0)
                ;
        if (r < 0)
                return client_map_error(c, NULL, r);
        return 0;
}
