/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosd: parses options, opens the device, exports the objects, takes the
 * bus name and runs the event loop until SIGTERM or SIGINT. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "conf/config.h"
#include "util/log.h"
#include "bus/bus.h"
#include "bus/manager.h"
#include "record/state-file.h"
#include "util/macro.h"

#define DEFAULT_DEVICE "/dev/cpu_dma_latency"
#define DEFAULT_STATE_DIR "/var/lib/pmqos"
#define DEFAULT_RUNTIME_DIR "/run/pmqos"
/* The name of the device's descriptor in the service manager's store. */
#define DEVICE_FDNAME "cpu_dma_latency"
#define WAKEUP_FDNAME "cpu_wakeup_latency"
#define DEFAULT_WAKEUP_DEVICE "/dev/cpu_wakeup_latency"

#define DEFAULT_SYSFS_ROOT "/sys"

typedef struct Options {
        ManagerConfig config;
        const char *config_path;
        bool config_path_given;
        unsigned cli_set; /* CONFIG_SET_* given on the command line: they win over the file */
        bool upower_name;
        const char *user;
        bool verbose;
        const char *rules_dirs[2]; /* unit rules: the first directory's files win by name */
        size_t n_rules_dirs;
} Options;

static void help(void) {
        printf("Usage: pmqosd [OPTIONS]\n"
               "Broker of CPU latency requests on the system bus (%s).\n\n"
               "  --device PATH     the latency device (default %s)\n"
               "  --wakeup-device PATH\n"
               "                    the wakeup latency device, for cpu_wakeup (default %s,\n"
               "                    where the kernel has it; \"\" for none)\n"
               "  --config PATH     configuration file (default %s)\n"
               "  --state-dir DIR   where persistent state lives (default %s)\n"
               "  --runtime-dir DIR where the record of connection-bound requests lives, for\n"
               "                    restarts (default $RUNTIME_DIRECTORY or %s; \"\" for none)\n"
               "  --sysfs-root DIR  where per-CPU latency files are found (default %s,\n"
               "                    or $PMQOS_SYSFS_ROOT)\n"
               "  --max-timeout SECONDS\n"
               "                    longest \"timeout\" a request may have (default %u)\n"
               "  --max-requests-per-connection N\n"
               "                    live requests one connection may hold (default %u)\n"
               "  --max-requests-per-uid N\n"
               "                    live requests one user may hold (default %u; root is exempt)\n"
               "  --user NAME       after opening the device and CPU files, run as NAME with\n"
               "                    no capabilities\n"
               "  --rules-dir DIR   read unit rules from DIR only (default %s, then %s)\n"
               "  --upower-name     also own org.freedesktop.UPower, when it is free, for\n"
               "                    clients that hard-code UPower's name\n"
               "  --verbose         log every request\n"
               "  --version         print the version and exit\n"
               "  --help            print this help and exit\n",
               PMQOS_BUS_NAME, DEFAULT_DEVICE, DEFAULT_WAKEUP_DEVICE, PMQOS_DEFAULT_CONFIG, DEFAULT_STATE_DIR,
               DEFAULT_RUNTIME_DIR, DEFAULT_SYSFS_ROOT, LIMITS_DEFAULT.max_timeout_sec,
               LIMITS_DEFAULT.max_per_connection, LIMITS_DEFAULT.max_per_uid, PMQOS_RULES_DIR_ETC, PMQOS_RULES_DIR_LIB);
}

#define LIMIT_MAX 100000000u

static int parse_limit(const char *s, unsigned *ret) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || s[0] == '-' || v < 1 || v > LIMIT_MAX)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

static void options_default(Options *o) {
        const char *env_root = getenv("PMQOS_SYSFS_ROOT");
        const char *env_runtime = getenv("RUNTIME_DIRECTORY"); /* the unit's RuntimeDirectory= */
        *o = (Options) {
                .config = {
                        .core = {
                                .device = DEFAULT_DEVICE,
                                .wakeup_device = DEFAULT_WAKEUP_DEVICE,
                                .wakeup_fd = -1,
                                .state_dir = DEFAULT_STATE_DIR,
                                .runtime_dir = env_runtime && *env_runtime ? env_runtime : DEFAULT_RUNTIME_DIR,
                                .device_fd = -1,
                                .sysfs_root = env_root && *env_root ? env_root : DEFAULT_SYSFS_ROOT,
                                .default_floor = PMQOS_LATENCY_NONE,
                                .battery_floor = PMQOS_LATENCY_NONE,
                        },
                        .limits = LIMITS_DEFAULT,
                },
                .config_path = PMQOS_DEFAULT_CONFIG,
                .rules_dirs = { PMQOS_RULES_DIR_ETC, PMQOS_RULES_DIR_LIB },
                .n_rules_dirs = 2,
        };
}

