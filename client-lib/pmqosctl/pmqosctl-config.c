/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl check-config [FILE]: pmqosd's own configuration check (pmqosd
 * --check-config, which names the file, line and key of an error, drop-ins
 * and unit rules included), found where pmqosd is installed — it lives in
 * a libexec directory no PATH names — then, when it passed, the files it
 * read and what each C-state name in them stands for on this machine. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmqosctl-cli.h"
#include "util/cpuidle.h"
#include "util/key-file.h"

#define CONFIG_ETC "/etc/pmqos/pmqosd.conf"
#define CONFIG_VENDOR "/usr/lib/pmqos/pmqosd.conf"
#define FILE_MAX (64 * 1024)
#define DROP_INS_MAX 64

#ifndef PMQOS_LIBEXECDIR
#define PMQOS_LIBEXECDIR "/usr/lib/pmqos"
#endif

/* $PMQOSD (a build tree's), else pmqosd in the libexec directory it was
 * installed to, else Debian's /usr/lib/pmqos; NULL: look on $PATH. */
static const char *pmqosd_path(void) {
        const char *env = getenv("PMQOSD");
        if (env && *env)
                return env;
        if (access(PMQOS_LIBEXECDIR "/pmqosd", X_OK) == 0)
                return PMQOS_LIBEXECDIR "/pmqosd";
        if (access("/usr/lib/pmqos/pmqosd", X_OK) == 0)
                return "/usr/lib/pmqos/pmqosd";
        return NULL;
}

/* pmqosd --check-config: its messages on stderr, as it says them. 0, or
 * an exit status. */
static int run_check(const char *file) {
        const char *path = pmqosd_path();
        const char *argv[] = {
                path ?: "pmqosd", "--check-config", "--sysfs-root", arg_sysfs_root, file ? "--config" : NULL, file, NULL
        };
        pid_t pid = fork();
        if (pid < 0) {
                fprintf(stderr, "pmqosctl check-config: cannot run pmqosd: %s\n", strerror(errno));
                return EXIT_REFUSED;
        }
        if (pid == 0) {
                if (path)
                        execv(path, (char **) argv);
                else
                        execvp("pmqosd", (char **) argv);
                fprintf(stderr,
                        "pmqosctl check-config: cannot run %s: %s (looked in $PMQOSD, %s, /usr/lib/pmqos, $PATH; "
                        "from a build tree: PMQOSD=build/daemon/pmqosd)\n",
                        path ?: "pmqosd", strerror(errno), PMQOS_LIBEXECDIR);
                _exit(EXIT_NOT_FOUND);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return EXIT_REFUSED;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EXIT_REFUSED;
}

static int cmp_base(const void *a, const void *b) {
        return strcmp(strrchr(*(char *const *) a, '/'), strrchr(*(char *const *) b, '/'));
}

/* DIR/NAME.conf into paths, except names a directory read before gave. */
static void add_drop_ins(char **paths, size_t *n, const char *dir) {
        DIR *d = opendir(dir);
        for (struct dirent *de; d && (de = readdir(d)) && *n < DROP_INS_MAX + 1;) {
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".conf") != 0)
                        continue;
                bool shadowed = false;
                for (size_t i = 1; i < *n && !shadowed; i++)
                        shadowed = strcmp(strrchr(paths[i], '/') + 1, de->d_name) == 0;
                if (!shadowed && asprintf(&paths[*n], "%s/%s", dir, de->d_name) >= 0)
                        (*n)++;
        }
        if (d)
                closedir(d);
}

/* Each Key=NAME of a *Latency key (the floors, a rule's Latency=) that is a
 * C-state name: what it stands for here. */
static void show_cstates(const char *path) {
        char buf[FILE_MAX], err[256], names[1024];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
        if (fd >= 0)
                close(fd);
        KeyFile f = {};
        if (len < 0 || key_file_open(&f, path, buf, (size_t) len, sizeof(buf), err, sizeof(err)) < 0) {
                key_file_done(&f);
                return;
        }
        for (char *line, *key, *value; (line = key_file_next(&f));) {
                size_t klen;
                uint32_t v;
                if (key_file_split(line, &key, &value) < 0 || (klen = strlen(key)) < 7 ||
                    strcmp(key + klen - 7, "Latency") != 0 ||
                    !((*value >= 'A' && *value <= 'Z') || (*value >= 'a' && *value <= 'z')))
                        continue;
                if (cpuidle_latency_of(arg_sysfs_root, value, PMQOS_LATENCY_MAX, &v, names, sizeof(names)) == 0)
                        printf("  line %u: %s=%s is %u µs on this machine\n", f.lineno, key, value, (unsigned) v);
        }
        key_file_done(&f);
}

/* The files pmqosd read, in its order: the main one, then the drop-ins
 * (MAIN.d/NAME.conf; by default /etc's, then the vendor's a name /etc lacks),
 * by name. */
static void show_files(const char *file) {
        char *paths[DROP_INS_MAX + 1] = {};
        size_t n = 1;
        const char *main_path = file
                                        ?: access(CONFIG_ETC, F_OK) < 0 && access(CONFIG_VENDOR, F_OK) == 0
                                           ? CONFIG_VENDOR
                                           : CONFIG_ETC;
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s.d", file ?: CONFIG_ETC);
        add_drop_ins(paths, &n, dir);
        if (!file)
                add_drop_ins(paths, &n, CONFIG_VENDOR ".d");
        qsort(paths + 1, n - 1, sizeof(char *), cmp_base);
        for (size_t i = 0; i < n; i++) {
                const char *p = i ? paths[i] : main_path;
                bool there = access(p, F_OK) == 0;
                printf("%s: %s\n", p, there ? "read" : "none (the defaults)");
                if (there)
                        show_cstates(p);
                free(paths[i]);
        }
}

int verb_check_config(int argc, char *argv[]) {
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl check-config [FILE]\n"
                       "Check pmqosd's configuration (FILE, default %s, and its drop-ins in\n"
                       "FILE.d/*.conf) and the unit rules with pmqosd --check-config: exit 1 with the\n"
                       "file, line and key of the first error; else list the files read and what each\n"
                       "C-state name in them stands for on this machine.\n",
                       CONFIG_ETC);
                return 0;
        }
        if (argc > 2)
                return usage_error("check-config", "give at most one FILE");
        if (argc == 2 && argv[1][0] == '-')
                return usage_error("check-config", "unknown option \"%s\"", argv[1]);
        const char *file = argc == 2 ? argv[1] : NULL;
        int r = run_check(file);
        if (r)
                return r;
        printf("No error (pmqosd --check-config).\n");
        show_files(file);
        return 0;
}
