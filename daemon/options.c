/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosd's command line and configuration file, made one configuration:
 * the file's keys, except those the command line gave. */

#include "options.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cstates.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/parse-value.h"

#define DEFAULT_DEVICE "/dev/cpu_dma_latency"
#define DEFAULT_WAKEUP_DEVICE "/dev/cpu_wakeup_latency"
#define DEFAULT_STATE_DIR "/var/lib/pmqos"
#define DEFAULT_RUNTIME_DIR "/run/pmqos"
#define DEFAULT_SYSFS_ROOT "/sys"

#define LIMIT_MAX 100000000u

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
               "  --sysfs-root DIR  where per-CPU latency files and cpuidle are found (default %s,\n"
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
               "  --check-config    read the configuration and the unit rules, say what is\n"
               "                    wrong (exit 1) or nothing (exit 0), and exit\n"
               "  --version         print the version and exit\n"
               "  --help            print this help and exit\n",
               PMQOS_BUS_NAME, DEFAULT_DEVICE, DEFAULT_WAKEUP_DEVICE, PMQOS_DEFAULT_CONFIG, DEFAULT_STATE_DIR,
               DEFAULT_RUNTIME_DIR, DEFAULT_SYSFS_ROOT, LIMITS_DEFAULT.max_timeout_sec,
               LIMITS_DEFAULT.max_per_connection, LIMITS_DEFAULT.max_per_uid, PMQOS_RULES_DIR_ETC, PMQOS_RULES_DIR_LIB);
}

/* The grammar of pmqosd.conf (util/parse-value.h): decimal digits only, no
 * sign or space; a number of seconds may be a time span ("5min"). */
static int parse_limit(const char *s, bool seconds, unsigned *ret) {
        uint64_t v;
        int r;
        if (seconds) {
                r = parse_timespan(s, USEC_PER_SEC, &v);
                if (r >= 0 && v % USEC_PER_SEC != 0)
                        r = -EINVAL;
                v /= USEC_PER_SEC;
        } else
                r = parse_decimal(s, LIMIT_MAX, &v);
        if (r < 0 || v < 1 || v > LIMIT_MAX)
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
        bool seconds = bit == CONFIG_SET_MAX_TIMEOUT;
        o->cli_set |= bit;
        if (parse_limit(arg, seconds, target) < 0) {
                fprintf(stderr, "pmqosd: invalid %s \"%s\"; give %s from 1 to %u%s.\n", seconds ? "time" : "number",
                        arg, seconds ? "whole seconds" : "a decimal number", LIMIT_MAX,
                        seconds ? " (\"300\", \"5min\")" : "");
                return -EINVAL;
        }
        return 0;
}

/* The options' codes: above every character getopt_long() can return. */
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
        ARG_HELP,
        ARG_CHECK_CONFIG
};

/* One option of the command line: 1 to go on, 0 to exit successfully
 * (--help, --version), negative on a usage error. */