/* --max-timeout and the two request limits: numbers the file may also set. */
static int set_limit_option(Options *o, const char *arg, unsigned bit, unsigned *target) {
        o->cli_set |= bit;
        if (parse_limit(arg, target) < 0) {
                fprintf(stderr, "pmqosd: invalid number \"%s\"; give one from 1 to %u.\n", arg, LIMIT_MAX);
                return -EINVAL;
        }
        return 0;
}

/* Returns 1 to run, 0 to exit successfully, negative on a usage error. One
 * case per option: the table and the switch are the whole command line, and
 * read best as one piece, so this function is longer than the others. */
static int parse_argv(int argc, char *argv[], Options *o) {
        enum {
                ARG_DEVICE = 0x100,
                ARG_WAKEUP_DEVICE,
                ARG_STATE_DIR,
                ARG_RUNTIME_DIR,
                ARG_CONFIG,
                ARG_UPOWER_NAME,
                ARG_USER,
                ARG_SYSFS_ROOT,
                ARG_MAX_TIMEOUT,
                ARG_MAX_PER_CONNECTION,
                ARG_MAX_PER_UID,
                ARG_VERBOSE,
                ARG_RULES_DIR,
                ARG_VERSION,
                ARG_HELP
        };
        static const struct option options[] = {
                { "device", required_argument, NULL, ARG_DEVICE },
                { "wakeup-device", required_argument, NULL, ARG_WAKEUP_DEVICE },
                { "state-dir", required_argument, NULL, ARG_STATE_DIR },
                { "runtime-dir", required_argument, NULL, ARG_RUNTIME_DIR },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "upower-name", no_argument, NULL, ARG_UPOWER_NAME },
                { "user", required_argument, NULL, ARG_USER },
                { "sysfs-root", required_argument, NULL, ARG_SYSFS_ROOT },
                { "max-timeout", required_argument, NULL, ARG_MAX_TIMEOUT },
                { "max-requests-per-connection", required_argument, NULL, ARG_MAX_PER_CONNECTION },
                { "max-requests-per-uid", required_argument, NULL, ARG_MAX_PER_UID },
                { "verbose", no_argument, NULL, ARG_VERBOSE },
                { "rules-dir", required_argument, NULL, ARG_RULES_DIR },
                { "version", no_argument, NULL, ARG_VERSION },
                { "help", no_argument, NULL, ARG_HELP },
                {},
        };
        int c;

        options_default(o);
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case ARG_DEVICE:
                        o->config.core.device = optarg;
                        break;
                case ARG_WAKEUP_DEVICE:
                        o->config.core.wakeup_device = optarg;
                        break;
                case ARG_STATE_DIR:
                        o->config.core.state_dir = optarg;
                        o->cli_set |= CONFIG_SET_STATE_DIR;
                        break;
                case ARG_RUNTIME_DIR:
                        o->config.core.runtime_dir = optarg;
                        break;
                case ARG_USER:
                        o->user = optarg;
                        break;
                case ARG_UPOWER_NAME:
                        o->upower_name = true;
                        break;
                case ARG_CONFIG:
                        o->config_path = optarg;
                        o->config_path_given = true;
                        break;
                case ARG_SYSFS_ROOT:
                        o->config.core.sysfs_root = optarg;
                        break;
                case ARG_MAX_TIMEOUT:
                        if (set_limit_option(o, optarg, CONFIG_SET_MAX_TIMEOUT, &o->config.limits.max_timeout_sec) < 0)
                                return -EINVAL;
                        break;
                case ARG_MAX_PER_CONNECTION:
                        if (set_limit_option(o, optarg, CONFIG_SET_MAX_PER_CONNECTION,
                                             &o->config.limits.max_per_connection) < 0)
                                return -EINVAL;
                        break;
                case ARG_MAX_PER_UID:
                        if (set_limit_option(o, optarg, CONFIG_SET_MAX_PER_UID, &o->config.limits.max_per_uid) < 0)
                                return -EINVAL;
                        break;
                case ARG_VERBOSE:
                        o->verbose = true;
                        break;
                case ARG_RULES_DIR:
                        o->rules_dirs[0] = optarg;
                        o->n_rules_dirs = 1;
                        break;
                case ARG_VERSION:
                        printf("pmqosd %s\n", PMQOS_VERSION);
                        return 0;
                case ARG_HELP:
                        help();
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "pmqosd: unexpected argument \"%s\"; see --help.\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

