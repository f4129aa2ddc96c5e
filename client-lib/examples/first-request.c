/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The first program: hold a 50 µs CPU latency bound while some work runs,
 * and run the work all the same when the bound cannot be had (pmqosd not
 * running, not authorized). The snippet in pmqos.h and README.md is this
 * main(). Build: cc first-request.c $(pkg-config --cflags --libs pmqos) */

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <pmqos.h>

/* Stands for the application's latency-sensitive work. */
static void run_low_latency_work(void) {
        struct timespec tick = { .tv_nsec = 1000000 };
        for (int i = 0; i < 100; i++)
                nanosleep(&tick, NULL);
}

int main(void) {
        pmqos_client *c; // NULL after any failure of pmqos_client_new()
        uint32_t cookie;
        int r = pmqos_client_new(&c);
        if (r >= 0)
                r = pmqos_request(c, 50, &cookie);
        if (r < 0)
                fprintf(stderr, "running without a latency bound: %s\n", pmqos_strerror(r));
        run_low_latency_work(); // every CPU wakes within 50 µs if r >= 0
        pmqos_client_free(c);   // the bound ends here, or when the process dies
        return 0;
}
