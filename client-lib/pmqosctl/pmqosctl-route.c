/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl route UNIT / unroute UNIT: a service that opens
 * /dev/cpu_dma_latency itself is given pmqos's stand-in device instead, by a
 * drop-in (UNIT.d/50-pmqos-route.conf under /etc/systemd/system, or under
 * $PMQOS_SYSTEMD_SYSTEM_DIR for tests) that binds the stand-in served by
 * pmqos-standin.service over the device and makes UNIT require that
 * service; then systemd is asked to reload (its Manager's Reload over the
 * bus, as systemctl daemon-reload). pmqosd is not called: each open through
 * the stand-in is a request of the opening process, made by the stand-in. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "pmqosctl-cli.h"
#include "pmqosctl-unit-name.h"
#include "util/macro.h"

#define DROP_IN "50-pmqos-route.conf"
#define STANDIN_UNIT "pmqos-standin.service"
#define STANDIN_DIR "/run/pmqos-standin"

static bool has_suffix(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* UNIT as a service's name (a name of no unit type is a service's, as
 * systemctl takes it) into buf. 0, or EXIT_USAGE after saying why. */
static int route_unit_name(const char *verb, const char *arg, char *buf, size_t size) {
        bool typed = unit_name_has_type(arg);
        if (snprintf(buf, size, "%s%s", arg, typed ? "" : ".service") >= (int) size || !unit_name_valid(buf)) {
                _cleanup_(freep) char *shown = term_text(arg);
                return usage_error(verb, "\"%s\" is not a valid unit name", shown ? shown : "?");
        }
        if (!has_suffix(buf, ".service"))
                return usage_error(verb, "%s is not a service: only services are routed", buf);
        if (strcmp(buf, STANDIN_UNIT) == 0)
                return usage_error(verb, "%s serves the stand-in: it cannot be routed through itself", buf);
        return 0;
}

static const char *system_dir(void) {
        const char *d = getenv("PMQOS_SYSTEMD_SYSTEM_DIR");
        return d && *d ? d : "/etc/systemd/system";
}

/* Asks systemd to reload its units (systemctl daemon-reload). 0, or
 * EXIT_REFUSED after saying why (what was written stays). */
static int reload_systemd(void) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                                   "org.freedesktop.systemd1.Manager", "Reload");
        if (r >= 0) /* a reload of many units may take long: systemctl waits minutes too */
                r = sd_bus_call(bus, m, 300 * UINT64_C(1000000), &error, NULL);
        if (r < 0) {
                fprintf(stderr,
                        "pmqosctl: the drop-in is changed, but systemd was not reloaded: %s (run systemctl "
                        "daemon-reload)\n",
                        sd_bus_error_is_set(&error) ? error.message : strerror(-r));
                return EXIT_REFUSED;
        }
        return 0;
}

static int need_root(const char *verb) {
        if (geteuid() == 0)
                return 0;
        fprintf(stderr, "pmqosctl %s: needs root (it changes %s and reloads systemd): run it with sudo\n", verb,
                system_dir());
        return EXIT_REFUSED;
}

static void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}

static int fail_at(const char *dir, const char *unit, const char *what, int e) {
        fprintf(stderr, "pmqosctl: cannot %s %s/%s.d/" DROP_IN ": %s\n", what, dir, unit,
                e == ELOOP || e == ENOTDIR ? "a symbolic link or not a directory on the way: refusing to follow it"
                                           : strerror(e));
        return EXIT_REFUSED;
}