static int apply_option(Options *o, int c, const char *arg) {
        switch (c) {
        case ARG_DEVICE:
                o->config.core.device = arg;
                break;
        case ARG_WAKEUP_DEVICE:
                o->config.core.wakeup_device = arg;
                break;
        case ARG_STATE_DIR:
                o->config.core.state_dir = arg;
                o->cli_set |= CONFIG_SET_STATE_DIR;
                break;
        case ARG_RUNTIME_DIR:
                o->config.core.runtime_dir = arg;
                break;
        case ARG_USER:
                o->user = arg;
                break;
        case ARG_UPOWER_NAME:
                o->upower_name = true;
                break;
        case ARG_CONFIG:
                o->config_path = arg;
                o->config_path_given = true;
                break;
        case ARG_SYSFS_ROOT:
                o->config.core.sysfs_root = arg;
                break;
        case ARG_MAX_TIMEOUT:
                if (set_limit_option(o, arg, CONFIG_SET_MAX_TIMEOUT, &o->config.limits.max_timeout_sec) < 0)
                        return -EINVAL;
                break;
        case ARG_MAX_PER_CONNECTION:
                if (set_limit_option(o, arg, CONFIG_SET_MAX_PER_CONNECTION, &o->config.limits.max_per_connection) < 0)
                        return -EINVAL;
                break;
        case ARG_MAX_PER_UID:
                if (set_limit_option(o, arg, CONFIG_SET_MAX_PER_UID, &o->config.limits.max_per_uid) < 0)
                        return -EINVAL;
                break;
        case ARG_CHECK_CONFIG:
                o->check_config = true;
                return 1;
        case ARG_VERBOSE:
                o->verbose = true;
                break;
        case ARG_RULES_DIR:
                o->rules_dirs[0] = arg;
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
        return 1;
}

int options_parse_argv(int argc, char *argv[], Options *o) {
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
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "rules-dir", required_argument, NULL, ARG_RULES_DIR },
                { "version", no_argument, NULL, ARG_VERSION },
                { "help", no_argument, NULL, ARG_HELP },
                {},
        };
        int c, r;

        options_default(o);
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                if ((r = apply_option(o, c, optarg)) <= 0)
                        return r;
        if (optind < argc) {
                fprintf(stderr, "pmqosd: unexpected argument \"%s\"; see --help.\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

/* The file's values, except for the keys the command line gave: the
 * command line wins for those. Takes c's strings. */
static void apply_config(Options *o, Config *c, unsigned set, char **ret_state_dir) {
        Limits cli = o->config.limits;
        o->config.limits = c->limits;
        if (o->cli_set & CONFIG_SET_MAX_PER_CONNECTION)
                o->config.limits.max_per_connection = cli.max_per_connection;
        if (o->cli_set & CONFIG_SET_MAX_PER_UID)
                o->config.limits.max_per_uid = cli.max_per_uid;
        if (o->cli_set & CONFIG_SET_MAX_TIMEOUT)
                o->config.limits.max_timeout_sec = cli.max_timeout_sec;
        o->config.core.default_floor = c->default_floor;
        o->config.core.battery_floor = c->battery_floor;
        o->foreign_writes = c->foreign_writes;
        if ((set & CONFIG_SET_STATE_DIR) && !(o->cli_set & CONFIG_SET_STATE_DIR))
                *ret_state_dir = TAKE_PTR(c->state_dir);
        config_done(c);
}

#define VENDOR_CONFIG "/usr/lib/pmqos/pmqosd.conf"
#define DROP_INS_MAX 128u

typedef struct ConfigFiles {
        char *paths[2 + DROP_INS_MAX];
        size_t n;
} ConfigFiles;

static void config_files_done(ConfigFiles *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->paths[i]);
        f->n = 0;
}

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static int cmp_name(const void *a, const void *b) {
        const char *x = strrchr(*(char *const *) a, '/'), *y = strrchr(*(char *const *) b, '/');
        return strcmp(x, y);
}

/* DIR/NAME.conf into f, except names f has from a directory read before. */
static int add_drop_ins(ConfigFiles *f, size_t first, const char *dir) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : log_error_errno(errno, "Cannot read %s: %m", dir);
        for (struct dirent *de; (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".conf") != 0)
                        continue;
                bool shadowed = false;
                for (size_t i = first; i < f->n && !shadowed; i++)
                        shadowed = strcmp(strrchr(f->paths[i], '/') + 1, de->d_name) == 0;
                if (shadowed)
                        continue;
                if (f->n >= ELEMENTSOF(f->paths)) {
                        log_error("Too many drop-ins in %s: at most %u are read.", dir, DROP_INS_MAX);
                        return -E2BIG;
                }
                if (asprintf(&f->paths[f->n], "%s/%s", dir, de->d_name) < 0)
                        return -ENOMEM;
                f->n++;
        }
        return 0;
}

/* The files of the configuration, in the order they apply (a later one's
 * keys win), as systemd layers its own: the main file — --config FILE, or by
 * default /etc/pmqos/pmqosd.conf, else the vendor's /usr/lib/pmqos/pmqosd.conf
 * when /etc has none — then the drop-ins MAIN.d/NAME.conf (by default from
 * /etc/pmqos/pmqosd.conf.d and /usr/lib/pmqos/pmqosd.conf.d, /etc's winning
 * a name both have) in the lexical order of their names. f->paths[0] is NULL
 * when there is no main file. */
static int config_files(const Options *o, ConfigFiles *f) {
        const char *main_path = o->config_path;
        if (!o->config_path_given && access(main_path, F_OK) < 0 && access(VENDOR_CONFIG, F_OK) == 0)
                main_path = VENDOR_CONFIG;
        f->paths[0] = strdup(main_path);
        f->n = 1;
        if (!f->paths[0])
                return -ENOMEM;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s.d", o->config_path);
        int r = add_drop_ins(f, 1, dir);
        if (r >= 0 && !o->config_path_given)
                r = add_drop_ins(f, 1, VENDOR_CONFIG ".d");
        if (r < 0)
                return r;
        qsort(f->paths + 1, f->n - 1, sizeof(char *), cmp_name);
        return 0;
}

/* One file onto c, its C-state names resolved under sysfs_root; *set gains
 * its keys. A missing file is fine unless required. */
static int load_one(const char *path, bool required, const char *sysfs_root, Config *c, unsigned *set) {
        char buf[CONFIG_FILE_MAX + 1], err[4096];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int k = errno;
                if (k == ENOENT && !required)
                        return 0;
                log_error_errno(k, "Cannot read configuration %s: %m", path);
                return -k;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        int saved = errno;
        close(fd);
        if (n < 0) {
                log_error_errno(saved, "Cannot read configuration %s: %m", path);
                return -saved;
        }
        /* config_parse() drops a StateDirectory= the file does not set (a
         * reload); across the files of one configuration it stays. */
        char *prev_state_dir = TAKE_PTR(c->state_dir);
        unsigned file_set = 0;
        int r = config_parse(path, buf, (size_t) n, c, &file_set, err, sizeof(err));
        if (r >= 0)
                r = core_resolve_config_cstates(c, path, sysfs_root, err, sizeof(err));
        if (r < 0 || !(file_set & CONFIG_SET_STATE_DIR))
                c->state_dir = prev_state_dir;
        else
                free(prev_state_dir);
        if (r < 0) {
                if (r == -EINVAL)
                        log_error("Bad configuration: %s", err);
                else
                        log_error_errno(r, "Bad configuration: %m");
                return r;
        }
        *set |= file_set;
        return 0;
}

