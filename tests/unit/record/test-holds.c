/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the holds (record/holds.c) with real pipes and pidfds and no
 * bus: a Hold() pipe ends when the last copy of its write end is closed and
 * not before; a process hold when its process dies (its pidfd
 * leaving the epoll set only when freed, after ended()); holds that end together
 * (more than one epoll batch) end in one call; a hold freed otherwise (its
 * request cancelled) leaves the epoll set; cgroup.events read; the service
 * manager's descriptor store, a datagram socket of the test's own standing
 * in for it: each hold's descriptor stored under its name and removed when
 * it ends, descriptors handed back at start taken by cookie and kind, a
 * 0.1.0 name stored again under today's, the unclaimed ones closed. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "record/holds.h"
#include "unit.h"

/* What ended() was told: how many calls, how many holds in all, the last
 * list's first, how many process holds were still in the epoll set then. */
typedef struct Ended {
        unsigned calls, holds, processes_in_set;
        Hold *first;
} Ended;

/* Whether fd is in the epoll set epoll_fd, from its fdinfo ("tfd: N" a line). */
static bool in_set(int epoll_fd, int fd) {
        char path[64], line[256];
        bool found = false;
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", epoll_fd);
        FILE *f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        while (!found && fgets(line, sizeof(line), f)) {
                int tfd;
                found = sscanf(line, "tfd: %d", &tfd) == 1 && tfd == fd;
        }
        fclose(f);
        return found;
}

static void on_ended(Hold *first, void *userdata) {
        Ended *got = userdata;
        got->calls++;
        got->first = first;
        for (Hold *h = first; h; h = h->ended_next) {
                ck_assert(h->ending);
                got->holds++;
                if (h->kind == HOLD_PROCESS && in_set(h->holds->epoll_fd, h->fd))
                        got->processes_in_set++;
        }
}

static sd_event *event;
static Holds hs;
static Ended got;

static void setup(void) {
        ck_assert_int_ge(sd_event_new(&event), 0);
        got = (Ended){ 0 };
        holds_init(&hs, event, 1000, on_ended, &got);
}

static void teardown(void) {
        holds_done(&hs);
        event = sd_event_unref(event);
}

/* Runs the loop until something was dispatched (a guard of 10 s against a
 * hang, not a measure: it returns at the first event). */
static void run_until_event(void) {
        ck_assert_int_gt(sd_event_run(event, 10 * 1000 * 1000), 0);
}

/* Whatever is ready is dispatched; nothing waits. Returns whether anything was. */
static int run_ready(void) {
        int r = sd_event_run(event, 0);
        ck_assert_int_ge(r, 0);
        return r;
}

static bool fd_open(int fd) {
        return fcntl(fd, F_GETFD) >= 0;
}

START_TEST(test_pipe_ends_at_last_close) {
        Hold *h = NULL;
        int peer = -1;
        ck_assert_int_eq(hold_new_fd(&hs, -1, &h, &peer), 0);
        ck_assert_int_ge(peer, 0);
        ck_assert_int_eq(h->kind, HOLD_FD);
        ck_assert_uint_eq(hs.n, 1);
        int copy = dup(peer);
        ck_assert_int_ge(copy, 0);
        ck_assert_int_eq(write(peer, "x", 1), 1); /* what a holder writes wakes nobody */
        close(peer);
        run_ready();
        ck_assert_uint_eq(got.calls, 0);
        ck_assert_uint_eq(hs.n, 1);
        close(copy);
        run_until_event();
        ck_assert_uint_eq(got.calls, 1);
        ck_assert_uint_eq(got.holds, 1);
        ck_assert_ptr_eq(got.first, h);
        ck_assert_uint_eq(hs.n, 0); /* freed right after ended() */
        ck_assert_ptr_null(hs.head);
}
END_TEST

static pid_t fork_sleeper(void) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
                for (;;)
                        pause();
        }
        return pid;
}

/* A pidfd of pid, or -1 where pidfd_open(2) is not implemented (valgrind
 * 3.19): the test then says it skips, and why. */
static int open_pidfd(pid_t pid) {
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0 && errno == ENOSYS) {
                printf("SKIP: pidfd_open(2) is not implemented here (valgrind 3.19 does not): no process hold\n");
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return -1;
        }
        ck_assert_int_ge(fd, 0);
        return fd;
}

