/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The helper thread: for a client whose application never polls its fd, it
 * dispatches what arrives, so that a broker restart is noticed and the
 * client's requests checked (and issued again if they were lost) at once,
 * not at the application's next call. It takes the client's lock for every
 * dispatch, so calls on the client and the thread never overlap. */

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "libpmqos-thread.h"

void client_lock(pmqos_client *c) {
        pthread_mutex_lock(&c->lock);
}

static void wake_helper(pmqos_client *c) {
        uint64_t one = 1;
        if (c->wake_fd >= 0)
                (void) !write(c->wake_fd, &one, sizeof(one));
}

void client_unlock(pmqos_client *c) {
        uint64_t t;
        /* A call may have read messages into the queue while the helper slept
         * on the socket: wake it to see them. */
        if (c->helper_created && !c->helper_stop && sd_bus_get_timeout(c->bus, &t) > 0 && t == 0)
                wake_helper(c);
        pthread_mutex_unlock(&c->lock);
}

/* sd-bus gives an absolute CLOCK_MONOTONIC deadline; poll() wants ms from now. */
static int poll_timeout_ms(pmqos_client *c) {
        uint64_t until;

        if (sd_bus_get_timeout(c->bus, &until) <= 0 || until == UINT64_MAX)
                return -1;
        uint64_t now = client_now_usec();
        if (until <= now)
                return 0;
        uint64_t ms = (until - now + 999) / 1000;
        return ms > INT32_MAX ? INT32_MAX : (int) ms;
}

static void *helper_main(void *userdata) {
        pmqos_client *c = userdata;

        pthread_mutex_lock(&c->lock);
        while (!c->helper_stop) {
                if (client_dispatch(c) < 0)
                        break; /* the connection is gone: nothing left to serve */
                struct pollfd p[2] = {
                        { .fd = sd_bus_get_fd(c->bus), .events = (short) sd_bus_get_events(c->bus) },
                        { .fd = c->wake_fd, .events = POLLIN },
                };
                int timeout = poll_timeout_ms(c);
                pthread_mutex_unlock(&c->lock);
                if (poll(p, 2, timeout) > 0 && (p[1].revents & POLLIN)) {
                        uint64_t n;
                        (void) !read(c->wake_fd, &n, sizeof(n));
                }
                pthread_mutex_lock(&c->lock);
        }
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

/* The helper runs SCHED_OTHER whatever the creating thread runs: a
 * SCHED_FIFO audio or control thread that makes a request must not get a
 * second real-time thread in its process, busy with bus traffic (and a
 * SCHED_DEADLINE thread could not create one by inheritance at all). */
static int helper_create(pmqos_client *c) {
        pthread_attr_t attr;
        struct sched_param param = { .sched_priority = 0 };
        int r = pthread_attr_init(&attr);
        if (r != 0)
                return r;
        r = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        if (r == 0)
                r = pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
        if (r == 0)
                r = pthread_attr_setschedparam(&attr, &param);
        if (r == 0)
                r = pthread_create(&c->helper, &attr, helper_main, c);
        pthread_attr_destroy(&attr);
        /* SCHED_IDLE callers may lack the right to raise a thread to
         * SCHED_OTHER (RLIMIT_NICE): such a caller is no real-time one, so
         * inheriting its policy is what it asked for. */
        if (r == EPERM)
                r = pthread_create(&c->helper, NULL, helper_main, c);
        return r;
}

void client_helper_start(pmqos_client *c) {
        sigset_t all, old;

        if (c->integrated || c->helper_created)
                return;
        if (c->wake_fd < 0)
                c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->wake_fd < 0)
                return;
        /* The application's signals stay with the application's threads. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        c->helper_stop = false;
        c->helper_created = helper_create(c) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void client_helper_stop(pmqos_client *c, bool join) {
        if (!c->helper_created)
                return;
        c->helper_stop = true;
        wake_helper(c);
        if (!join || pthread_equal(pthread_self(), c->helper))
                return;
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->helper, NULL);
        pthread_mutex_lock(&c->lock);
        c->helper_created = false;
}
