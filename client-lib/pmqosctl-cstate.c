/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* C-state names as latencies: "C1E" means the largest exit latency any
 * online CPU gives a state of that name, so that the state stays allowed on
 * every CPU, whatever its model's table says. Read from sysfs here, on this
 * machine, at the moment of the call. */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pmqosctl.h"

#define NAMES_MAX 64 /* distinct state names listed in an error */
#define NAME_MAX_LEN 32

typedef struct Scan {
        const char *want;
        long best; /* -1: not found */
        char spelling[NAME_MAX_LEN];
        char names[NAMES_MAX][NAME_MAX_LEN];
        unsigned n_names;
} Scan;

int read_sysfs_line(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(buf, (int) size, f)) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return 0;
}

static void remember_name(Scan *s, const char *name) {
        for (unsigned i = 0; i < s->n_names; i++)
                if (strcmp(s->names[i], name) == 0)
                        return;
        if (s->n_names < NAMES_MAX)
                snprintf(s->names[s->n_names++], NAME_MAX_LEN, "%s", name);
}

static void scan_cpu(Scan *s, const char *cpu_dir) {
        char path[1400], name[NAME_MAX_LEN], latency[32];

        snprintf(path, sizeof(path), "%s/online", cpu_dir);
        if (read_sysfs_line(path, name, sizeof(name)) == 0 && strcmp(name, "1") != 0)
                return; /* offline: its table does not count (cpu0 often has no "online") */
        for (unsigned k = 0; k < 64; k++) {
                snprintf(path, sizeof(path), "%s/cpuidle/state%u/name", cpu_dir, k);
                if (read_sysfs_line(path, name, sizeof(name)) < 0)
                        break;
                remember_name(s, name);
                if (strcasecmp(name, s->want) != 0)
                        continue;
                snprintf(path, sizeof(path), "%s/cpuidle/state%u/latency", cpu_dir, k);
                char *end;
                long v = read_sysfs_line(path, latency, sizeof(latency)) == 0 ? strtol(latency, &end, 10) : -1;
                if (v >= 0 && v <= PMQOS_LATENCY_MAX && v > s->best) {
                        s->best = v;
                        snprintf(s->spelling, sizeof(s->spelling), "%s", name);
                }
        }
}

int parse_usec_or_cstate(const char *verb, const char *arg, int32_t *ret, const char **ret_name) {
        static Scan s;
        char dir[1024], cpu_dir[1300];

        *ret_name = NULL;
        if (parse_usec(arg, ret) == 0)
                return 0;
        if ((arg[0] >= '0' && arg[0] <= '9') || arg[0] == '-' || arg[0] == 0)
                return usage_error(verb, "invalid latency \"%s\"; give microseconds, 0 … 2000000000, or a C-state name",
                                   arg);

        s = (Scan){ .want = arg, .best = -1 };
        snprintf(dir, sizeof(dir), "%s/devices/system/cpu", arg_sysfs_root);
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (strncmp(de->d_name, "cpu", 3) == 0 && de->d_name[3] >= '0' && de->d_name[3] <= '9' &&
                    strspn(de->d_name + 3, "0123456789") == strlen(de->d_name + 3)) {
                        snprintf(cpu_dir, sizeof(cpu_dir), "%s/%s", dir, de->d_name);
                        scan_cpu(&s, cpu_dir);
                }
        if (d)
                closedir(d);

        if (s.best >= 0) {
                *ret = (int32_t) s.best;
                *ret_name = s.spelling;
                return 0;
        }
        if (s.n_names == 0)
                return usage_error(verb,
                                   "\"%s\" is neither microseconds nor a C-state: this machine shows no C-states "
                                   "(no cpuidle under %s)",
                                   arg, dir);
        char list[NAMES_MAX * (NAME_MAX_LEN + 2)] = "";
        for (unsigned i = 0; i < s.n_names; i++) {
                if (i > 0)
                        strcat(list, ", ");
                strcat(list, s.names[i]);
        }
        return usage_error(verb, "unknown C-state \"%s\"; this machine has: %s", arg, list);
}