/* Reads the configuration file into o->config, keeping command-line values.
 * A missing default file is fine; a missing explicit one or a bad one is not.
 * On error nothing in o->config changes. */
static int load_config(Options *o, char **ret_state_dir) {
        char buf[CONFIG_FILE_MAX + 1], err[512];
        Config c = {
                .limits = LIMITS_DEFAULT,
                .default_floor = PMQOS_LATENCY_NONE,
                .battery_floor = PMQOS_LATENCY_NONE,
        };
        unsigned set = 0;
        ssize_t n = 0;

        *ret_state_dir = NULL;
        int fd = open(o->config_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int k = errno;
                if (k == ENOENT && !o->config_path_given)
                        goto apply;
                log_error("Cannot read configuration %s: %s", o->config_path, strerror(k));
                return -k;
        }
        n = read(fd, buf, sizeof(buf));
        int saved = errno;
        close(fd);
        if (n < 0) {
                log_error("Cannot read configuration %s: %s", o->config_path, strerror(saved));
                return -saved;
        }
        int r = config_parse(o->config_path, buf, (size_t) n, &c, &set, err, sizeof(err));
        if (r < 0) {
                log_error("Bad configuration: %s", r == -EINVAL ? err : strerror(-r));
                return r;
        }

apply : {
        /* The command line wins for the keys it has. */
        Limits cli = o->config.limits;
        o->config.limits = c.limits;
        if (o->cli_set & CONFIG_SET_MAX_PER_CONNECTION)
                o->config.limits.max_per_connection = cli.max_per_connection;
        if (o->cli_set & CONFIG_SET_MAX_PER_UID)
                o->config.limits.max_per_uid = cli.max_per_uid;
        if (o->cli_set & CONFIG_SET_MAX_TIMEOUT)
                o->config.limits.max_timeout_sec = cli.max_timeout_sec;
}
        o->config.core.default_floor = c.default_floor;
        o->config.core.battery_floor = c.battery_floor;
        if ((set & CONFIG_SET_STATE_DIR) && !(o->cli_set & CONFIG_SET_STATE_DIR)) {
                *ret_state_dir = c.state_dir;
                c.state_dir = NULL;
        }
        config_done(&c);
        return 0;
}

typedef struct ReloadContext {
        Options *options;
        Manager *manager;
} ReloadContext;

static int load_rules(const Options *o, RuleSet *ret) {
        char err[512];
        int r = rules_load(o->rules_dirs, o->n_rules_dirs, ret, err, sizeof(err));
        if (r < 0)
                log_error("Bad unit rule: %s", err);
        return r;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        ReloadContext *ctx = userdata;
        Options *o = ctx->options;
        char *state_dir = NULL;

        (void) s, (void) si;
        (void) sd_notify(false, "RELOADING=1");
        Options next = *o;
        if (load_config(&next, &state_dir) < 0)
                log_error("Keeping the previous configuration.");
        else {
                if (state_dir && strcmp(state_dir, o->config.core.state_dir) != 0)
                        log_warning("StateDirectory=%s takes effect at the next start.", state_dir);
                free(state_dir);
                o->config.limits = next.config.limits;
                o->config.core.default_floor = next.config.core.default_floor;
                o->config.core.battery_floor = next.config.core.battery_floor;
                manager_set_limits(ctx->manager, &o->config.limits, o->config.core.default_floor,
                                   o->config.core.battery_floor);
                const Limits *l = &o->config.limits;
                log_info("Reloaded %s: %u requests per connection, %u per user, timeouts up to %u s (%u s without "
                         "request-latency-persistent), %u/%u/%u calls pending per connection/user/all, %u polkit "
                         "checks in flight, %u clients, default floor %d.",
                         o->config_path, l->max_per_connection, l->max_per_uid, l->max_timeout_sec,
                         l->max_unprivileged_timeout_sec, l->max_pending_per_connection, l->max_pending_per_uid,
                         l->max_pending, l->max_polkit_in_flight, l->max_clients, (int) o->config.core.default_floor);
        }
        /* The rules, all or nothing, like the configuration. */
        RuleSet rules = {};
        if (load_rules(o, &rules) < 0)
                log_error("Keeping the previous unit rules.");
        else {
                (void) unit_rules_set(&ctx->manager->rules, &rules);
                log_info("Reloaded %zu unit rule(s).", ctx->manager->rules.n_watches);
        }
        (void) sd_notify(false, "READY=1");
        return 0;
}

