/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the holder scan against real processes of this machine's
 * /proc, and the helper's answer on the wire. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/cpu-sink.h"
#include "util/cpuidle.h"
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

static const HolderBounds bounds = { .per_uid = HOLDERS_SCAN_PER_UID,
                                     .others = HOLDERS_SCAN_FDS_MAX,
                                     .trusted = HOLDERS_SCAN_FDS_MAX,
                                     .own = (uid_t) -1 };

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
        holders_scan(proc, &target, skip, 2, &bounds, &scan);
        ck_assert(has(&scan, a));
        ck_assert(!has(&scan, b));        /* skipped, as pmqosd and its helper are */
        ck_assert(!has(&scan, c));        /* a look-alike name */
        ck_assert(!has(&scan, getpid())); /* we hold it too, and are skipped */
        ck_assert(!has(&scan, store));    /* our own open file, kept elsewhere */
        ck_assert(!has(&scan, o));        /* O_PATH: no request */

        release(a, p1);
        holders_scan(proc, &target, skip, 2, &bounds, &scan);
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

/* ---- a fake /proc: PID/status, PID/fd/N links, PID/fdinfo/N ---- */

/* Writes pid's status file: real uid ruid, effective euid. */
static void fake_status(const char *proc, unsigned pid, unsigned ruid, unsigned euid) {
        char name[128], text[256];
        snprintf(name, sizeof(name), "%u/status", pid);
        snprintf(text, sizeof(text),
                 "Name:\tfake\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t%u\t%u\t%u\t%u\nGid:\t0\t0\t0\t0\n", ruid,
                 euid, euid, euid);
        unit_write_file(proc, name, text);
}

/* Writes text to name in the directory dir (a descriptor). */
static void fake_file_at(int dir, const char *name, const char *text) {
        int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        size_t n = strlen(text);
        ck_assert_int_eq(write(fd, text, n), (ssize_t) n);
        close(fd);
}

/* Process pid of real uid ruid and effective euid with n_fds descriptors of
 * other, and, if device, one more of it (opened for io, or O_PATH). */
