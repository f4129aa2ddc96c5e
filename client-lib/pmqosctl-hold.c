/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl hold: a bound held while a command runs, or until interrupted;
 * it ends when the command ends, on a signal, or when pmqosctl dies. */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cpu-list.h"
#include "pmqosctl.h"

/* ---- hold ---- */

/* What ends or concerns a hold: interruptions and the command's end. */
static void hold_signals(sigset_t *mask) {
        sigemptyset(mask);
        sigaddset(mask, SIGINT);
        sigaddset(mask, SIGTERM);
        sigaddset(mask, SIGHUP);
        sigaddset(mask, SIGCHLD);
}

static int hold_loop(pmqos_client *client, pid_t child) {
        sigset_t mask;
        hold_signals(&mask);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0) {
                fprintf(stderr, "pmqosctl: cannot watch signals: %s\n", strerror(errno));
                return EXIT_REFUSED;
        }

        for (;;) {
                /* Keeps our request alive across a broker restart. */
                int r = pmqos_client_process(client);
                if (r < 0) {
                        fprintf(stderr, "pmqosctl: lost the system bus: %s\n", strerror(-r));
                        close(sfd);
                        if (child > 0)
                                kill(child, SIGTERM);
                        return EXIT_REFUSED;
                }
                struct pollfd p[2] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = pmqos_client_get_fd(client), .events = (short) pmqos_client_get_events(client) },
                };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        close(sfd);
                        return EXIT_REFUSED;
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) != sizeof(si))
                        continue;
                if (si.ssi_signo == SIGCHLD && child > 0) {
                        int status;
                        if (waitpid(child, &status, WNOHANG) != child)
                                continue;
                        close(sfd);
                        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                }
                if (si.ssi_signo == SIGCHLD)
                        continue;
                if (child <= 0) {
                        close(sfd);
                        return 0; /* interrupted: release and succeed */
                }
                /* The terminal already sent SIGINT to the whole group; pass on the others. */
                if (si.ssi_signo != SIGINT)
                        kill(child, (int) si.ssi_signo);
        }
}

static void block_hold_signals(sigset_t *old) {
        sigset_t mask;
        hold_signals(&mask);
        sigprocmask(SIG_BLOCK, &mask, old);
}

/* Runs command with the signal mask pmqosctl had; returns its pid, or -1 (said why). */
static pid_t start_command(char **command, const sigset_t *old) {
        pid_t child = fork();
        if (child < 0) {
                fprintf(stderr, "pmqosctl: cannot start %s: %s\n", command[0], strerror(errno));
                return -1;
        }
        if (child == 0) {
                sigprocmask(SIG_SETMASK, old, NULL);
                execvp(command[0], command);
                fprintf(stderr, "pmqosctl: cannot run %s: %s\n", command[0], strerror(errno));
                _exit(127);
        }
        return child;
}

int verb_hold(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "reason", required_argument, NULL, 'r' },
                { "cpus", required_argument, NULL, 'c' },
                {},
        };
        const char *reason = NULL;
        uint32_t *cpus = NULL;
        size_t n_cpus = 0;
        int32_t usec;
        int c;

        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "hr:c:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl hold USEC [--reason TEXT] [--cpus LIST] [-- COMMAND [ARG…]]\n"
                               "Hold a latency bound while COMMAND runs (exit status is COMMAND's),\n"
                               "or until interrupted when no COMMAND is given. LIST is like 0-3,8.\n"
                               "USEC may be a C-state name (C1E): the largest exit latency that state has\n"
                               "on an online CPU of this machine.\n");
                        free(cpus);
                        return 0;
                case 'r':
                        reason = optarg;
                        break;
                case 'c':
                        free(cpus);
                        if (cpu_list_parse(optarg, &cpus, &n_cpus) < 0)
                                return usage_error("hold", "invalid CPU list \"%s\"", optarg);
                        break;
                default:
                        free(cpus);
                        return bad_option("hold", argc, argv);
                }
        if (optind >= argc) {
                free(cpus);
                return usage_error("hold", "missing USEC");
        }
        const char *cstate;
        if (parse_usec_or_cstate("hold", argv[optind], &usec, &cstate) != 0) {
                free(cpus);
                return EXIT_USAGE;
        }
        if (cstate && !reason)
                reason = cstate; /* what a listing then says it is for */
        char **command = argv + optind + 1;
        if (*command && strcmp(*command, "--") == 0)
                command++;

        /* Block before the child exists so that no SIGCHLD is lost. */
        sigset_t old;
        block_hold_signals(&old);

        pmqos_client *client;
        uint32_t cookie;
        int r = connect_broker(&client);
        if (r) {
                free(cpus);
                return r;
        }
        r = pmqos_request_full(client, usec, reason, 0, cpus, n_cpus, 0, &cookie);
        free(cpus);
        if (r < 0) {
                r = broker_error(client, "cannot hold the latency bound", r);
                pmqos_client_free(client);
                return r;
        }

        pid_t child = 0;
        if (cstate && *command)
                fprintf(stderr, "Holding %" PRIi32 " µs (%s).\n", usec, cstate);
        if (*command) {
                child = start_command(command, &old);
                if (child < 0) {
                        pmqos_client_free(client);
                        return EXIT_REFUSED;
                }
        } else if (cstate)
                fprintf(stderr, "Holding %" PRIi32 " µs (%s, cookie %" PRIu32 "); interrupt to release.\n", usec,
                        cstate, cookie);
        else
                fprintf(stderr, "Holding %" PRIi32 " µs (cookie %" PRIu32 "); interrupt to release.\n", usec, cookie);

        r = hold_loop(client, child);
        pmqos_client_free(client); /* the bound ends here */
        return r;
}
