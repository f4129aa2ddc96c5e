/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of a start on stand-ins: the state file loaded (a request
 * whose deadline passed while pmqosd was down dropped), the previous run's
 * connection-bound requests re-adopted for owners still there, and the
 * runtime record of the same bus gone on with, another bus's written anew. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "unit.h"

#include "core-fixture.h"

START_TEST(test_load) {
        Core c;
        unit_write_file(state, "state",
                        "pmqos-state 1\nfloor 20\n"
                        "request cookie=5 type=cpu_dma value=300 uid=0 pid=1 created=1 expires=0 cpus= exec=a reason=\n"
                        "request cookie=6 type=cpu_dma value=7 uid=0 pid=1 created=1 expires=100 cpus= exec=b reason=\n"
                        "end\n");
        start(&c, device, 200); /* cookie 6 ended while pmqosd was down */

        ck_assert_ptr_nonnull(store_get(&c.store, 5));
        ck_assert_ptr_null(store_get(&c.store, 6));
        ck_assert_int_eq(core_floor(&c), 20);
        ck_assert_int_eq(c.effective, 300);
        ck_assert_int_eq(unit_read_device(device), 300);
        core_done(&c);
        ck_assert_ptr_null(strstr(unit_read_file(state, "state"), "cookie=6"));
}
END_TEST

START_TEST(test_readoption) {
        Core c;
        ChangeSet cs;
        RequestOwner a = { .name = ":1.5" }, b = { .name = ":1.7" }, a2 = { .name = ":1.5" };

        load_with_record(&c, -1, 0);
        ck_assert_int_eq(core_start(&c, BUS_ID, NULL, 0, &cs), 0);
        Request *r1 = new_request(&c, 50, false, 0, UINT32_MAX);
        uint32_t k1 = r1->cookie;
        ck_assert_int_eq(core_add(&c, r1, &a, &cs), 0);
        Request *r2 = new_request(&c, 40, false, 1000000, 1);
        uint32_t k2 = r2->cookie;
        ck_assert_int_eq(core_add(&c, r2, &a, &cs), 0);
        ck_assert_int_eq(core_add(&c, new_request(&c, 30, false, 0, UINT32_MAX), &b, &cs), 0);
        ck_assert_int_eq(core_add(&c, new_request(&c, 10, true, 0, UINT32_MAX), NULL, &cs), 0);
        ck_assert_int_eq(core_update(&c, r1, 45, 0, &cs), 0);
        ck_assert_int_eq(core_drop_owner(&c, &b, &cs), 0);
        core_drop_owner_finish(&c, &b);
        core_flush_record(&c);
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "40");
        /* Lines are copied into the reserved tail: the file is longer than they are. */
        struct stat st;
        char path[400];
        snprintf(path, sizeof(path), "%s/requests", runtime);
        ck_assert_int_eq(stat(path, &st), 0);
        size_t lines = strlen(unit_read_file(runtime, "requests"));
        ck_assert_uint_gt((size_t) st.st_size, lines);
        ck_assert_uint_eq(lines, c.record.used);
        crash(&c);

        /* kill -9, and the service manager gives the descriptor back. */
        int fd = open(device, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        load_with_record(&c, fd, 10);
        ck_assert(c.device_adopted);
        ck_assert_int_eq(unit_read_device(device), 10); /* untouched until the commit */
        ck_assert_uint_eq(c.adoptable.n_entries, 2);
        ck_assert_str_eq(c.adoptable.bus_id, BUS_ID);
        ck_assert_uint_eq(c.adoptable.entries[0].request->cookie, k1);
        ck_assert_int_eq(c.adoptable.entries[0].request->value, 45);
        ck_assert_str_eq(c.adoptable.entries[0].sender, ":1.5");
        ck_assert_uint_eq(c.adoptable.entries[1].request->cookie, k2);

        /* The owner is still there; the timed request's owner is not: it stays, detached. */
        RequestOwner *owners[] = { &a2, NULL };
        uint64_t cpu_writes = c.cpus.n_writes;
        ck_assert_int_eq(core_start(&c, BUS_ID, owners, 10, &cs), 0);
        CHANGES(cs, false, true, false, false);
        ck_assert_ptr_eq(store_get(&c.store, k1)->owner, &a2);
        ck_assert_ptr_null(store_get(&c.store, k2)->owner);
        ck_assert_uint_eq(store_size(&c.store), 3);
        ck_assert_int_eq(c.effective, 10);
        ck_assert_uint_eq(c.sink.n_writes, 1);          /* one write: the same value */
        ck_assert_uint_eq(c.cpus.n_writes, cpu_writes); /* cpu1 already holds 40 */
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "40");
        crash(&c);

        /* A new bus (or every owner gone): the connection-bound request ends; the timed one stays. */
        load_with_record(&c, -1, 20);
        ck_assert_uint_eq(c.adoptable.n_entries, 2);
        ck_assert_str_eq(c.adoptable.entries[1].sender, ""); /* detached in the record too */
        ck_assert_int_eq(core_start(&c, BUS_ID, NULL, 20, &cs), 0);
        CHANGES(cs, false, true, true, false);
        ck_assert_ptr_null(store_get(&c.store, k1));
        ck_assert_ptr_nonnull(store_get(&c.store, k2));
        core_done(&c);
        /* A clean stop gives cpu1 back; the record stays for a restart, without its reserved tail. */
        ck_assert_str_eq(unit_read_file(sysfs, CPU1), "100");
        ck_assert_ptr_nonnull(strstr(unit_read_file(runtime, "requests"), "\nbus " BUS_ID "\n"));
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq((size_t) st.st_size, strlen(unit_read_file(runtime, "requests")));
}
END_TEST

