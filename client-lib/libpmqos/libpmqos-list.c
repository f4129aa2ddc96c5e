/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos_list_requests(): ListRequestsPage, page after page (ListRequests
 * from an older pmqosd), read into plain structs, refusing what pmqosd never
 * sends, so that a process holding the broker's name cannot make the caller
 * leak, loop or grow without bound. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libpmqos-thread.h"

_public_ void pmqos_request_info_free(pmqos_request_info *infos, size_t n) {
        if (!infos)
                return;
        for (size_t i = 0; i < n; i++) {
                free(infos[i].exec);
                free(infos[i].reason);
                free(infos[i].sender);
                free(infos[i].type);
                free(infos[i].bound_to);
                free(infos[i].target);
                free(infos[i].cpus);
        }
        free(infos);
}

/* What a listing from the broker may hold at most: more is a broken or
 * hostile broker, refused rather than followed into memory. */
#define LIST_ENTRIES_MAX 100000u
#define LIST_CPUS_MAX 8192u /* the kernel's NR_CPUS ceiling (PMQOS_MAX_CPUS in store.h) */

static const char *const info_keys[] = { "cookie",  "type",       "value",   "uid",  "pid",    "exec",     "reason",
                                         "created", "persistent", "expires", "cpus", "sender", "bound_to", "target" };

static int read_info_string(sd_bus_message *m, char **target) {
        const char *s;
        int r = sd_bus_message_read(m, "v", "s", &s);
        if (r < 0)
                return r;
        return (*target = strdup(s)) ? 0 : -ENOMEM;
}

static int read_info_cpus(sd_bus_message *m, pmqos_request_info *info) {
        const void *data = NULL;
        size_t size = 0;
        int r = sd_bus_message_enter_container(m, 'v', "au");
        if (r >= 0)
                r = sd_bus_message_read_array(m, 'u', &data, &size);
        if (r >= 0 && size / sizeof(uint32_t) > LIST_CPUS_MAX)
                r = -EBADMSG;
        if (r >= 0 && size > 0) {
                info->cpus = malloc(size);
                if (!info->cpus)
                        return -ENOMEM;
                memcpy(info->cpus, data, size);
                info->n_cpus = size / sizeof(uint32_t);
        }
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

/* The value of one key into info; a key we do not know is skipped. */
static int read_info_field(sd_bus_message *m, const char *key, pmqos_request_info *info) {
        if (strcmp(key, "cookie") == 0)
                return sd_bus_message_read(m, "v", "u", &info->cookie);
        if (strcmp(key, "value") == 0)
                return sd_bus_message_read(m, "v", "i", &info->value);
        if (strcmp(key, "uid") == 0)
                return sd_bus_message_read(m, "v", "u", &info->uid);
        if (strcmp(key, "pid") == 0)
                return sd_bus_message_read(m, "v", "u", &info->pid);
        if (strcmp(key, "created") == 0)
                return sd_bus_message_read(m, "v", "x", &info->created_usec);
        if (strcmp(key, "expires") == 0)
                return sd_bus_message_read(m, "v", "x", &info->expires_usec);
        if (strcmp(key, "persistent") == 0) {
                int b = 0;
                int r = sd_bus_message_read(m, "v", "b", &b);
                info->persistent = b;
                return r;
        }
        if (strcmp(key, "exec") == 0)
                return read_info_string(m, &info->exec);
        if (strcmp(key, "reason") == 0)
                return read_info_string(m, &info->reason);
        if (strcmp(key, "sender") == 0)
                return read_info_string(m, &info->sender);
        if (strcmp(key, "type") == 0)
                return read_info_string(m, &info->type);
        if (strcmp(key, "bound_to") == 0)
                return read_info_string(m, &info->bound_to);
        if (strcmp(key, "target") == 0)
                return read_info_string(m, &info->target);
        if (strcmp(key, "cpus") == 0)
                return read_info_cpus(m, info);
        return sd_bus_message_skip(m, "v");
}

int client_read_request_info(sd_bus_message *m, pmqos_request_info *info, bool *ret_empty) {
        unsigned seen = 0;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key;
                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                for (unsigned i = 0; i < sizeof(info_keys) / sizeof(info_keys[0]); i++)
                        if (strcmp(key, info_keys[i]) == 0) {
                                if (seen & (1u << i))
                                        return -EBADMSG; /* a key twice: the first value would leak */
                                seen |= 1u << i;
                        }
                r = read_info_field(m, key, info);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        if (seen == 0 && ret_empty) {
                *ret_empty = true;
                return sd_bus_message_exit_container(m);
        }
        if (!(seen & 1u)) /* no cookie: not a request */
                return -EBADMSG;
        if (!info->exec)
                info->exec = strdup("");
        if (!info->reason)
                info->reason = strdup("");
        if (!info->sender)
                info->sender = strdup("");
        if (!info->type)
                info->type = strdup("cpu_dma");
        if (!info->bound_to)
                info->bound_to = strdup("");
        if (!info->target)
                info->target = strdup("");
        if (!info->exec || !info->reason || !info->sender || !info->type || !info->bound_to || !info->target)
                return -ENOMEM;
        return sd_bus_message_exit_container(m);
}

_public_ int pmqos_list_requests(pmqos_client *c, pmqos_request_info **ret, size_t *ret_n) {
        if (ret)
                *ret = NULL; /* on every failure: pmqos_request_info_free(*ret, *ret_n) is then a no-op */
        if (ret_n)
                *ret_n = 0;
        CLIENT_ENTER(c, !ret || !ret_n);
        return client_list(c, ret, ret_n);
}

/* The entries of an aa{sv} of requests appended to *infos (*n of them, room
 * for *cap); the caller frees them, read or not. */
static int read_entries(sd_bus_message *reply, pmqos_request_info **infos, size_t *n, size_t *cap) {
        int r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0) {
                r = sd_bus_message_at_end(reply, false);
                if (r != 0)
                        break;
                if (*n >= LIST_ENTRIES_MAX)
                        return -E2BIG;
                if (*n == *cap) {
                        size_t more = *cap ? *cap * 2 : 16;
                        pmqos_request_info *p = realloc(*infos, more * sizeof(pmqos_request_info));
                        if (!p)
                                return -ENOMEM;
                        *infos = p;
                        *cap = more;
                }
                (*infos)[*n] = (pmqos_request_info){};
                r = client_read_request_info(reply, &(*infos)[(*n)++], NULL);
        }
        return r < 0 ? r : sd_bus_message_exit_container(reply);
}