static void fake_process(const char *proc, unsigned pid, unsigned ruid, unsigned euid, unsigned n_fds,
                         const char *other, const char *device, bool io) {
        char name[128];
        fake_status(proc, pid, ruid, euid);
        snprintf(name, sizeof(name), "%s/%u", proc, pid);
        int dir = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir, 0);
        ck_assert_int_eq(mkdirat(dir, "fd", 0755), 0);
        ck_assert_int_eq(mkdirat(dir, "fdinfo", 0755), 0);
        int fds = openat(dir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int infos = openat(dir, "fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert(fds >= 0 && infos >= 0);
        fake_file_at(infos, "x", "");
        for (unsigned k = 0; k <= n_fds; k++) {
                if (k == n_fds && !device)
                        break;
                snprintf(name, sizeof(name), "%u", k);
                ck_assert_int_eq(symlinkat(k == n_fds ? device : other, fds, name), 0);
                fake_file_at(infos, name,
                             io || k < n_fds ? "pos:\t0\nflags:\t0100002\n" : "pos:\t0\nflags:\t012000000\n");
        }
        close(fds);
        close(infos);
        close(dir);
}

typedef struct FakeProc {
        char dir[256], proc[300], device[300], other[300];
        HolderTarget target;
        int device_fd, proc_fd;
} FakeProc;

static void fake_begin(FakeProc *f) {
        snprintf(f->dir, sizeof(f->dir), "%s", unit_make_memory_dir("fakeproc"));
        snprintf(f->proc, sizeof(f->proc), "%s/proc", f->dir);
        snprintf(f->device, sizeof(f->device), "%s/dev/cpu_dma_latency", f->dir);
        snprintf(f->other, sizeof(f->other), "%s/dev/null", f->dir);
        unit_write_file(f->dir, "dev/cpu_dma_latency", "x");
        unit_write_file(f->dir, "dev/null", "");
        ck_assert_int_eq(mkdir(f->proc, 0755), 0);
        f->device_fd = open(f->device, O_RDWR | O_CLOEXEC);
        ck_assert_int_ge(f->device_fd, 0);
        ck_assert_int_eq(holder_target_init(&f->target, f->device_fd, f->device), 0);
        f->target.owner = 0; /* the fake pids are no processes: no kcmp() */
}

static void fake_scan(FakeProc *f, const HolderBounds *b, HolderScan *scan) {
        f->proc_fd = open(f->proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(f->proc_fd, 0);
        holders_scan(f->proc_fd, &f->target, NULL, 0, b, scan);
        close(f->proc_fd);
}

static void fake_end(FakeProc *f) {
        close(f->device_fd);
        unit_remove_dir(f->dir);
}

static uint32_t uid_of(const HolderScan *scan, pid_t pid) {
        for (uint32_t i = 0; i < scan->n; i++)
                if (scan->pids[i] == (uint32_t) pid)
                        return scan->uids[i];
        ck_abort_msg("pid %d not listed", (int) pid);
        return 0;
}

/* The fake processes in the order the scan meets them: the file system's. */
static size_t fake_order(const char *proc, unsigned *ret, size_t max) {
        DIR *d = opendir(proc);
        ck_assert_ptr_nonnull(d);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < max)
                if (de->d_name[0] != '.')
                        ret[n++] = (unsigned) strtoul(de->d_name, NULL, 10);
        closedir(d);
        return n;
}

/* 72 holders, two of them root's: those the scan meets last (the list is
 * full by then: each takes a user's place) or first. Root's are listed,
 * first; the 8 beyond 64 are counted. A set-uid program a user runs (real
 * uid the user's) and a process whose effective uid is a user's are the
 * user's. */
static void check_root_first(bool root_last) {
        FakeProc f;
        HolderScan scan;
        fake_begin(&f);
        for (unsigned i = 0; i < 72; i++)
                fake_process(f.proc, 1000 + i, 1000, 1000, 3, f.other, f.device, true);
        fake_process(f.proc, 9, 0, 0, 4, f.other, NULL, true);       /* no holder */
        fake_process(f.proc, 10, 0, 0, 4, f.other, f.device, false); /* O_PATH: none */
        fake_process(f.proc, 11, 1000, 1000, 0, f.other, f.device, false);
        unsigned order[128], root[2], picked = 0;
        size_t n = fake_order(f.proc, order, 128);
        ck_assert_uint_eq(n, 75);
        for (size_t k = 0; k < n && picked < 2; k++)
                if (order[root_last ? n - 1 - k : k] >= 1000)
                        root[picked++] = order[root_last ? n - 1 - k : k];
        fake_status(f.proc, root[0], 0, 0);
        fake_status(f.proc, root[1], 0, 0);
        /* Two others, not root's: a set-uid program a user runs, a process with a user's effective uid. */
        unsigned users[2], n_users = 0;
        for (unsigned pid = 1000; n_users < 2; pid++)
                if (pid != root[0] && pid != root[1])
                        users[n_users++] = pid;
        fake_status(f.proc, users[0], 1000, 0);
        fake_status(f.proc, users[1], 0, 1000);

        fake_scan(&f, &bounds, &scan);
        ck_assert_uint_eq(scan.n, HOLDERS_MAX);
        ck_assert_uint_eq(scan.left_out, 72 - HOLDERS_MAX);
        ck_assert(!scan.complete);
        ck_assert_uint_eq(scan.n_unscanned, 0);
        ck_assert_uint_eq(scan.uids[0], 0);
        ck_assert_uint_eq(scan.uids[1], 0);
        ck_assert(scan.pids[0] + scan.pids[1] == root[0] + root[1] &&
                  (scan.pids[0] == root[0] || scan.pids[0] == root[1]));
        for (uint32_t i = 2; i < scan.n; i++)
                ck_assert_uint_eq(scan.uids[i], 1000);
        ck_assert(!has(&scan, 9) && !has(&scan, 10) && !has(&scan, 11));
        /* The report goes over the wire intact. */
        uint8_t buf[HOLDERS_WIRE_MAX];
        HolderScan back;
        ck_assert_int_eq(holders_decode(buf, holders_encode(&scan, buf), &back), 0);
        ck_assert_uint_eq(back.left_out, scan.left_out);
        ck_assert_mem_eq(back.uids, scan.uids, sizeof(scan.uids));
        fake_end(&f);
}

START_TEST(test_fake_root_first_met_last) {
        check_root_first(true);
}
END_TEST

START_TEST(test_fake_root_first_met_first) {
        check_root_first(false);
}
END_TEST

/* Within the bound nothing is left out: the same tree with fewer holders. */
START_TEST(test_fake_complete_within_bounds) {
        FakeProc f;
        HolderScan scan;
        fake_begin(&f);
        fake_process(f.proc, 40, 1000, 1000, 3, f.other, f.device, true);
        fake_process(f.proc, 41, 0, 0, 3, f.other, f.device, true);
        fake_process(f.proc, 42, 1000, 1000, 30, f.other, NULL, true);
        unit_write_file(f.proc, "43/status", "Name:\tgone\n"); /* no uid: not looked at */
        fake_scan(&f, &bounds, &scan);
        ck_assert(!scan.complete);
        /* Not uids either: no digits, one past 32 bits, a trailing letter. */
        unit_write_file(f.proc, "43/status", "Name:\tx\nUid:\tx\t0\n");
        unit_write_file(f.proc, "44/status", "Name:\tx\nUid:\t4294967296\t0\n");
        unit_write_file(f.proc, "45/status", "Name:\tx\nUid:\t0\t0x\n");
        unit_write_file(f.proc, "46/status", "");
        fake_scan(&f, &bounds, &scan);
        ck_assert_uint_eq(scan.n, 2);
        ck_assert_uint_eq(scan.pids[0], 41);
        ck_assert_uint_eq(uid_of(&scan, 40), 1000);
        ck_assert(!scan.complete);
        ck_assert_uint_eq(scan.left_out + scan.n_unscanned, 0);
        unit_remove_dir(f.dir);
        fake_begin(&f);
        fake_process(f.proc, 40, 1000, 1000, 3, f.other, f.device, true);
        fake_scan(&f, &bounds, &scan);
        ck_assert(scan.complete);
        fake_end(&f);
}
END_TEST

/* A user with many descriptors costs at most its own bound: its processes
 * beyond are not looked at and counted; root's, the scanner's own uid's and
 * another user's are looked at in full. */
START_TEST(test_fake_per_uid_bound) {
        FakeProc f;
        HolderScan scan;
        const HolderBounds small = { .per_uid = 50, .others = 120, .trusted = 1000, .own = 4000 };
        fake_begin(&f);
        fake_process(f.proc, 100, 1000, 1000, 400, f.other, NULL, true);
        fake_process(f.proc, 101, 1000, 1000, 300, f.other, NULL, true);
        fake_process(f.proc, 200, 0, 0, 600, f.other, f.device, true);
        fake_process(f.proc, 300, 2000, 2000, 30, f.other, f.device, true);
        fake_process(f.proc, 400, 4000, 4000, 300, f.other, f.device, true);
        fake_scan(&f, &small, &scan);
        ck_assert(!scan.complete);
        ck_assert_uint_eq(scan.left_out, 0);
        ck_assert_uint_eq(scan.n, 3);
        ck_assert(has(&scan, 200) && has(&scan, 300) && has(&scan, 400));
        ck_assert_uint_eq(scan.n_unscanned, 1); /* both of uid 1000's, past its 50 */
        ck_assert_uint_eq(scan.unscanned[0].uid, 1000);
        ck_assert_uint_eq(scan.unscanned[0].processes, 2);
        fake_end(&f);

        /* All users together: once others' 94 are spent, a fresh user is cut too, root never.
         * The users hold no device, so each costs its whole list whatever order the file
         * system lists it in (a holder's scan stops at the device). */
        const HolderBounds shared = { .per_uid = 50, .others = 94, .trusted = 1000, .own = 4000 };
        fake_begin(&f);
        for (unsigned u = 0; u < 4; u++)
                fake_process(f.proc, 500 + u, 5000 + u, 5000 + u, 45, f.other, NULL, true);
        fake_process(f.proc, 600, 0, 0, 900, f.other, f.device, true);
        fake_scan(&f, &shared, &scan);
        ck_assert(has(&scan, 600));
        ck_assert_uint_eq(scan.n, 1);
        ck_assert_uint_eq(scan.n_unscanned, 2); /* 46 each: two users fit in 94, a third does not */
        ck_assert_uint_eq(scan.unscanned[0].processes + scan.unscanned[1].processes, 2);
        ck_assert_uint_lt(scan.unscanned[0].uid, scan.unscanned[1].uid); /* equal counts: by uid */
        fake_end(&f);
}
END_TEST

/* More than HOLDERS_UNSCANNED_MAX users cut: those with the most are named,
 * ties by the lower uid. */
START_TEST(test_fake_unscanned_most_first) {
        FakeProc f;
        HolderScan scan;
        const HolderBounds tiny = { .per_uid = 1, .others = 100000, .trusted = 1000, .own = (uid_t) -1 };
        fake_begin(&f);
        for (unsigned u = 0; u < HOLDERS_UNSCANNED_MAX + 24; u++) /* 40 uids: the table grows */
                for (unsigned k = 0; k < 1 + (u == 7 ? 3 : 1); k++)
                        fake_process(f.proc, 1000 + 10 * u + k, 100 + u, 100 + u, 1, f.other, NULL, true);
        fake_scan(&f, &tiny, &scan);
        ck_assert_uint_eq(scan.n_unscanned, HOLDERS_UNSCANNED_MAX);
        ck_assert_uint_eq(scan.unscanned[0].uid, 107);
        ck_assert_uint_eq(scan.unscanned[0].processes, 4);
        for (uint32_t i = 1; i < scan.n_unscanned; i++)
                ck_assert_uint_eq(scan.unscanned[i].processes, 2);
        ck_assert_uint_eq(scan.unscanned[1].uid, 100);
        ck_assert_uint_eq(scan.unscanned[HOLDERS_UNSCANNED_MAX - 1].uid, 115); /* 100…115 but 107 */
        fake_end(&f);
}
END_TEST

START_TEST(test_wire_round_trip_and_refusals) {
        HolderScan scan = { .n = 3,
                            .pids = { 1, 42, 4000000 },
                            .uids = { 0, 1000, 0xfffffffe },
                            .left_out = 5,
                            .n_unscanned = 2,
                            .unscanned = { { 1000, 7 }, { 65534, 1 } } },
                   back;
        uint8_t buf[HOLDERS_WIRE_MAX + 8];
        size_t len = holders_encode(&scan, buf);
        ck_assert_uint_eq(len, 16 + 3 * 8 + 2 * 8);
        ck_assert_int_eq(holders_decode(buf, len, &back), 0);
        ck_assert_uint_eq(back.n, 3);
        ck_assert(!back.complete);
        ck_assert_uint_eq(back.pids[2], 4000000);
        ck_assert_uint_eq(back.uids[2], 0xfffffffe);
        ck_assert_uint_eq(back.left_out, 5);
        ck_assert_uint_eq(back.n_unscanned, 2);
        ck_assert_uint_eq(back.unscanned[1].uid, 65534);
        ck_assert_uint_eq(back.unscanned[0].processes, 7);

        ck_assert_int_eq(holders_decode(buf, len - 1, &back), -EBADMSG); /* short */
        ck_assert_int_eq(holders_decode(buf, 15, &back), -EBADMSG);
        uint32_t bad[4] = { HOLDERS_MAX + 1, 0, 0, 0 };
        ck_assert_int_eq(holders_decode((uint8_t *) bad, sizeof(bad), &back), -EBADMSG); /* too many */
        uint32_t many[4] = { 0, 0, 0, HOLDERS_UNSCANNED_MAX + 1 };
        ck_assert_int_eq(holders_decode((uint8_t *) many, sizeof(many), &back), -EBADMSG);
        uint32_t zero[6] = { 1, 0, 0, 0, 0, 0 };
        ck_assert_int_eq(holders_decode((uint8_t *) zero, sizeof(zero), &back), -EBADMSG); /* pid 0 */
        uint32_t flag[4] = { 0, 2, 0, 0 };
        ck_assert_int_eq(holders_decode((uint8_t *) flag, sizeof(flag), &back), -EBADMSG);
        uint32_t lie[4] = { 0, 1, 3, 0 }; /* complete, yet holders left out */
        ck_assert_int_eq(holders_decode((uint8_t *) lie, sizeof(lie), &back), -EBADMSG);
        uint32_t lie2[6] = { 0, 1, 0, 1, 1000, 2 }; /* complete, yet processes not looked at */
        ck_assert_int_eq(holders_decode((uint8_t *) lie2, sizeof(lie2), &back), -EBADMSG);
        uint32_t order[8] = { 2, 0, 0, 0, 10, 1000, 11, 0 }; /* root's after a user's */
        ck_assert_int_eq(holders_decode((uint8_t *) order, sizeof(order), &back), -EBADMSG);
        uint32_t none[6] = { 0, 0, 0, 1, 1000, 0 }; /* a uid with no process left out */
        ck_assert_int_eq(holders_decode((uint8_t *) none, sizeof(none), &back), -EBADMSG);
        uint32_t empty[4] = { 0, 1, 0, 0 };
        ck_assert_int_eq(holders_decode((uint8_t *) empty, sizeof(empty), &back), 0);
        ck_assert(back.complete);
}
END_TEST

int main(void) {
        Suite *s = suite_create("holders");
        TCase *tc = tcase_create("holders");
        tcase_set_timeout(tc, 30); /* thousands of fake entries on a loaded disk: meson's bound */
        tcase_add_test(tc, test_scan_finds_holders_and_skips);
        tcase_add_test(tc, test_fake_root_first_met_last);
        tcase_add_test(tc, test_fake_root_first_met_first);
        tcase_add_test(tc, test_fake_complete_within_bounds);
        tcase_add_test(tc, test_fake_per_uid_bound);
        tcase_add_test(tc, test_fake_unscanned_most_first);
        tcase_add_test(tc, test_wire_round_trip_and_refusals);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