/* Becomes user: no root, no capabilities (not even in the bounding set), no
 * way back. The state directory is handed over first, through descriptors,
 * so persistence goes on. */
static int drop_privileges(const struct passwd *pw, const char *state_dir, RuntimeRecord *record) {
        int r = state_hand_over(state_dir, pw->pw_uid, pw->pw_gid);
        if (r < 0) {
                log_error("Cannot hand %s to user %s: %s", state_dir, pw->pw_name,
                          r == -EMLINK ? "its state file is not a plain file with one link" : strerror(-r));
                return r;
        }
        r = runtime_record_hand_over(record, pw->pw_uid, pw->pw_gid);
        if (r < 0) {
                log_error("Cannot hand %s to user %s: %s", record->dir, pw->pw_name,
                          r == -EMLINK ? "its record is not a plain file with one link" : strerror(-r));
                return r;
        }
        /* Needs CAP_SETPCAP; where it is missing the uid change below still
         * clears every effective and permitted capability. */
        for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM && errno != EINVAL)
                        break;
        if (setgroups(0, NULL) < 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0) {
                log_error("Cannot switch to user %s: %s", pw->pw_name, strerror(errno));
                return -errno;
        }
        /* A uid change from 0 clears the effective, permitted and ambient sets,
         * not the inheritable one, which systemd 257 fills with the bounding
         * set (252 left it empty): empty it too. */
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[2] = { { 0 } };
        if (syscall(SYS_capset, &header, none) < 0) {
                log_error("Cannot clear the inheritable capabilities: %s", strerror(errno));
                return -errno;
        }
        /* Make sure no capability can come back. */
        (void) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (pw->pw_uid != 0 && setresuid(0, 0, 0) == 0) {
                log_error("Still able to become root after switching to %s; refusing to run.", pw->pw_name);
                return -EPERM;
        }
        log_info("Running as user %s (uid %u) with no capabilities.", pw->pw_name, (unsigned) pw->pw_uid);
        return 0;
}

static int on_bus_disconnected(sd_bus_message *message, void *userdata, sd_bus_error *error) {
        sd_event *event = userdata;
        (void) message, (void) error;
        /* Without the bus nobody can reach us or tell us a client left: exit so
         * that the service manager restarts us against the new bus. */
        log_error("Lost the connection to the system bus; exiting.");
        sd_event_exit(event, EXIT_FAILURE);
        return 0;
}

/* The bus, wired in one place: departures watched first (so that no
 * client's departure can be missed), then the objects, then the names. */
static int connect_bus(Manager *m, sd_event *event, bool upower_name, sd_bus **ret, ChangeSet *ret_changes) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        static const char *const qos_paths[] = { PMQOS_OBJECT_PATH, PMQOS_UPOWER_POLICY_PATH };
        int r;

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                log_error("Cannot connect to the system bus: %s", strerror(-r));
                return r;
        }
        r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        /* Still open after the loop ends: restart_pending() asks over it. */
        if (r >= 0)
                r = sd_bus_set_close_on_exit(bus, false);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
                                        "org.freedesktop.DBus.Local", "Disconnected", on_bus_disconnected, event);
        if (r >= 0)
                r = manager_attach_bus(m, bus);
        if (r < 0) {
                log_error("Cannot watch the bus: %s", strerror(-r));
                return r;
        }
        /* Departures are watched: the previous run's owners can be checked, and the kernel set. */
        r = manager_start(m, ret_changes);
        if (r < 0)
                return r; /* said why */

        for (size_t i = 0; i < ELEMENTSOF(qos_paths) && r >= 0; i++)
                r = sd_bus_add_object_vtable(bus, NULL, qos_paths[i], PMQOS_QOS_INTERFACE, bus_upower_vtable, m);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, PMQOS_OBJECT_PATH, PMQOS_NATIVE_INTERFACE, bus_native_vtable,
                                             m);
        if (r >= 0)
                r = sd_bus_add_filter(bus, NULL, bus_native_properties_filter, m);
        if (r >= 0)
                r = sd_bus_add_filter(bus, NULL, bus_upower_old_cancel_filter, m);
        if (r < 0) {
                log_error("Cannot export the D-Bus objects: %s", strerror(-r));
                return r;
        }

        r = sd_bus_request_name(bus, PMQOS_BUS_NAME, 0);
        if (r < 0) {
                log_error("Cannot own %s on the system bus: %s%s", PMQOS_BUS_NAME, strerror(-r),
                          r == -EEXIST ? " (is another pmqosd running?)" : "");
                return r;
        }
        if (upower_name) {
                /* Only when free: never push a running UPower off its name. */
                r = sd_bus_request_name(bus, PMQOS_UPOWER_BUS_NAME, 0);
                if (r < 0)
                        log_warning("Not claiming %s: %s%s", PMQOS_UPOWER_BUS_NAME, strerror(-r),
                                    r == -EEXIST ? " (UPower runs)" : "");
                else
                        log_info("Also serving %s for UPower-era clients.", PMQOS_UPOWER_BUS_NAME);
        }
        (void) battery_watch(&m->battery, bus); /* logs; without it the battery floor just never applies */
        (void) unit_rules_watch(&m->rules);     /* logs; without systemd the unit rules are inactive */
        *ret = TAKE_PTR(bus);
        return 0;
}

