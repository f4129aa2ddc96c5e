/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl: the command-line face of pmqosd, built on libpmqos only: main()
 * and the one-call commands (cancel, set-minimum, monitor).
 * Exit status: 0 success, 1 the broker refused or failed, 2 usage error. */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dbus/contract.h"
#include "pmqosctl-cli.h"
#include "util/text.h"

/* ---- cancel, set-minimum ---- */

/* Commands that are one library call: connect, call, say why if refused. */
typedef int (*OneCall)(pmqos_client *c, int64_t arg);

static int call_cancel(pmqos_client *c, int64_t cookie) {
        return pmqos_cancel(c, (uint32_t) cookie);
}

static int call_set_minimum(pmqos_client *c, int64_t usec) {
        return pmqos_set_minimum_latency(c, (int32_t) usec);
}

static int run_one_call(const char *what, OneCall call, int64_t arg) {
        pmqos_client *client;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = call(client, arg);
        if (r < 0)
                r = broker_error(client, what, r);
        pmqos_client_free(client);
        return r;
}

static int verb_cancel(int argc, char *argv[]) {
        uint32_t cookie;
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl cancel COOKIE\nEnd a latency request.\n");
                return 0;
        }
        if (argc != 2)
                return usage_error("cancel", "give exactly one COOKIE");
        if (parse_u32(argv[1], 1, UINT32_MAX, &cookie) < 0)
                return usage_error("cancel", "invalid cookie \"%s\"", argv[1]);

        return run_one_call("cannot cancel", call_cancel, cookie);
}

static int verb_set_minimum(int argc, char *argv[]) {
        int32_t usec;
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl set-minimum USEC|none\n"
                       "Set the administrator floor: no bound goes below it. \"none\" removes it.\n"
                       "USEC may be a C-state name (C1E), as for hold.\n");
                return 0;
        }
        if (argc != 2)
                return usage_error("set-minimum", "give exactly one USEC or \"none\"");
        if (strcmp(argv[1], "none") == 0)
                usec = PMQOS_LATENCY_NONE;
        else {
                const char *cstate;
                if (parse_usec_or_cstate("set-minimum", argv[1], &usec, &cstate) != 0)
                        return EXIT_USAGE;
                if (cstate)
                        fprintf(stderr, "Setting the floor to %" PRIi32 " µs (%s).\n", usec, cstate);
        }

        return run_one_call("cannot set the minimum latency", call_set_minimum, usec);
}

/* ---- monitor ---- */

static void on_event(pmqos_client *c, pmqos_event event, int32_t usec, void *userdata) {
        static const char *const names[] = {
                [PMQOS_EVENT_LATENCY_CHANGED] = "latency",
                [PMQOS_EVENT_REQUESTS_CHANGED] = "requests",
                [PMQOS_EVENT_BROKER_LOST] = "broker-stopped",
                [PMQOS_EVENT_BROKER_RESTARTED] = "broker-started",
        };
        const bool *json = userdata;
        char v[32];
        (void) c;
        if ((unsigned) event >= sizeof(names) / sizeof(names[0]))
                return;
        if (*json) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                printf("{\"timestamp\": %lld, \"event\": \"%s\"", (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000,
                       names[event]);
                if (event == PMQOS_EVENT_LATENCY_CHANGED)
                        printf(", \"value\": %" PRIi32, usec);
                printf("}\n");
        } else
                switch (event) {
                case PMQOS_EVENT_LATENCY_CHANGED:
                        format_usec(usec, v, sizeof(v));
                        printf("latency %s\n", v);
                        break;
                case PMQOS_EVENT_REQUESTS_CHANGED:
                        printf("requests changed\n");
                        break;
                case PMQOS_EVENT_BROKER_LOST:
                        printf("broker stopped\n");
                        break;
                case PMQOS_EVENT_BROKER_RESTARTED:
                        printf("broker started\n");
                        break;
                }
        fflush(stdout);
}

static int verb_monitor(int argc, char *argv[]) {
        static bool json;
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl monitor [--json]\n"
                       "Print each change of the effective latency and of the request set, until interrupted.\n"
                       "  --json  one JSON object a line: \"timestamp\" (µs since the epoch), \"event\"\n"
                       "          (latency, requests, broker-stopped, broker-started), \"value\" (µs, -1: none)\n");
                return 0;
        }
        json = argc == 2 && strcmp(argv[1], "--json") == 0;
        if (argc != 1 && !json)
                return usage_error("monitor", "unexpected argument \"%s\"", argv[1]);

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);

        pmqos_client *client;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = pmqos_client_set_event_callback(client, on_event, &json);
        int32_t now;
        if (r >= 0)
                r = pmqos_get_latency(client, &now); /* a round trip: the subscription is in place */
        if (r < 0) {
                r = broker_error(client, "cannot monitor", r);
                pmqos_client_free(client);
                return r;
        }
        fprintf(stderr, "Monitoring %s; interrupt to stop.\n", PMQOS_BUS_NAME);

        for (;;) {
                if (pmqos_client_process(client) < 0) {
                        fprintf(stderr, "pmqosctl: lost the system bus\n");
                        close(sfd);
                        pmqos_client_free(client);
                        return EXIT_REFUSED;
                }
                struct pollfd p[2] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = pmqos_client_get_fd(client), .events = (short) pmqos_client_get_events(client) },
                };
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents & POLLIN)
                        break;
        }
        close(sfd);
        pmqos_client_free(client);
        return 0;
}

