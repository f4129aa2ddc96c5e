/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The readers of pmqosd's a{sv} answers that libpmqos-explain.c and
 * libpmqos-ledger.c share: a dictionary by known keys, an array of them. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "libpmqos-thread.h"

/* Marks key i of a dictionary as seen; a second time is -EBADMSG. */
static int see(unsigned *seen, unsigned i) {
        if (*seen & (1u << i))
                return -EBADMSG;
        *seen |= 1u << i;
        return 0;
}

static int key_index(const char *key, const char *const *keys, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (strcmp(key, keys[i]) == 0)
                        return (int) i;
        return -1;
}

int read_string(sd_bus_message *m, char **ret) {
        const char *s;
        int r = sd_bus_message_read(m, "v", "s", &s);
        if (r < 0)
                return r;
        free(*ret);
        return (*ret = strdup(s)) ? 0 : -ENOMEM;
}

int read_bool(sd_bus_message *m, bool *ret) {
        int b = 0, r = sd_bus_message_read(m, "v", "b", &b);
        *ret = b;
        return r;
}

/* Calls item(m, array + i * size) for each a{sv} of an aa{sv} variant, into a
 * new array of at most max entries. */
int read_array(sd_bus_message *m, size_t size, size_t max, int (*item)(sd_bus_message *m, void *entry),
               void (*done)(void *entry), void **ret, size_t *ret_n) {
        char *items = NULL;
        size_t n = 0;
        int r = sd_bus_message_enter_container(m, 'v', "aa{sv}");
        if (r >= 0)
                r = sd_bus_message_enter_container(m, 'a', "a{sv}");
        while (r >= 0 && (r = sd_bus_message_at_end(m, false)) == 0) {
                if (n == max) {
                        r = -EBADMSG;
                        break;
                }
                char *p = realloc(items, (n + 1) * size);
                if (!p) {
                        r = -ENOMEM;
                        break;
                }
                items = p;
                memset(items + n * size, 0, size);
                n++;
                r = item(m, items + (n - 1) * size);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        done(items + i * size);
                free(items);
                return r;
        }
        *ret = items;
        *ret_n = n;
        return 0;
}

/* Runs field(m, key index, userdata) for every entry of an a{sv}, skipping unknown keys. */
int read_dict(sd_bus_message *m, const char *const *keys, unsigned n_keys,
              int (*field)(sd_bus_message *m, unsigned key, void *userdata), void *userdata) {
        unsigned seen = 0;
        int r = sd_bus_message_enter_container(m, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key;
                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        break;
                int i = key_index(key, keys, n_keys);
                if (i < 0)
                        r = sd_bus_message_skip(m, "v");
                else if ((r = see(&seen, (unsigned) i)) >= 0)
                        r = field(m, (unsigned) i, userdata);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        return r;
}

/* ---- C-states ---- */