/* A restart under systemd: the device's descriptor comes back from the
 * store (LISTEN_FDS, named DEVICE_FDNAME); anything else passed is closed. */
static void take_stored_fds(CoreConfig *core) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(true, &names);

        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (!core->have_device_fd && names && names[i] && strcmp(names[i], DEVICE_FDNAME) == 0) {
                        core->have_device_fd = true;
                        core->device_fd = fd;
                } else if (!core->have_wakeup_fd && names && names[i] && strcmp(names[i], WAKEUP_FDNAME) == 0) {
                        core->have_wakeup_fd = true;
                        core->wakeup_fd = fd;
                } else {
                        log_warning("Closing descriptor %d (\"%s\") passed by the service manager: not ours.", fd,
                                    names && names[i] ? names[i] : "");
                        close(fd);
                }
        }
        if (names)
                for (char **p = names; *p; p++)
                        free(*p);
        free(names);
}

static void store_fd(int fd, const char *state, const char *device) {
        int r = sd_pid_notify_with_fds(0, false, state, &fd, 1);
        if (r <= 0)
                log_warning("Cannot hand %s to the service manager's descriptor store (%s): a restart will drop its "
                            "bound for a moment. Is FileDescriptorStoreMax= set?",
                            device, r < 0 ? strerror(-r) : "not supported");
}

/* The service manager keeps a copy of the devices' descriptors, so that the
 * kernel keeps our bounds while we restart; a stop releases them. */
static void store_device_fd(Manager *m, const CoreConfig *core) {
        bool notify = getenv("NOTIFY_SOCKET") != NULL;

        if (core->have_device_fd && !m->core.device_adopted) {
                /* What the store held was not the device: replace it. */
                close(core->device_fd);
                if (notify)
                        (void) sd_notify(false, "FDSTOREREMOVE=1\nFDNAME=" DEVICE_FDNAME);
        }
        if (core->have_wakeup_fd && !m->core.wakeup_adopted) {
                close(core->wakeup_fd);
                if (notify)
                        (void) sd_notify(false, "FDSTOREREMOVE=1\nFDNAME=" WAKEUP_FDNAME);
        }
        if (m->core.device_adopted)
                log_info("Took %s back from the service manager; its bound held through the restart.", core->device);
        else if (notify)
                store_fd(m->core.sink.fd, "FDSTORE=1\nFDNAME=" DEVICE_FDNAME, core->device);
        if (m->core.wakeup_adopted)
                log_info("Took %s back from the service manager too.", core->wakeup_device);
        else if (notify && core_has_wakeup(&m->core))
                store_fd(m->core.wakeup.fd, "FDSTORE=1\nFDNAME=" WAKEUP_FDNAME, core->wakeup_device);
}

/* Whether the service manager stops us only to start us again (systemctl
 * restart, a package upgrade): our unit's pending job is a restart. Asked
 * with a short timeout: a stop must never wait on it. */