/* UNIT.d under the system directory, made if missing, not through a link. */
static int open_drop_in_dir(const char *unit, bool create) {
        char name[UNIT_NAME_MAX + 3];
        snprintf(name, sizeof(name), "%s.d", unit);
        _cleanup_(closep) int root = open(system_dir(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        if (create && mkdirat(root, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* The whole text to dir/DROP_IN, or nothing: written to a new file beside
 * it, synced, then renamed over it (a link there is replaced, never
 * followed). 0 or a negative errno. */
static int write_atomically(int dir, const char *text) {
        char tmp[64];
        snprintf(tmp, sizeof(tmp), "." DROP_IN ".%d", (int) getpid());
        int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        errno = EIO; /* a short write says nothing */
        int r = fchmod(fd, 0644) < 0 || write(fd, text, len) != (ssize_t) len || fsync(fd) < 0 ? -errno : 0;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(dir, tmp, dir, DROP_IN) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dir, tmp, 0);
        else
                (void) fsync(dir);
        return r;
}

static int route_help(const char *verb) {
        if (strcmp(verb, "route") == 0)
                printf("Usage: pmqosctl route UNIT\n"
                       "Give the service UNIT pmqos's stand-in over /dev/cpu_dma_latency (root): installs\n"
                       "the drop-in UNIT.d/" DROP_IN " and reloads systemd; the next start of UNIT\n"
                       "opens the stand-in (systemctl restart UNIT), each open a request of the opening\n"
                       "process. pmqosctl unroute UNIT takes it back.\n");
        else
                printf("Usage: pmqosctl unroute UNIT\n"
                       "Remove the drop-in of pmqosctl route and reload systemd (root).\n");
        return 0;
}

static int route_args(int argc, char *argv[], char *unit, size_t size) {
        if (argc == 2 && strcmp(argv[1], "--help") == 0)
                return route_help(argv[0]), -1;
        if (argc != 2 || argv[1][0] == '-')
                return argc == 2 ? usage_error(argv[0], "unknown option \"%s\"", argv[1])
                                 : usage_error(argv[0], "give exactly one UNIT");
        return route_unit_name(argv[0], argv[1], unit, size);
}

int verb_route(int argc, char *argv[]) {
        char unit[UNIT_NAME_MAX + 1], text[2048];
        int r = route_args(argc, argv, unit, sizeof(unit));
        if (r)
                return r < 0 ? 0 : r;
        if ((r = need_root("route")))
                return r;
        snprintf(text, sizeof(text),
                 "# Written by \"pmqosctl route %s\"; \"pmqosctl unroute %s\" removes it.\n"
                 "# Its opens of /dev/cpu_dma_latency reach pmqosd through the stand-in served by\n"
                 "# " STANDIN_UNIT ": each open is a request of the process that opened it.\n"
                 "[Unit]\n"
                 "Requires=" STANDIN_UNIT "\n"
                 "After=" STANDIN_UNIT "\n"
                 "\n"
                 "[Service]\n"
                 "BindPaths=" STANDIN_DIR "/cpu_dma_latency:/dev/cpu_dma_latency\n"
                 "BindPaths=-" STANDIN_DIR "/cpu_wakeup_latency:/dev/cpu_wakeup_latency\n",
                 unit, unit);
        _cleanup_(closep) int dir = open_drop_in_dir(unit, true);
        if (dir < 0)
                return fail_at(system_dir(), unit, "write", -dir);
        r = write_atomically(dir, text);
        if (r < 0)
                return fail_at(system_dir(), unit, "write", -r);
        if ((r = reload_systemd()))
                return r;
        fprintf(stderr, "Routed %s through pmqos: its next start opens the stand-in (systemctl restart %s).\n", unit,
                unit);
        return 0;
}

int verb_unroute(int argc, char *argv[]) {
        char unit[UNIT_NAME_MAX + 1];
        int r = route_args(argc, argv, unit, sizeof(unit));
        if (r)
                return r < 0 ? 0 : r;
        if ((r = need_root("unroute")))
                return r;
        _cleanup_(closep) int dir = open_drop_in_dir(unit, false);
        if (dir >= 0 && unlinkat(dir, DROP_IN, 0) < 0)
                r = -errno;
        if (dir == -ENOENT || r == -ENOENT) {
                fprintf(stderr, "%s is not routed: nothing to do.\n", unit);
                return 0;
        }
        if (dir < 0 || r < 0)
                return fail_at(system_dir(), unit, "remove", dir < 0 ? -dir : -r);
        (void) fsync(dir);
        char name[UNIT_NAME_MAX + 3];
        snprintf(name, sizeof(name), "%s.d", unit);
        _cleanup_(closep) int root = open(system_dir(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0)
                (void) unlinkat(root, name, AT_REMOVEDIR); /* only if nothing else is in it */
        if ((r = reload_systemd()))
                return r;
        fprintf(stderr, "Unrouted %s: its next start opens the device itself (systemctl restart %s).\n", unit, unit);
        return 0;
}