/* A departure's record lines come after its signals (core_flush_record()):
 * a crash before them leaves a record that still names the departed owner,
 * and it must adopt nothing the lines would not have left. */
/* A client of many requests leaving has the record written whole once, not
 * a line per request; what it describes is the same. */
static ino_t record_inode(void) {
        char path[400];
        struct stat st;
        snprintf(path, sizeof(path), "%s/requests", runtime);
        ck_assert_int_eq(stat(path, &st), 0);
        return st.st_ino;
}

/* A restart on the same bus goes on with the record instead of writing it
 * whole: the lines stay where they are, the start's own changes (an owner
 * gone, a timed request detached) are appended after what a kill left. */
START_TEST(test_start_goes_on_with_the_record) {
        Core c;
        ChangeSet cs;
        RequestOwner a = { .name = ":1.5" }, b = { .name = ":1.7" }, a2 = { .name = ":1.5" };

        load_with_record(&c, -1, 0);
        ck_assert_int_eq(core_start(&c, BUS_ID, NULL, 0, &cs), 0);
        Request *kept = new_request(&c, 50, false, 0, UINT32_MAX);
        uint32_t k_kept = kept->cookie;
        ck_assert_int_eq(core_add(&c, kept, &a, &cs), 0);
        Request *gone = new_request(&c, 30, false, 0, UINT32_MAX);
        uint32_t k_gone = gone->cookie;
        ck_assert_int_eq(core_add(&c, gone, &b, &cs), 0);
        Request *timed = new_request(&c, 40, false, 1000000, UINT32_MAX);
        uint32_t k_timed = timed->cookie;
        ck_assert_int_eq(core_add(&c, timed, &b, &cs), 0);
        ino_t inode = record_inode();
        char *before = strdup(unit_read_file(runtime, "requests"));
        ck_assert_ptr_nonnull(before);
        crash(&c); /* the reserved zeros stay behind the lines */

        /* :1.7 left while pmqosd was down; :1.5 is still there. */
        load_with_record(&c, -1, 10);
        ck_assert_uint_eq(c.adoptable.n_entries, 3);
        RequestOwner *owners[] = { &a2, NULL, NULL };
        ck_assert_int_eq(core_start(&c, BUS_ID, owners, 10, &cs), 0);
        ck_assert_uint_eq(store_size(&c.store), 2);
        ck_assert_uint_eq(record_inode(), inode); /* not written anew */
        char expected[1024];
        snprintf(expected, sizeof(expected), "%sremove %u\ndetach %u\n", before, k_gone, k_timed);
        ck_assert_str_eq(unit_read_file(runtime, "requests"), expected);
        ck_assert_uint_eq(c.record.n_live, 2);
        ck_assert_uint_eq(c.record.n_lines, 5);
        /* Changes of this run come after them. */
        ck_assert_int_eq(core_update(&c, store_get(&c.store, k_kept), 45, 0, &cs), 0);
        free(before);
        crash(&c);

        /* And a line a kill cut short is cut off before the next start appends. */
        char path[400];
        snprintf(path, sizeof(path), "%s/requests", runtime);
        char *text = strdup(unit_read_file(runtime, "requests"));
        ck_assert_ptr_nonnull(text);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "%svalue %u 7", text, k_kept);
        fclose(f);
        load_with_record(&c, -1, 20);
        ck_assert_uint_eq(c.adoptable.n_entries, 2);
        ck_assert_int_eq(c.adoptable.entries[0].request->value, 45);
        RequestOwner *none[] = { NULL, NULL };
        ck_assert_int_eq(core_start(&c, BUS_ID, none, 20, &cs), 0);
        snprintf(expected, sizeof(expected), "%sremove %u\n", text, k_kept);
        ck_assert_str_eq(unit_read_file(runtime, "requests"), expected);
        free(text);
        core_done(&c);

        /* Another bus: the record is written anew, with what lives on (the timed request). */
        load_with_record(&c, -1, 30);
        ck_assert_int_eq(core_start(&c, "fedcba9876543210fedcba9876543210", NULL, 30, &cs), 0);
        ck_assert_uint_ne(record_inode(), inode);
        ck_assert_uint_eq(c.record.n_lines, 1);
        ck_assert_ptr_nonnull(strstr(unit_read_file(runtime, "requests"), "\nbus fedcba9876543210"));
        core_done(&c);
}
END_TEST

int main(void) {
        Suite *s = suite_create("start");
        TCase *tc = tcase_create("start");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_load);
        tcase_add_test(tc, test_readoption);
        tcase_add_test(tc, test_start_goes_on_with_the_record);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