static bool restart_pending(sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *job = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(freep) char *type = NULL;
        const char *unit, *job_path;
        uint32_t id;
        int r;

        if (!getenv("NOTIFY_SOCKET") || sd_bus_set_method_call_timeout(bus, 1000000) < 0)
                return false;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "GetUnitByPID", &e, &reply, "u",
                               (uint32_t) getpid());
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &unit);
        if (r >= 0)
                r = sd_bus_get_property(bus, "org.freedesktop.systemd1", unit, "org.freedesktop.systemd1.Unit", "Job",
                                        &e, &job, "(uo)");
        if (r >= 0)
                r = sd_bus_message_read(job, "(uo)", &id, &job_path);
        if (r >= 0 && strcmp(job_path, "/") == 0)
                return false; /* no job: a plain SIGTERM */
        if (r >= 0)
                r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", job_path,
                                               "org.freedesktop.systemd1.Job", "JobType", &e, &type);
        if (r < 0) {
                /* No systemd on this bus (a test's manager): a plain stop. */
                if (!sd_bus_error_has_names(&e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        log_warning("Cannot ask the service manager whether this is a restart: %s; giving per-CPU "
                                    "values back.",
                                    e.message ?: strerror(-r));
                return false;
        }
        return strstr(type, "restart") != NULL; /* restart, try-restart, reload-or-restart */
}

static int run(int argc, char *argv[]) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(manager_freep) Manager *m = NULL;
        Options o;
        sigset_t mask;
        int r;

        r = parse_argv(argc, argv, &o);
        if (r <= 0)
                return r < 0 ? 2 : 0;
        log_set_verbose(o.verbose);

        _cleanup_(freep) char *config_state_dir = NULL;
        if (load_config(&o, &config_state_dir) < 0)
                return 1;
        if (config_state_dir)
                o.config.core.state_dir = config_state_dir;
        _cleanup_(rule_set_done) RuleSet rules = {};
        if (load_rules(&o, &rules) < 0)
                return 1;

        /* The user to become is looked up while the user database is still readable. */
        struct passwd user = {};
        o.config.core.state_owner = geteuid();
        o.config.helper_uid = (uid_t) -1;
        o.config.helper_gid = (gid_t) -1;
        if (o.user) {
                errno = 0;
                struct passwd *pw = getpwnam(o.user);
                if (!pw) {
                        log_error("Cannot run as user %s: %s", o.user, errno ? strerror(errno) : "no such user");
                        return 1;
                }
                /* Only what drop_privileges() needs; the name is argv's, which lives on. */
                user = (struct passwd){ .pw_name = (char *) o.user, .pw_uid = pw->pw_uid, .pw_gid = pw->pw_gid };
                o.config.core.state_owner = pw->pw_uid;
                o.config.helper_uid = pw->pw_uid;
                o.config.helper_gid = pw->pw_gid;
        }

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);

        /* Not sd_event_default(): that one checks its thread with gettid() on
         * every turn of the loop, a system call per message. */
        r = sd_event_new(&event);
        if (r < 0) {
                log_error("Cannot create the event loop: %s", strerror(-r));
                return 1;
        }
        (void) sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
        (void) sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);

        /* Everything that needs root first: the device, the per-CPU files, the
         * state, whose bounds the kernel gets before any client can ask. */
        take_stored_fds(&o.config.core);
        r = manager_new(&m, event, &o.config);
        if (r < 0)
                return 1; /* manager_new said why */
        store_device_fd(m, &o.config.core);
        if (unit_rules_set(&m->rules, &rules) < 0)
                return 1;

        /* Then, optionally, nothing of root at all; the bus sees who we really are. */
        if (o.user && drop_privileges(&user, o.config.core.state_dir, &m->core.record) < 0)
                return 1;

        ChangeSet startup;
        r = connect_bus(m, event, o.upower_name, &bus, &startup);
        if (r < 0)
                return 1; /* connect_bus said why */
        /* What differs from the previous run, now that subscribers can hear it. */
        publish(&m->pub, &startup);

        ReloadContext reload = { .options = &o, .manager = m };
        (void) sd_event_add_signal(event, NULL, SIGHUP, on_sighup, &reload);

        log_info("Serving %s on %s.", PMQOS_BUS_NAME, o.config.core.device);
        /* State is loaded and the name is ours: clients can be served. */
        publish_status(&m->pub);
        (void) sd_notify(false, "READY=1");
        r = sd_event_loop(event);
        (void) sd_notify(false, "STOPPING=1");
        /* Per-CPU values persist in sysfs: across a restart they stay, like the device's bound in the store. */
        if (r == 0 && m->core.cpus.n_originals > 0 && restart_pending(bus)) {
                m->core.keep_cpus = true;
                log_info("Restarting: per-CPU bounds stay in place for the next run.");
        }
        m = manager_free(m); /* per-CPU values restored before the bus goes */
        if (r < 0) {
                log_error("Event loop failed: %s", strerror(-r));
                return 1;
        }
        return r; /* the exit code given to sd_event_exit(): 0 on SIGTERM/SIGINT */
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
