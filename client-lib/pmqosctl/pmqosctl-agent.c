/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The password agent of an interactive pmqosctl, as systemctl does it: on a
 * terminal, pkttyagent is started before a call that may need
 * authorization, so that polkit can ask for a password right here. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmqosctl-cli.h"

/* Long enough for pkttyagent to register with polkitd on a loaded machine. */
#define AGENT_READY_TIMEOUT_MS 10000

static pid_t agent_pid;

void password_agent_close(void) {
        if (agent_pid <= 0)
                return;
        kill(agent_pid, SIGTERM);
        (void) waitpid(agent_pid, NULL, 0);
        agent_pid = 0;
}

static void exec_agent(int notify_fd) {
        char fd_text[16];
        sigset_t none;
        /* pmqosctl may have blocked SIGTERM (hold): the agent must hear it. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        snprintf(fd_text, sizeof(fd_text), "%d", notify_fd);
        execlp("pkttyagent", "pkttyagent", "--notify-fd", fd_text, "--fallback", (char *) NULL);
        _exit(127);
}

void password_agent_open(void) {
        static bool registered;
        int fds[2];

        if (agent_pid > 0 || pipe2(fds, O_CLOEXEC) < 0)
                return;
        pid_t pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                return;
        }
        if (pid == 0) {
                close(fds[0]);
                int fd = fcntl(fds[1], F_DUPFD, 3); /* without O_CLOEXEC: the agent's own */
                if (fd >= 0)
                        exec_agent(fd);
                _exit(127);
        }
        close(fds[1]);
        agent_pid = pid;
        if (!registered) {
                atexit(password_agent_close);
                registered = true;
        }
        /* It closes the fd once it is registered (or it failed to start): then the call may go. */
        struct pollfd p = { .fd = fds[0], .events = POLLIN };
        while (poll(&p, 1, AGENT_READY_TIMEOUT_MS) < 0 && errno == EINTR)
                ;
        close(fds[0]);
}
