/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the holder scan against real processes of this machine's
 * /proc, and the helper's answer on the wire. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/cpu-sink.h"
#include "sys/cpuidle.h"
#include "sys/holders.h"
#include "model/store.h"
#include "unit.h"

/* A child that opens path and waits until its pipe closes; the pid, ready. */
static pid_t hold_flags(const char *path, int flags, int *ret_pipe) {
        int go[2], ready[2];
        ck_assert_int_eq(pipe(go), 0);
        ck_assert_int_eq(pipe(ready), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd = open(path, flags);
                /* Nothing of the other holders' pipes: each ends when its own closes. */
                for (int k = 3; k < 256; k++)
                        if (k != fd && k != go[0] && k != ready[1])
                                close(k);
                (void) !write(ready[1], fd >= 0 ? "y" : "n", 1);
                char c;
                (void) !read(go[0], &c, 1);
                _exit(0);
        }
        close(go[0]);
        close(ready[1]);
        char c = 0;
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        ck_assert_int_eq(c, 'y');
        close(ready[0]);
        *ret_pipe = go[1];
        return pid;
}

static pid_t hold(const char *path, int *ret_pipe) {
        return hold_flags(path, O_RDWR, ret_pipe);
}

static void release(pid_t pid, int pipe_fd) {
        close(pipe_fd);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

static bool has(const HolderScan *scan, pid_t pid) {
        for (uint32_t i = 0; i < scan->n; i++)
                if (scan->pids[i] == (uint32_t) pid)
                        return true;
        return false;
}

START_TEST(test_scan_finds_holders_and_skips) {
        const char *dir = unit_make_dir("holders");
        char path[256], other[256];
        snprintf(path, sizeof(path), "%s/cpu_dma_latency", dir);
        snprintf(other, sizeof(other), "%s/sub/cpu_dma_latency", dir);
        unit_write_file(dir, "cpu_dma_latency", "x");
        unit_write_file(dir, "sub/cpu_dma_latency", "y"); /* same name, another file: not a holder */

        int p1, p2, p3, p4, p5;
        pid_t a = hold(path, &p1), b = hold(path, &p2), c = hold(other, &p3);
        /* O_PATH needs no permission and holds no request: a forged holder. */
        pid_t o = hold_flags(path, O_PATH, &p5);
        /* Opened after those forks: they must not inherit it. */
        int mine = open(path, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(mine, 0);
        HolderTarget target;
        ck_assert_int_eq(holder_target_init(&target, mine, path), 0);
        ck_assert_str_eq(target.basename, "cpu_dma_latency");
        /* A process keeping our very descriptor (as systemd's descriptor store does) holds nothing of its own. */
        int keep[2];
        ck_assert_int_eq(pipe(keep), 0);
        pid_t store = fork();
        ck_assert_int_ge(store, 0);
        if (store == 0) {
                for (int k = 3; k < 256; k++)
                        if (k != mine && k != keep[0])
                                close(k);
                char ch;
                (void) !read(keep[0], &ch, 1); /* mine is inherited: the same open file */
                _exit(0);
        }
        close(keep[0]);
        p4 = keep[1];
        int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(proc, 0);
        pid_t skip[] = { getpid(), b };
        HolderScan scan;
        holders_scan(proc, &target, skip, 2, &scan);
        ck_assert(has(&scan, a));
        ck_assert(!has(&scan, b));        /* skipped, as pmqosd and its helper are */
        ck_assert(!has(&scan, c));        /* a look-alike name */
        ck_assert(!has(&scan, getpid())); /* we hold it too, and are skipped */
        ck_assert(!has(&scan, store));    /* our own open file, kept elsewhere */
        ck_assert(!has(&scan, o));        /* O_PATH: no request */

        release(a, p1);
        holders_scan(proc, &target, skip, 2, &scan);
        ck_assert(!has(&scan, a)); /* gone */
        release(b, p2);
        release(c, p3);
        release(store, p4);
        release(o, p5);
        close(proc);
        close(mine);
        unit_remove_dir(dir);
}
END_TEST

START_TEST(test_wire_round_trip_and_refusals) {
        HolderScan scan = { .n = 3, .complete = true, .pids = { 1, 42, 4000000 } }, back;
        uint8_t buf[HOLDERS_WIRE_MAX + 8];
        size_t len = holders_encode(&scan, buf);
        ck_assert_uint_eq(len, 8 + 3 * 4);
        ck_assert_int_eq(holders_decode(buf, len, &back), 0);
        ck_assert_uint_eq(back.n, 3);
        ck_assert(back.complete);
        ck_assert_uint_eq(back.pids[2], 4000000);

        ck_assert_int_eq(holders_decode(buf, len - 1, &back), -EBADMSG); /* short */
        ck_assert_int_eq(holders_decode(buf, 7, &back), -EBADMSG);
        uint32_t bad[2] = { HOLDERS_MAX + 1, 1 };
        memcpy(buf, bad, sizeof(bad));
        ck_assert_int_eq(holders_decode(buf, sizeof(bad), &back), -EBADMSG); /* too many */
        uint32_t zero[3] = { 1, 0, 0 };
        ck_assert_int_eq(holders_decode((uint8_t *) zero, sizeof(zero), &back), -EBADMSG); /* pid 0 */
        uint32_t flag[2] = { 0, 2 };
        ck_assert_int_eq(holders_decode((uint8_t *) flag, sizeof(flag), &back), -EBADMSG);
}
END_TEST

int main(void) {
        Suite *s = suite_create("holders");
        TCase *tc = tcase_create("holders");
        tcase_add_test(tc, test_scan_finds_holders_and_skips);
        tcase_add_test(tc, test_wire_round_trip_and_refusals);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
