/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Holds a 50 µs CPU latency bound while it runs a busy loop for a few
 * seconds (or as many as given), watching the broker so the bound survives
 * a pmqosd restart. Build: cc hold-busy.c $(pkg-config --cflags --libs pmqos) */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pmqos.h>

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(int argc, char *argv[]) {
        double seconds = argc > 1 ? strtod(argv[1], NULL) : 3.0;
        pmqos_client *c;
        uint32_t cookie;
        int r;

        r = pmqos_client_new(&c);
        if (r < 0) {
                fprintf(stderr, "hold-busy: cannot reach pmqosd: %s\n", pmqos_strerror(r));
                return 1;
        }
        r = pmqos_request_full(c, 50, "hold-busy example", 0, NULL, 0, 0, &cookie);
        if (r < 0) {
                fprintf(stderr, "hold-busy: request refused: %s\n", pmqos_client_last_error(c) ?: pmqos_strerror(r));
                pmqos_client_free(c);
                return 1;
        }
        printf("holding 50 µs (cookie %" PRIu32 ") for %.1f s\n", cookie, seconds);
        fflush(stdout);

        volatile uint64_t spins = 0;
        double end = now() + seconds;
        while (now() < end) {
                for (int i = 0; i < 100000; i++)
                        spins++;
                pmqos_client_process(c); /* cheap when idle; re-issues after a broker restart */
        }

        pmqos_client_free(c); /* the bound ends here */
        printf("released after %" PRIu64 " spins\n", (uint64_t) spins);
        return 0;
}
