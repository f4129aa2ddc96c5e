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
#include "pmqosctl-cli.h"

/* ---- hold ---- */

/* What ends or concerns a hold: interruptions and the command's end. */
static void hold_signals(sigset_t *mask) {
        sigemptyset(mask);
        sigaddset(mask, SIGINT);
        sigaddset(mask, SIGTERM);
        sigaddset(mask, SIGHUP);
        sigaddset(mask, SIGCHLD);
}

/* Until COMMAND ends (its status) or, without one, until interrupted (0).
 * client is NULL when a best-effort COMMAND runs without the bound. */
static int hold_loop(pmqos_client *client, pid_t child) {
        sigset_t mask;
        hold_signals(&mask);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0) {
                fprintf(stderr, "pmqosctl: cannot watch signals: %s\n", strerror(errno));
                if (child > 0)
                        kill(child, SIGTERM);
                return child > 0 ? EXIT_LAUNCHER : EXIT_REFUSED;
        }

        for (;;) {
                /* Keeps our request alive across a broker restart. */
                int r = client ? pmqos_client_process(client) : 0;
                if (r < 0) {
                        fprintf(stderr, "pmqosctl: lost the system bus: %s\n", strerror(-r));
                        close(sfd);
                        if (child > 0)
                                kill(child, SIGTERM);
                        return child > 0 ? EXIT_LAUNCHER : EXIT_REFUSED;
                }
                struct pollfd p[2] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = client ? pmqos_client_get_fd(client) : -1,
                          .events = client ? (short) pmqos_client_get_events(client) : 0 },
                };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        close(sfd);
                        return child > 0 ? EXIT_LAUNCHER : EXIT_REFUSED;
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

/* Runs command with the signal mask pmqosctl had; returns its pid, or -1
 * (said why). A command that cannot be run exits 126, one not found 127. */
static pid_t start_command(char **command, const sigset_t *old) {
        pid_t child = fork();
        if (child < 0) {
                fprintf(stderr, "pmqosctl: cannot start %s: %s\n", command[0], strerror(errno));
                return -1;
        }
        if (child == 0) {
                sigprocmask(SIG_SETMASK, old, NULL);
                execvp(command[0], command);
                int e = errno;
                fprintf(stderr, "pmqosctl: cannot run %s: %s\n", command[0], strerror(e));
                _exit(e == ENOENT || e == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
        }
        return child;
}

typedef struct Hold {
        const char *reason;
        uint32_t *cpus;
        size_t n_cpus;
        int32_t usec;
        const char *cstate; /* USEC was this C-state's name */
        bool best_effort;
        char **command; /* NULL: hold until interrupted */
} Hold;

static void hold_done(Hold *h) {
        free(h->cpus);
}

/* Returns -1 to go on, else the exit status (help, usage error). */
static int hold_parse(int argc, char *argv[], Hold *h) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "reason", required_argument, NULL, 'r' },
                { "cpus", required_argument, NULL, 'c' },
                { "best-effort", no_argument, NULL, 'b' },
                {},
        };
        int c;

        /* COMMAND starts after the first "--": getopt never sees it, so its
         * arguments stay its own whatever they look like. */
        int end = 1;
        while (end < argc && strcmp(argv[end], "--") != 0)
                end++;
        if (end < argc) {
                if (end + 1 >= argc)
                        return usage_error("hold", "no COMMAND after \"--\"");
                h->command = argv + end + 1;
        }
        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(end, argv, "hr:c:b", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl hold USEC [--reason TEXT] [--cpus LIST] [--best-effort] [-- COMMAND "
                               "[ARG…]]\n"
                               "Hold a latency bound while COMMAND runs, or until interrupted when no COMMAND\n"
                               "is given. LIST is like 0-3,8. USEC is µs (50, or 50us, 2ms), or a C-state name\n"
                               "(C1E): the largest exit latency that state has on an online CPU of this machine.\n"
                               "  --best-effort  run COMMAND even when the bound cannot be had (a note on stderr)\n"
                               "Exit status with COMMAND: COMMAND's, or 125 when pmqosctl fails (no broker,\n"
                               "refused), 126 when COMMAND cannot be run, 127 when it is not found.\n");
                        return 0;
                case 'r':
                        h->reason = optarg;
                        break;
                case 'c':
                        free(h->cpus);
                        h->cpus = NULL;
                        if (cpu_list_parse(optarg, &h->cpus, &h->n_cpus) < 0)
                                return usage_error("hold", "invalid CPU list \"%s\"", optarg);
                        break;
                case 'b':
                        h->best_effort = true;
                        break;
                default:
                        return bad_option("hold", end, argv);
                }
        if (optind >= end)
                return usage_error("hold", "missing USEC");
        if (parse_usec_or_cstate("hold", argv[optind], &h->usec, &h->cstate) != 0)
                return EXIT_USAGE;
        if (h->cstate && !h->reason)
                h->reason = h->cstate; /* what a listing then says it is for */
        if (optind + 1 < end)
                return usage_error("hold", "unexpected argument \"%s\"; put COMMAND after \"--\"", argv[optind + 1]);
        if (h->best_effort && !h->command)
                return usage_error("hold", "--best-effort needs a COMMAND to run");
        return -1;
}

