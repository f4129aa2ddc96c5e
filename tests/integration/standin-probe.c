// SPDX-License-Identifier: LGPL-2.1-or-later
/* A program that uses /dev/cpu_dma_latency (and /dev/cpu_wakeup_latency) as
 * programs do, one step per line on stdin, one answer per line on stdout
 * ("ok …" or "err ERRNO"), for the stand-in's tests (test_standin.py):
 *   open N          open the device into slot N (0 … 15)
 *   wopen N         open /dev/cpu_wakeup_latency into slot N (the same
 *                   steps work on it)
 *   bin N V         write V as 4 bytes
 *   text N STRING   write STRING (no newline; "\n" in it is one)
 *   read N          pread 4 bytes at 0: "ok V"
 *   readall N       read() up to 16 bytes from the file offset: "ok COUNT"
 *   dup N M         slot M = dup(slot N)
 *   close N
 *   fork N          a child that keeps slot N (every other slot closed) until
 *                   its stdin — a pipe we keep — closes: "ok PID"
 *   unfork          close that pipe: the child exits
 *   flood N         open the device up to N times more, kept: "ok OPENED" when
 *                   all N succeed, else "err ERRNO" of the first failure
 *                   (then "count" says how many are open)
 *   count           "ok OPEN" (the flood's descriptors)
 *   unflood         close them all
 *   cycle N V       N times open, write V (4 bytes), close: "ok USEC" taken
 *   pid             "ok PID" (ours) */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 16

static int fds[SLOTS];
static int fork_pipe = -1;
static int flood[4096];
static int n_flood;
static pid_t forked;

static int slot(const char *s) {
        int n = atoi(s);
        return n >= 0 && n < SLOTS ? n : 0;
}

static void answer(int r) {
        if (r < 0)
                printf("err %d\n", errno);
        else
                printf("ok %d\n", r);
}

static void unescape(char *s) {
        char *o = s;
        for (; *s; s++)
                if (s[0] == '\\' && s[1] == 'n') {
                        *o++ = '\n';
                        s++;
                } else
                        *o++ = *s;
        *o = '\0';
}

static int do_fork(int n) {
        int p[2];
        if (pipe(p) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                char c;
                close(p[1]);
                for (int i = 0; i < SLOTS; i++)
                        if (i != n && fds[i] >= 0)
                                close(fds[i]);
                while (read(p[0], &c, 1) > 0)
                        ;
                _exit(0);
        }
        close(p[0]);
        fork_pipe = p[1];
        forked = pid;
        return pid;
}

static int cycle(int n, int32_t v) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n; i++) {
                int fd = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
                if (fd < 0 || write(fd, &v, sizeof(v)) != sizeof(v))
                        return -1;
                close(fd);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        return (int) ((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
}

static void step(char *cmd, char *a, char *b) {
        int32_t v;
        char buf[16];
        if (strcmp(cmd, "open") == 0)
                answer(fds[slot(a)] = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC));
        else if (strcmp(cmd, "wopen") == 0)
                answer(fds[slot(a)] = open("/dev/cpu_wakeup_latency", O_RDWR | O_CLOEXEC));
        else if (strcmp(cmd, "bin") == 0) {
                v = (int32_t) strtol(b, NULL, 10);
                answer((int) write(fds[slot(a)], &v, sizeof(v)));
        } else if (strcmp(cmd, "text") == 0) {
                unescape(b);
                answer((int) write(fds[slot(a)], b, strlen(b)));
        } else if (strcmp(cmd, "read") == 0)
                answer(pread(fds[slot(a)], &v, sizeof(v), 0) == sizeof(v) ? v : -1);
        else if (strcmp(cmd, "readall") == 0)
                answer((int) read(fds[slot(a)], buf, sizeof(buf)));
        else if (strcmp(cmd, "dup") == 0)
                answer(fds[slot(b)] = dup(fds[slot(a)]));
        else if (strcmp(cmd, "close") == 0) {
                answer(close(fds[slot(a)]));
                fds[slot(a)] = -1;
        } else if (strcmp(cmd, "fork") == 0)
                answer(do_fork(slot(a)));
        else if (strcmp(cmd, "unfork") == 0) {
                close(fork_pipe);
                answer(waitpid(forked, NULL, 0) == forked ? 0 : -1);
        } else if (strcmp(cmd, "flood") == 0) {
                int want = atoi(a), r = 0;
                for (int i = 0; i < want && n_flood < 4096 && r >= 0; i++)
                        if ((r = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC)) >= 0)
                                flood[n_flood++] = r;
                answer(r < 0 ? r : n_flood);
        } else if (strcmp(cmd, "count") == 0)
                answer(n_flood);
        else if (strcmp(cmd, "unflood") == 0) {
                while (n_flood > 0)
                        close(flood[--n_flood]);
                answer(0);
        } else if (strcmp(cmd, "cycle") == 0)
                answer(cycle(atoi(a), (int32_t) atoi(b)));
        else if (strcmp(cmd, "pid") == 0)
                answer(getpid());
        else
                printf("err %d\n", EINVAL);
}

int main(void) {
        char line[256];
        for (int i = 0; i < SLOTS; i++)
                fds[i] = -1;
        setvbuf(stdout, NULL, _IOLBF, 0);
        while (fgets(line, sizeof(line), stdin)) {
                line[strcspn(line, "\n")] = '\0';
                char *cmd = strtok(line, " ");
                char *a = strtok(NULL, " ");
                char *b = strtok(NULL, "");
                if (cmd)
                        step(cmd, a ? a : "0", b ? b : "");
        }
        return 0;
}