/* The largest page ListRequestsPage gives. */
#define LIST_PAGE_MAX 1024u

typedef struct PageArgs {
        uint32_t after, max;
} PageArgs;

static int append_page_args(sd_bus_message *m, const void *data) {
        const PageArgs *a = data;
        return sd_bus_message_append(m, "uu", a->after, a->max);
}

/* One ListRequestsPage call, its entries appended to *infos; *ret_next as
 * the broker says, checked to move on (else a broken broker could keep a
 * caller that pages on here forever). */
static int list_page(pmqos_client *c, const PageArgs *a, pmqos_request_info **infos, size_t *n, size_t *cap,
                     uint32_t *ret_next) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        size_t before = *n;
        *ret_next = 0;
        int r = client_call(c, NATIVE_IFACE, "ListRequestsPage", &reply, append_page_args, a);
        if (r < 0)
                return r;
        r = read_entries(reply, infos, n, cap);
        if (r >= 0)
                r = sd_bus_message_read(reply, "u", ret_next);
        if (r >= 0 && *ret_next != 0 && (*n == before || *ret_next <= a->after || (*infos)[*n - 1].cookie != *ret_next))
                r = -EBADMSG;
        return r < 0 ? client_map_error(c, NULL, r) : 0;
}

/* Every request, a page at a time. A pmqosd without ListRequestsPage
 * answers UnknownMethod (-EBADR): 0 with *ret_unknown set. */
static int list_paged(pmqos_client *c, pmqos_request_info **infos, size_t *n, size_t *cap, bool *ret_unknown) {
        PageArgs a = { .after = 0, .max = LIST_PAGE_MAX };
        *ret_unknown = false;
        for (;;) {
                uint32_t next = 0;
                int r = list_page(c, &a, infos, n, cap, &next);
                if (r == -EBADR && a.after == 0) {
                        *ret_unknown = true;
                        return 0;
                }
                if (r < 0 || next == 0)
                        return r;
                a.after = next;
        }
}

_public_ int pmqos_list_requests_page(pmqos_client *c, uint32_t after, uint32_t max, pmqos_request_info **ret,
                                      size_t *ret_n, uint32_t *ret_next) {
        pmqos_request_info *infos = NULL;
        size_t n = 0, cap = 0;
        if (ret)
                *ret = NULL;
        if (ret_n)
                *ret_n = 0;
        if (ret_next)
                *ret_next = 0;
        if (!c || !ret || !ret_n || !ret_next)
                return -EINVAL;
        CLIENT_SCOPE(c);
        int r = client_dispatch(c);
        if (r >= 0)
                r = list_page(c, &(PageArgs){ .after = after, .max = max }, &infos, &n, &cap, ret_next);
        if (r < 0) {
                pmqos_request_info_free(infos, n);
                *ret_next = 0;
                return r;
        }
        *ret = infos;
        *ret_n = n;
        return 0;
}

/* Oldest first, as ListRequests lists them (pages come in cookie order). */
static int by_creation(const void *pa, const void *pb) {
        const pmqos_request_info *a = pa, *b = pb;
        if (a->created_usec != b->created_usec)
                return a->created_usec < b->created_usec ? -1 : 1;
        return (a->cookie > b->cookie) - (a->cookie < b->cookie);
}

int client_list(pmqos_client *c, pmqos_request_info **ret, size_t *ret_n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        pmqos_request_info *infos = NULL;
        size_t n = 0, cap = 0;
        bool unknown;
        int r;

        r = list_paged(c, &infos, &n, &cap, &unknown);
        if (r >= 0 && !unknown && n > 1)
                qsort(infos, n, sizeof(pmqos_request_info), by_creation);
        if (r >= 0 && unknown) {
                r = client_call(c, NATIVE_IFACE, "ListRequests", &reply, NULL, NULL);
                if (r >= 0 && (r = read_entries(reply, &infos, &n, &cap)) < 0)
                        r = client_map_error(c, NULL, r);
        }
        if (r < 0) {
                pmqos_request_info_free(infos, n);
                return r;
        }
        *ret = infos;
        *ret_n = n;
        return 0;
}