START_TEST(test_process_ends_when_it_dies) {
        pid_t child = fork_sleeper();
        int pidfd = open_pidfd(child);
        if (pidfd < 0)
                return;
        Hold *h = NULL;
        ck_assert_int_eq(hold_new_process(&hs, pidfd, &h), 0);
        ck_assert_int_eq(h->kind, HOLD_PROCESS);
        ck_assert_int_eq(h->fd, pidfd);
        run_ready();
        ck_assert_uint_eq(got.calls, 0);
        ck_assert_int_eq(kill(child, SIGKILL), 0);
        run_until_event();
        ck_assert_uint_eq(got.calls, 1);
        ck_assert_ptr_eq(got.first, h);
        ck_assert_uint_eq(hs.n, 0);
        ck_assert(!fd_open(pidfd)); /* the hold's to close */
        ck_assert_int_eq(waitpid(child, NULL, 0), child);
}
END_TEST

/* 300 holds, more than one read of the epoll set (256), end in one call. */
START_TEST(test_holds_ending_together_end_in_one_call) {
        enum { N = 300 };
        int peers[N];
        for (int i = 0; i < N; i++) {
                Hold *h = NULL;
                ck_assert_int_eq(hold_new_fd(&hs, -1, &h, &peers[i]), 0);
        }
        ck_assert_uint_eq(hs.n, N);
        for (int i = 0; i < N; i++)
                close(peers[i]);
        run_until_event();
        ck_assert_uint_eq(got.calls, 1);
        ck_assert_uint_eq(got.holds, N);
        ck_assert_uint_eq(hs.n, 0);
}
END_TEST

/* Its request ended otherwise (cancelled): the hold goes with it, and a
 * later close of the pipe wakes nobody. */
START_TEST(test_cancelled_request_frees_its_hold) {
        Store store;
        store_init(&store, 1);
        Hold *h = NULL;
        int peer = -1;
        ck_assert_int_eq(hold_new_fd(&hs, -1, &h, &peer), 0);
        Request *r = request_new(&store);
        ck_assert_ptr_nonnull(r);
        r->value = 10;
        r->hold = HOLD_FD;
        ck_assert_int_eq(store_add(&store, r, &h->owner), 0);
        ck_assert_ptr_eq(hold_request(h), r);
        int read_end = h->fd;
        store_remove(&store, r);
        ck_assert_uint_eq(hs.n, 0);
        ck_assert(!fd_open(read_end));
        close(peer);
        ck_assert_int_eq(run_ready(), 0);
        ck_assert_uint_eq(got.calls, 0);
        store_done(&store);
}
END_TEST

/* An exit release makes no system call of its own before ended() (where
 * the kernel is written): the pidfd is one-shot and leaves the set when its
 * hold is freed, after — out then though the caller keeps a copy open. */
START_TEST(test_exited_process_leaves_the_set_after_ended) {
        pid_t child = fork_sleeper();
        int pidfd = open_pidfd(child);
        if (pidfd < 0)
                return;
        int mine = dup(pidfd);
        ck_assert_int_ge(mine, 0);
        Hold *h = NULL;
        ck_assert_int_eq(hold_new_process(&hs, pidfd, &h), 0);
        ck_assert(in_set(hs.epoll_fd, pidfd));
        ck_assert_int_eq(kill(child, SIGKILL), 0);
        run_until_event();
        ck_assert_uint_eq(got.calls, 1);
        ck_assert_uint_eq(got.processes_in_set, 1);
        ck_assert_uint_eq(hs.n, 0);
        ck_assert(!fd_open(pidfd));
        ck_assert(!in_set(hs.epoll_fd, pidfd)); /* listed by that number while the caller's copy is open */
        ck_assert_int_eq(run_ready(), 0);
        ck_assert_uint_eq(got.calls, 1);
        ck_assert_int_eq(waitpid(child, NULL, 0), child);
        close(mine);
}
END_TEST

/* A pidfd the caller keeps open too leaves the set when its hold is freed:
 * the process dying later tells nobody. */