/* The bound, held through *ret_client; or the exit status after saying why
 * (with --best-effort, 0 and no client: a one-line note said so). */
static int hold_acquire(const Hold *h, pmqos_client **ret_client, uint32_t *ret_cookie) {
        pmqos_client *client = NULL;
        const char *what = "cannot reach pmqosd";
        int r = pmqos_client_new(&client);
        if (r >= 0) {
                bool ask = arg_ask_password && isatty(STDIN_FILENO);
                pmqos_client_set_allow_interactive(client, ask);
                if (ask)
                        password_agent_open();
                (void) pmqos_client_get_fd(client); /* hold_loop() serves it: no helper thread */
                what = "cannot hold the latency bound";
                r = pmqos_request_full(client, h->usec, h->reason, 0, h->cpus, h->n_cpus, 0, ret_cookie);
                password_agent_close(); /* COMMAND gets the terminal to itself */
        }
        if (r >= 0) {
                *ret_client = client;
                return 0;
        }
        *ret_client = NULL;
        if (!h->best_effort || !h->command) { /* hold_parse() refuses --best-effort without COMMAND */
                broker_error(client, what, r);
                pmqos_client_free(client);
                return h->command ? EXIT_LAUNCHER : EXIT_REFUSED;
        }
        char *why = broker_reason(client, r);
        fprintf(stderr, "pmqosctl: running %s without the latency bound: %s\n", h->command[0], why ?: "?");
        free(why);
        pmqos_client_free(client);
        return 0;
}

int verb_hold(int argc, char *argv[]) {
        _cleanup_(hold_done) Hold h = {};
        pmqos_client *client;
        uint32_t cookie = 0;

        int r = hold_parse(argc, argv, &h);
        if (r >= 0)
                return r;
        /* Block before the child exists so that no SIGCHLD is lost. */
        sigset_t old;
        block_hold_signals(&old);
        r = hold_acquire(&h, &client, &cookie);
        if (r != 0)
                return r;

        pid_t child = 0;
        if (h.command) {
                if (client && h.cstate)
                        fprintf(stderr, "Holding %" PRIi32 " µs (%s).\n", h.usec, h.cstate);
                child = start_command(h.command, &old);
                if (child < 0) {
                        pmqos_client_free(client);
                        return EXIT_LAUNCHER;
                }
        } else if (h.cstate)
                fprintf(stderr, "Holding %" PRIi32 " µs (%s, cookie %" PRIu32 "); interrupt to release.\n", h.usec,
                        h.cstate, cookie);
        else
                fprintf(stderr, "Holding %" PRIi32 " µs (cookie %" PRIu32 "); interrupt to release.\n", h.usec, cookie);

        r = hold_loop(client, child);
        pmqos_client_free(client); /* the bound ends here */
        return r;
}
