/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the D-Bus wire the gate reads: a message's size from its
 * fixed header, its UNIX_FDS and SENDER fields past fields of any type,
 * in both byte orders, the broker's last SASL line, and a bus address's socket. */

#include <errno.h>
#include <string.h>

#include "util/dbus-wire.h"
#include "unit.h"

typedef struct Writer {
        uint8_t p[512];
        size_t n;
        bool big;
} Writer;

static void put_align(Writer *w, size_t a) {
        while (w->n % a)
                w->p[w->n++] = 0;
}

static void put_u32(Writer *w, uint32_t v) {
        put_align(w, 4);
        for (int i = 0; i < 4; i++)
                w->p[w->n++] = (uint8_t) (w->big ? v >> (24 - 8 * i) : v >> (8 * i));
}

static void put_sig(Writer *w, const char *sig) {
        w->p[w->n++] = (uint8_t) strlen(sig);
        memcpy(w->p + w->n, sig, strlen(sig) + 1);
        w->n += strlen(sig) + 1;
}

static void put_string(Writer *w, const char *s) {
        put_u32(w, (uint32_t) strlen(s));
        memcpy(w->p + w->n, s, strlen(s) + 1);
        w->n += strlen(s) + 1;
}

/* A method call with a PATH, a field of code 200 of type a(sv) (unknown:
 * skipped), a MEMBER and, unless n_fds is 0, UNIX_FDS; body_len bytes of body. */
static size_t build(Writer *w, bool big, uint32_t n_fds, uint32_t body_len) {
        *w = (Writer){ .big = big };
        w->p[0] = big ? 'B' : 'l', w->p[1] = 1, w->p[2] = 0, w->p[3] = 1;
        w->n = 4;
        put_u32(w, body_len);
        put_u32(w, 7);
        put_u32(w, 0); /* the fields' length, set below */
        size_t start = w->n;
        put_align(w, 8), w->p[w->n++] = 1, put_sig(w, "o"), put_string(w, "/a");
        put_align(w, 8), w->p[w->n++] = 200, put_sig(w, "a(sv)");
        put_u32(w, 0); /* its length, set below */
        size_t array = w->n;
        put_align(w, 8);
        size_t elements = w->n;
        put_string(w, "k"), put_sig(w, "u"), put_u32(w, 5);
        uint32_t array_len = (uint32_t) (w->n - elements);
        Writer tmp = { .big = big };
        put_u32(&tmp, array_len);
        memcpy(w->p + array - 4, tmp.p, 4);
        put_align(w, 8), w->p[w->n++] = 3, put_sig(w, "s"), put_string(w, "M");
        put_align(w, 8), w->p[w->n++] = 7, put_sig(w, "s"), put_string(w, ":1.42");
        if (n_fds)
                put_align(w, 8), w->p[w->n++] = 9, put_sig(w, "u"), put_u32(w, n_fds);
        tmp.n = 0;
        put_u32(&tmp, (uint32_t) (w->n - start));
        memcpy(w->p + 12, tmp.p, 4);
        put_align(w, 8);
        size_t size = w->n + body_len;
        memset(w->p + w->n, 'x', body_len);
        w->n = size;
        return size;
}

START_TEST(test_size_and_fds) {
        for (int big = 0; big < 2; big++) {
                Writer w;
                uint32_t fds = 99;
                size_t size = build(&w, big, 3, 5);
                ck_assert_int_eq(dbus_message_size(w.p, 15), 0);
                ck_assert_int_eq(dbus_message_size(w.p, w.n), (int64_t) size);
                ck_assert_int_eq(dbus_message_unix_fds(w.p, w.n, &fds), 1);
                ck_assert_uint_eq(fds, 3);
                ck_assert_int_eq(dbus_message_unix_fds(w.p, 20, &fds), 0); /* header not all there */
                char sender[16];
                ck_assert_int_eq(dbus_message_sender(w.p, w.n, sender, sizeof(sender)), 1);
                ck_assert_str_eq(sender, ":1.42");
                ck_assert_int_eq(dbus_message_sender(w.p, w.n, sender, 5), -EBADMSG); /* does not fit */
                ck_assert_int_eq(dbus_message_sender(w.p, 20, sender, sizeof(sender)), 0);
                build(&w, big, 0, 0);
                ck_assert_int_eq(dbus_message_unix_fds(w.p, w.n, &fds), 1);
                ck_assert_uint_eq(fds, 0);
        }
}
END_TEST

START_TEST(test_bad_headers) {
        Writer w;
        uint32_t fds;
        build(&w, false, 1, 0);
        w.p[0] = 'x';
        ck_assert_int_eq(dbus_message_size(w.p, w.n), -EBADMSG);
        build(&w, false, 1, 0);
        w.p[3] = 2;
        ck_assert_int_eq(dbus_message_size(w.p, w.n), -EBADMSG);
        build(&w, false, 1, 0);
        w.p[4] = 0xff, w.p[5] = 0xff, w.p[6] = 0xff, w.p[7] = 0xff; /* a body of 4 GiB */
        ck_assert_int_eq(dbus_message_size(w.p, w.n), -EBADMSG);
        build(&w, false, 1, 0);
        w.p[17] = 250; /* the first field's signature runs past its end */
        ck_assert_int_eq(dbus_message_unix_fds(w.p, w.n, &fds), -EBADMSG);
}
END_TEST

START_TEST(test_auth_lines) {
        ck_assert(dbus_auth_line_is_last("AGREE_UNIX_FD", 13));
        ck_assert(dbus_auth_line_is_last("ERROR \"no\"", 10));
        ck_assert(dbus_auth_line_is_last("REJECTED EXTERNAL", 17));
        ck_assert(!dbus_auth_line_is_last("OK 1234", 7));
        ck_assert(!dbus_auth_line_is_last("AGREE_UNIX_FDS", 14));
}
END_TEST

START_TEST(test_addresses) {
        char path[108];
        bool abstract;
        ck_assert_int_eq(dbus_address_unix_path("unix:path=/run/dbus/system_bus_socket", path, sizeof(path), &abstract),
                         0);
        ck_assert_str_eq(path, "/run/dbus/system_bus_socket");
        ck_assert(!abstract);
        ck_assert_int_eq(dbus_address_unix_path("tcp:host=x;unix:guid=1,abstract=a%2fb", path, sizeof(path), &abstract),
                         0);
        ck_assert_str_eq(path, "a/b");
        ck_assert(abstract);
        ck_assert_int_eq(dbus_address_unix_path("unix:path=%zz", path, sizeof(path), &abstract), -EINVAL);
        ck_assert_int_eq(dbus_address_unix_path("unix:path=%2", path, sizeof(path), &abstract), -EINVAL);
        ck_assert_int_eq(dbus_address_unix_path("tcp:host=x", path, sizeof(path), &abstract), -EINVAL);
        ck_assert_int_eq(dbus_address_unix_path("unix:path=/long", path, 4, &abstract), -EINVAL);
}
END_TEST

int main(void) {
        Suite *s = suite_create("dbus-wire");
        TCase *tc = tcase_create("dbus-wire");
        tcase_add_test(tc, test_size_and_fds);
        tcase_add_test(tc, test_bad_headers);
        tcase_add_test(tc, test_auth_lines);
        tcase_add_test(tc, test_addresses);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