START_TEST(test_freed_process_hold_leaves_the_set) {
        pid_t child = fork_sleeper();
        int pidfd = open_pidfd(child);
        if (pidfd < 0)
                return;
        int mine = dup(pidfd);
        Hold *h = NULL;
        ck_assert_int_eq(hold_new_process(&hs, pidfd, &h), 0);
        ck_assert_ptr_null(hold_free(h));
        ck_assert_uint_eq(hs.n, 0);
        ck_assert_int_eq(kill(child, SIGKILL), 0);
        ck_assert_int_eq(waitpid(child, NULL, 0), child);
        ck_assert_int_eq(run_ready(), 0);
        ck_assert_uint_eq(got.calls, 0);
        close(mine);
}
END_TEST

START_TEST(test_cgroup_events_populated) {
        static const char *const yes[] = { "populated 1\nfrozen 0\n", "frozen 0\npopulated 1", "populated 1" };
        static const char *const no[] = { "populated 0\nfrozen 0\n", "",          "populated 10\n", "xpopulated 1\n",
                                          "populated 1x\n",          "frozen 1\n" };
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
                ck_assert_msg(cgroup_events_populated(yes[i], strlen(yes[i])), "%s", yes[i]);
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
                ck_assert_msg(!cgroup_events_populated(no[i], strlen(no[i])), "%s", no[i]);
        /* The length counts, not a NUL: "populated 1" cut to "populated ". */
        ck_assert(!cgroup_events_populated("populated 1\n", 10));
}
END_TEST

/* A directory without cgroup.events (the root cgroup): -ENOENT, its
 * descriptor still the caller's. */
START_TEST(test_cgroup_without_events_is_refused) {
        const char *dir = unit_make_dir("holds");
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        Hold *h = NULL;
        ck_assert_int_eq(hold_new_cgroup(&hs, fd, &h), -ENOENT);
        ck_assert_uint_eq(hs.n, 0);
        ck_assert(fd_open(fd));
        close(fd);
        unit_remove_dir(dir);
}
END_TEST

/* The service manager's store: a datagram socket of ours at $NOTIFY_SOCKET. */
static int notify_fd = -1;
static char notify_dir[64];

static void store_setup(void) {
        setup();
        snprintf(notify_dir, sizeof(notify_dir), "%s", unit_make_dir("holds-notify"));
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", notify_dir);
        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(notify_fd, 0);
        ck_assert_int_eq(bind(notify_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        hs.fdstore = true;
}

static void store_teardown(void) {
        teardown();
        unsetenv("NOTIFY_SOCKET");
        close(notify_fd);
        unit_remove_dir(notify_dir);
}

/* The next datagram's text (static; "" if none waits); *ret_fd the
 * descriptor it carried, or -1. */
static const char *next_notice(int *ret_fd) {
        static char text[256];
        char control[CMSG_SPACE(sizeof(int))] = { 0 };
        struct iovec iov = { .iov_base = text, .iov_len = sizeof(text) - 1 };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)
        };
        *ret_fd = -1;
        ssize_t n = recvmsg(notify_fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0) {
                ck_assert_int_eq(errno, EAGAIN);
                text[0] = 0;
                return text;
        }
        text[n] = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return text;
}

/* The next datagram is text, carrying a descriptor or not. */
static void expect_notice(const char *text, bool with_fd) {
        int fd;
        ck_assert_str_eq(next_notice(&fd), text);
        ck_assert_int_eq(fd >= 0, with_fd);
        if (fd >= 0)
                close(fd);
}

static void expect_no_notice(void) {
        expect_notice("", false);
}

START_TEST(test_stored_until_it_ends) {
        Hold *h = NULL;
        int peer = -1;
        ck_assert_int_eq(hold_new_fd(&hs, -1, &h, &peer), 0);
        hold_store(h, 0x2a);
        int fd;
        ck_assert_str_eq(next_notice(&fd), "FDSTORE=1\nFDNAME=h0000002a");
        ck_assert_int_ge(fd, 0);
        struct stat st;
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISFIFO(st.st_mode)); /* the pipe's read end itself */
        close(fd);
        close(peer);
        run_until_event();
        ck_assert_uint_eq(got.calls, 1);
        expect_notice("FDSTOREREMOVE=1\nFDNAME=h0000002a", false);
        expect_no_notice();
}
END_TEST

