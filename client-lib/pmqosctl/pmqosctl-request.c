/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl request: a request that outlives this command, ended by its
 * timeout, or bound to a workload (RequestFor): a process, a cgroup, or the
 * control group of a systemd unit, looked up from systemd over the bus. */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "pmqosctl-cli.h"
#include "util/cgroup2.h"
#include "util/cpu-list.h"
#include "util/macro.h"

typedef struct RequestArgs {
        int32_t usec;
        const char *reason;
        uint32_t timeout;
        bool persistent;
        uint32_t *cpus;
        size_t n_cpus;
        const char *pid, *cgroup, *unit; /* at most one: the workload */
        int workloads;                   /* how many of them were given */
} RequestArgs;

/* The D-Bus interface that carries ControlGroup for a unit of this type:
 * only these types have a control group. NULL for the others. */
static const char *unit_interface(const char *unit) {
        static const struct {
                const char *suffix, *interface;
        } types[] = {
                { ".service", "org.freedesktop.systemd1.Service" }, { ".scope", "org.freedesktop.systemd1.Scope" },
                { ".slice", "org.freedesktop.systemd1.Slice" },     { ".socket", "org.freedesktop.systemd1.Socket" },
                { ".mount", "org.freedesktop.systemd1.Mount" },     { ".swap", "org.freedesktop.systemd1.Swap" },
        };
        size_t n = strlen(unit);
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
                size_t m = strlen(types[i].suffix);
                if (n > m && strcmp(unit + n - m, types[i].suffix) == 0)
                        return types[i].interface;
        }
        return NULL;
}

/* Whether unit ends in a unit type's suffix: else it is a service's name. */
static bool has_unit_type(const char *unit) {
        static const char *const suffixes[] = { ".service", ".socket", ".device", ".mount", ".automount", ".swap",
                                                ".target",  ".path",   ".timer",  ".slice", ".scope" };
        size_t n = strlen(unit);
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
                size_t m = strlen(suffixes[i]);
                if (n > m && strcmp(unit + n - m, suffixes[i]) == 0)
                        return true;
        }
        return false;
}

/* The unit's control group as systemd names it ("/system.slice/x.service"),
 * malloc'd. A name without a type is a service, as systemctl takes it.
 * Returns 0, or an exit status after saying why. */
static int unit_control_group(const char *name, char **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        char unit[512];
        const char *path;

        if (!*name)
                return usage_error("request", "give a unit name to --unit");
        if (snprintf(unit, sizeof(unit), "%s%s", name, has_unit_type(name) ? "" : ".service") >= (int) sizeof(unit))
                return usage_error("request", "unit name \"%s\" is too long", name);
        const char *interface = unit_interface(unit);
        if (!interface)
                return usage_error("request",
                                   "%s has no control group: give a service, scope, slice, socket, mount "
                                   "or swap unit",
                                   unit);
        int r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "pmqosctl: cannot reach the system bus to ask systemd about %s: %s\n", unit,
                        strerror(-r));
                return EXIT_REFUSED;
        }
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "GetUnit", &error, &reply, "s", unit);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r < 0) {
                fprintf(stderr, "pmqosctl: cannot find unit %s: %s\n", unit,
                        sd_bus_error_is_set(&error) ? error.message : strerror(-r));
                return EXIT_REFUSED;
        }
        char *cg = NULL;
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, interface, "ControlGroup", &error, &cg);
        if (r < 0 || !cg || !*cg) {
                fprintf(stderr, "pmqosctl: %s has no control group%s%s\n", unit, r < 0 ? ": " : " (is it running?)",
                        r < 0 ? (sd_bus_error_is_set(&error) ? error.message : strerror(-r)) : "");
                free(cg);
                return EXIT_REFUSED;
        }
        *ret = cg;
        return 0;
}

/* A descriptor of the workload: a pidfd, or a cgroup2 directory (a path in
 * the file system, or a path of the unified hierarchy such as
 * /system.slice/x.service). Returns 0, or an exit status after saying why. */
static int open_target(const RequestArgs *a, int *ret_fd) {
        if (a->pid) {
                uint32_t pid;
                if (parse_u32(a->pid, 1, INT32_MAX, &pid) < 0)
                        return usage_error("request", "invalid pid \"%s\"", a->pid);
                int fd = (int) syscall(SYS_pidfd_open, (pid_t) pid, 0);
                if (fd < 0) {
                        fprintf(stderr, "pmqosctl: cannot open process %" PRIu32 ": %s\n", pid,
                                errno == ESRCH ? "no such process" : strerror(errno));
                        return EXIT_REFUSED;
                }
                *ret_fd = fd;
                return 0;
        }
        _cleanup_(freep) char *unit_cg = NULL;
        const char *cg = a->cgroup;
        if (a->unit) {
                int r = unit_control_group(a->unit, &unit_cg);
                if (r)
                        return r;
                cg = unit_cg;
        }
        assert(cg); /* open_target() is called with a workload */
        /* A directory of the file system, else a path of the hierarchy. */
        int fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int e = errno;
        if (fd < 0 && e == ENOENT && cg[0] == '/') {
                fd = cgroup2_open(cg);
                e = errno;
        }
        if (fd < 0) {
                fprintf(stderr, "pmqosctl: cannot open cgroup %s: %s\n", cg,
                        e == ENOTDIR ? "not a directory (give the cgroup's directory)" : strerror(e));
                return EXIT_REFUSED;
        }
        *ret_fd = fd;
        return 0;
}