/* ---- main ---- */

static void help(void) {
        printf("Usage: pmqosctl [--no-ask-password] [--sysfs-root DIR] [COMMAND [ARGS…]]\n"
               "Ask pmqosd for CPU latency bounds and see who holds them. No COMMAND: status.\n\n"
               "Commands:\n"
               "  status [--json|--watch [S]|--check]\n"
               "                               what sets the bound, other holders, C-states per CPU;\n"
               "                               --check: exit 1 unless the kernel applies what pmqosd asks\n"
               "  list [--json] [--full] [--no-legend]\n"
               "                               all requests\n"
               "  hold USEC [--reason TEXT] [--cpus LIST] [--best-effort] [-- COMMAND…]\n"
               "                               hold a bound while COMMAND runs, or until interrupted\n"
               "  request USEC --timeout SECONDS [--reason TEXT] [--cpus LIST] [--persistent]\n"
               "                               a request that outlives this command; prints its cookie\n"
               "  request USEC --pid PID|--cgroup PATH|--unit UNIT [--reason TEXT] [--cpus LIST]\n"
               "                               a request for as long as that process, cgroup or unit lives\n"
               "  cancel COOKIE                end a request\n"
               "  set-minimum USEC|none        set or clear the administrator floor\n"
               "  monitor [--json]             print changes as they happen\n"
               "  metrics [--textfile PATH]    what pmqosd holds and what its bounds cost, for Prometheus\n"
               "  run [--reason TEXT] [--cpus LIST] [--clamp USEC] -- COMMAND…\n"
               "                               run COMMAND with a stand-in /dev/cpu_dma_latency\n"
               "  route UNIT / unroute UNIT    give a service the stand-in (root), or take it back\n"
               "  check-config [FILE]          check pmqosd's configuration and drop-ins (pmqosd --check-config)\n\n"
               "USEC is µs (50, 50us, 2ms) or a C-state name (C1E); SECONDS a time span (30, 5min, 1h).\n"
               "Exit status: 0 success, 1 refused or failed, 2 usage error; hold/run -- COMMAND: COMMAND's,\n"
               "or 125 pmqosctl failed, 126 COMMAND cannot run, 127 COMMAND not found.\n"
               "Each command takes --help.\n");
}

int main(int argc, char *argv[]) {
        static const struct {
                const char *name;
                int (*run)(int argc, char *argv[]);
                bool may_authorize; /* it changes something: a password agent on a terminal */
                const char *denied_hint;
        } verbs[] = {
                { "status", verb_status, false, NULL },      { "list", verb_list, false, NULL },
                { "hold", verb_hold, true, HINT_REQUEST },   { "request", verb_request, true, HINT_REQUEST },
                { "cancel", verb_cancel, true, HINT_ADMIN }, { "set-minimum", verb_set_minimum, true, HINT_ADMIN },
                { "monitor", verb_monitor, false, NULL },    { "run", verb_run, true, HINT_REQUEST },
                { "metrics", verb_metrics, false, NULL },    { "route", verb_route, false, NULL },
                { "unroute", verb_unroute, false, NULL },    { "check-config", verb_check_config, false, NULL },
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "no-ask-password", no_argument, NULL, 'n' },
                { "sysfs-root", required_argument, NULL, 's' },
                {},
        };
        const char *env_root = getenv("PMQOS_SYSFS_ROOT");
        int c;

        if (env_root && *env_root)
                arg_sysfs_root = env_root;
        opterr = 0; /* we say it ourselves, in one line */
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return stdout_written(NULL, 0);
                case 'V':
                        printf("pmqosctl %s\n", PMQOS_VERSION);
                        return stdout_written(NULL, 0);
                case 'n':
                        arg_ask_password = false;
                        break;
                case 's':
                        arg_sysfs_root = optarg;
                        break;
                default:
                        fprintf(stderr, "pmqosctl: unknown option \"%s\" (see pmqosctl --help)\n", argv[optind - 1]);
                        return EXIT_USAGE;
                }
        if (optind >= argc) { /* no command: the state, as systemctl and powerprofilesctl show it */
                char *status[] = { (char *) "status", NULL };
                return stdout_written("status", verb_status(1, status));
        }
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                if (strcmp(argv[optind], verbs[i].name) == 0) {
                        arg_may_authorize = verbs[i].may_authorize;
                        denied_hint = verbs[i].denied_hint;
                        return stdout_written(verbs[i].name, verbs[i].run(argc - optind, argv + optind));
                }
        fprintf(stderr, "pmqosctl: unknown command \"%s\" (see pmqosctl --help)\n", argv[optind]);
        return EXIT_USAGE;
}