/* At shutdown the store is left alone: a restart finds every hold there. */
START_TEST(test_not_stored_without_a_store) {
        hs.fdstore = false;
        Hold *h = NULL;
        ck_assert_int_eq(hold_new_fd(&hs, -1, &h, NULL), 0);
        hold_store(h, 7);
        expect_no_notice();
        hold_free(h);
        expect_no_notice();
}
END_TEST

static StoredFd stored_pipe(RequestHold kind, uint32_t cookie, const char *name, int *ret_write_end) {
        int p[2];
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        StoredFd s = { .kind = kind, .cookie = cookie, .fd = p[0] };
        snprintf(s.name, sizeof(s.name), "%s", name);
        if (ret_write_end)
                *ret_write_end = p[1];
        else
                close(p[1]);
        return s;
}

/* Handed back at start: each record entry takes its own by cookie and
 * kind, once; a 0.1.0 name is stored again under today's; what no entry
 * took is closed and removed, and a duplicate of a live hold's name stored
 * again (the removal took every entry of that name). */
START_TEST(test_stored_taken_back_by_cookie_and_kind) {
        int w7, w9;
        StoredFd *s = calloc(4, sizeof(StoredFd));
        ck_assert_ptr_nonnull(s);
        s[0] = stored_pipe(HOLD_FD, 9, "hold-9", &w9);
        s[1] = stored_pipe(HOLD_FD, 7, "h00000007", &w7);
        s[2] = stored_pipe(HOLD_FD, 5, "h00000005", NULL);
        s[3] = stored_pipe(HOLD_FD, 7, "h00000007", NULL); /* a duplicate */
        int unclaimed = s[2].fd, duplicate = s[3].fd;
        holds_set_stored(&hs, s, 4);

        ck_assert_ptr_null(holds_take_stored(&hs, HOLD_PROCESS, 7)); /* another kind */
        ck_assert_ptr_null(holds_take_stored(&hs, HOLD_FD, 8));
        Hold *h7 = holds_take_stored(&hs, HOLD_FD, 7);
        ck_assert_ptr_nonnull(h7);
        ck_assert_uint_eq(h7->stored_cookie, 7);
        expect_no_notice(); /* in the store already */

        Hold *h9 = holds_take_stored(&hs, HOLD_FD, 9);
        ck_assert_ptr_nonnull(h9);
        expect_notice("FDSTOREREMOVE=1\nFDNAME=hold-9", false);
        expect_notice("FDSTORE=1\nFDNAME=h00000009", true);
        ck_assert_uint_eq(hs.n, 2);

        holds_drop_stored(&hs);
        ck_assert(!fd_open(unclaimed));
        ck_assert(!fd_open(duplicate));
        /* In cookie order: 5, then 7's duplicate, then 7 stored again. */
        expect_notice("FDSTOREREMOVE=1\nFDNAME=h00000005", false);
        expect_notice("FDSTOREREMOVE=1\nFDNAME=h00000007", false);
        expect_notice("FDSTORE=1\nFDNAME=h00000007", true);
        expect_no_notice();

        /* The taken holds serve as any other. */
        close(w7);
        run_until_event();
        ck_assert_ptr_eq(got.first, h7);
        expect_notice("FDSTOREREMOVE=1\nFDNAME=h00000007", false);
        close(w9);
}
END_TEST

static void add_store_tests(Suite *s) {
        TCase *tc = tcase_create("store");
        tcase_add_checked_fixture(tc, store_setup, store_teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_stored_until_it_ends);
        tcase_add_test(tc, test_not_stored_without_a_store);
        tcase_add_test(tc, test_stored_taken_back_by_cookie_and_kind);
        suite_add_tcase(s, tc);
}

int main(void) {
        Suite *s = suite_create("holds");
        TCase *tc = tcase_create("holds");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_pipe_ends_at_last_close);
        tcase_add_test(tc, test_process_ends_when_it_dies);
        tcase_add_test(tc, test_holds_ending_together_end_in_one_call);
        tcase_add_test(tc, test_cancelled_request_frees_its_hold);
        tcase_add_test(tc, test_exited_process_leaves_the_set_after_ended);
        tcase_add_test(tc, test_freed_process_hold_leaves_the_set);
        tcase_add_test(tc, test_cgroup_events_populated);
        tcase_add_test(tc, test_cgroup_without_events_is_refused);
        suite_add_tcase(s, tc);
        add_store_tests(s);
        return unit_run(s, CK_FORK_GETENV);
}