static int make_request(const RequestArgs *a) {
        pmqos_client *client;
        uint32_t cookie;
        int target = -1, r;

        if (a->pid || a->cgroup || a->unit) {
                r = open_target(a, &target);
                if (r)
                        return r;
        }
        r = connect_broker(&client);
        if (r) {
                if (target >= 0)
                        close(target);
                return r;
        }
        if (target >= 0)
                r = pmqos_request_for_fd(client, a->usec, target, a->reason, a->timeout, a->cpus, a->n_cpus, &cookie);
        else
                r = pmqos_request_full(client, a->usec, a->reason, a->timeout, a->cpus, a->n_cpus,
                                       a->persistent ? PMQOS_REQUEST_PERSISTENT : 0, &cookie);
        if (target >= 0)
                close(target);
        if (r < 0)
                r = broker_error(client, "request refused", r);
        else
                printf("%" PRIu32 "\n", cookie);
        pmqos_client_free(client);
        return r < 0 ? EXIT_REFUSED : r;
}

static void request_help(void) {
        printf("Usage: pmqosctl request USEC --timeout SECONDS [--reason TEXT] [--cpus LIST] [--persistent]\n"
               "       pmqosctl request USEC --pid PID|--cgroup PATH|--unit UNIT [--reason TEXT] [--cpus LIST]\n"
               "                        [--timeout SECONDS]\n"
               "Make a request that outlives this command, and print its cookie.\n"
               "It ends at its timeout; --persistent also keeps it across restarts.\n"
               "With --pid, --cgroup or --unit it ends when that process exits, or when that cgroup\n"
               "(a directory of cgroup2, or a path such as /system.slice/x.service) or the unit's\n"
               "control group has no process left; --timeout is then an upper bound.\n"
               "USEC is µs (50, 50us, 2ms) or a C-state name (C1E).\n");
}

int verb_request(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "timeout", required_argument, NULL, 't' },
                { "reason", required_argument, NULL, 'r' },
                { "persistent", no_argument, NULL, 'p' },
                { "cpus", required_argument, NULL, 'c' },
                { "pid", required_argument, NULL, 'P' },
                { "cgroup", required_argument, NULL, 'g' },
                { "unit", required_argument, NULL, 'u' },
                {},
        };
        _cleanup_(freep) uint32_t *cpus = NULL;
        RequestArgs a = {};
        int c;

        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "ht:r:p", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        request_help();
                        return 0;
                case 't':
                        if (parse_timeout_sec(optarg, &a.timeout) < 0)
                                return usage_error("request",
                                                   "invalid timeout \"%s\"; give whole seconds, as 30, 30s, 5min "
                                                   "or 1h",
                                                   optarg);
                        break;
                case 'r':
                        a.reason = optarg;
                        break;
                case 'p':
                        a.persistent = true;
                        break;
                case 'c':
                        free(cpus);
                        cpus = NULL;
                        if (cpu_list_parse(optarg, &cpus, &a.n_cpus) < 0)
                                return usage_error("request", "invalid CPU list \"%s\"; give one like 0-3,8", optarg);
                        break;
                case 'P':
                        a.pid = optarg;
                        a.workloads++;
                        break;
                case 'g':
                        a.cgroup = optarg;
                        a.workloads++;
                        break;
                case 'u':
                        a.unit = optarg;
                        a.workloads++;
                        break;
                default:
                        return bad_option("request", argc, argv);
                }
        a.cpus = cpus;
        if (optind + 1 != argc)
                return usage_error("request", "give exactly one USEC");
        const char *cstate;
        if (parse_usec_or_cstate("request", argv[optind], &a.usec, &cstate) != 0)
                return EXIT_USAGE;
        if (cstate) {
                fprintf(stderr, "Requesting %" PRIi32 " µs (%s).\n", a.usec, cstate);
                if (!a.reason)
                        a.reason = cstate;
        }
        int workloads = a.workloads;
        if (workloads > 1)
                return usage_error("request", "give one of --pid, --cgroup and --unit");
        if (workloads && a.persistent)
                return usage_error("request", "--persistent cannot go with --pid, --cgroup or --unit: the request "
                                              "ends with its workload");
        if (a.persistent)
                denied_hint = HINT_ADMIN;
        if (a.timeout == 0 && !a.persistent && !workloads)
                return usage_error("request", "--timeout is needed: a plain request would end with this command "
                                              "(or bind it to a workload with --pid, --cgroup or --unit)");
        return make_request(&a);
}