/* A MaxUnprivilegedTimeoutSec= the files set above the longest timeout any
 * request may have (the files' MaxTimeoutSec=, or --max-timeout) promises
 * what no caller gets: refused where it was set. */
static int check_timeouts(const Options *o, const Config *c, const char *max_at, const char *unprivileged_at) {
        bool cli = o->cli_set & CONFIG_SET_MAX_TIMEOUT;
        uint32_t max = cli ? o->config.limits.max_timeout_sec : c->limits.max_timeout_sec;
        if (!unprivileged_at[0] || c->limits.max_unprivileged_timeout_sec <= max)
                return 0;
        log_error("Bad configuration: %s: MaxUnprivilegedTimeoutSec: %" PRIu32 " s is above MaxTimeoutSec (%" PRIu32
                  " s, %s), the longest timeout any request may have",
                  unprivileged_at, c->limits.max_unprivileged_timeout_sec, max, cli ? "--max-timeout" : max_at);
        return -EINVAL;
}

/* Reads the configuration (config_files()) into o->config, keeping
 * command-line values. A missing default file is fine; a missing explicit
 * one or a bad one is not. On error nothing in o->config changes. */
int options_load_config(Options *o, char **ret_state_dir) {
        ConfigFiles files = {};
        Config c = {
                .limits = LIMITS_DEFAULT,
                .default_floor = PMQOS_LATENCY_NONE,
                .battery_floor = PMQOS_LATENCY_NONE,
        };
        unsigned set = 0;
        char max_at[PATH_MAX + 16] = "the default", unprivileged_at[PATH_MAX + 16] = "";

        *ret_state_dir = NULL;
        int r = config_files(o, &files);
        for (size_t i = 0; r >= 0 && i < files.n; i++) {
                r = load_one(files.paths[i], i == 0 && o->config_path_given, o->config.core.sysfs_root, &c, &set);
                if (r >= 0 && c.max_timeout_line > 0)
                        snprintf(max_at, sizeof(max_at), "%s:%u", files.paths[i], c.max_timeout_line);
                if (r >= 0 && c.max_unprivileged_timeout_line > 0)
                        snprintf(unprivileged_at, sizeof(unprivileged_at), "%s:%u", files.paths[i],
                                 c.max_unprivileged_timeout_line);
        }
        config_files_done(&files);
        if (r >= 0)
                r = check_timeouts(o, &c, max_at, unprivileged_at);
        if (r < 0) {
                config_done(&c);
                return r;
        }
        apply_config(o, &c, set, ret_state_dir);
        return 0;
}

int options_check_config(Options *o) {
        _cleanup_(freep) char *state_dir = NULL;
        RuleSet rules = {};
        /* Both are read, so that one run names every file that would be refused. */
        int a = options_load_config(o, &state_dir);
        int b = options_load_rules(o, &rules);
        rule_set_done(&rules);
        return a < 0 || b < 0 ? 1 : 0;
}

int options_load_rules(const Options *o, RuleSet *ret) {
        char err[1024];
        RuleSet rules = {};
        int r = rules_load(o->rules_dirs, o->n_rules_dirs, &rules, err, sizeof(err));
        if (r >= 0)
                r = core_resolve_rule_cstates(&rules, o->config.core.sysfs_root, err, sizeof(err));
        if (r < 0) {
                rule_set_done(&rules);
                log_error("Bad unit rule: %s", err);
                return r;
        }
        rule_set_done(ret);
        *ret = rules;
        return 0;
}

int options_resolve_user(Options *o, struct passwd *ret) {
        *ret = (struct passwd){};
        o->config.core.state_owner = geteuid();
        o->config.helper_uid = (uid_t) -1;
        o->config.helper_gid = (gid_t) -1;
        if (!o->user)
                return 0;
        errno = 0;
        struct passwd *pw = getpwnam(o->user);
        if (!pw) {
                if (errno)
                        return log_error_errno(errno, "Cannot run as user %s: %m", o->user);
                log_error("Cannot run as user %s: no such user", o->user);
                return -ESRCH;
        }
        /* Only what dropping privileges needs; the name is argv's, which lives on. */
        *ret = (struct passwd){ .pw_name = (char *) o->user, .pw_uid = pw->pw_uid, .pw_gid = pw->pw_gid };
        o->config.core.state_owner = pw->pw_uid;
        o->config.helper_uid = pw->pw_uid;
        o->config.helper_gid = pw->pw_gid;
        return 0;
}
