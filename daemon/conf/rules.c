/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Directory scans and file reads for the unit rules; parsing is
 * rule-format.c's. */

#include "conf/rules.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/text.h"

void rule_set_done(RuleSet *s) {
        for (size_t i = 0; i < s->n; i++)
                rule_done(&s->rules[i]);
        free(s->rules);
        *s = (RuleSet){};
}

typedef struct Found {
        char *name; /* file name */
        char *path;
} Found;

static int by_name(const void *a, const void *b) {
        return strcmp(((const Found *) a)->name, ((const Found *) b)->name);
}

static bool is_conf(const char *name) {
        size_t n = strlen(name);
        return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".conf") == 0;
}

static void found_done(Found *f, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(f[i].name);
                free(f[i].path);
        }
        free(f);
}

/* Every *.conf name of dirs, the first directory's path for each. */
static int scan(const char *const *dirs, size_t n_dirs, Found **ret, size_t *ret_n, char *err, size_t err_size) {
        Found *found = NULL;
        size_t n = 0;
        for (size_t d = 0; d < n_dirs; d++) {
                DIR *dir = opendir(dirs[d]);
                if (!dir) {
                        if (errno == ENOENT)
                                continue;
                        snprintf(err, err_size, "%s: %s", dirs[d], strerror(errno));
                        found_done(found, n);
                        return -errno;
                }
                struct dirent *de;
                int r = 0;
                while (r == 0 && (de = readdir(dir))) {
                        if (!is_conf(de->d_name))
                                continue;
                        bool seen = false;
                        for (size_t i = 0; i < n; i++)
                                seen |= strcmp(found[i].name, de->d_name) == 0;
                        if (seen)
                                continue; /* overridden by an earlier directory */
                        if (n == RULES_MAX * 2) {
                                snprintf(err, err_size, "%s: more than %u rule files", dirs[d], RULES_MAX);
                                r = -E2BIG;
                                break;
                        }
                        Found *p = realloc(found, (n + 1) * sizeof(Found));
                        if (!p) {
                                r = -ENOMEM;
                                break;
                        }
                        found = p;
                        found[n].name = strdup(de->d_name);
                        found[n].path = malloc(strlen(dirs[d]) + strlen(de->d_name) + 2);
                        if (found[n].path)
                                sprintf(found[n].path, "%s/%s", dirs[d], de->d_name);
                        n++;
                        if (!found[n - 1].name || !found[n - 1].path)
                                r = -ENOMEM;
                }
                closedir(dir);
                if (r < 0) {
                        if (r == -ENOMEM)
                                snprintf(err, err_size, "out of memory");
                        found_done(found, n);
                        return r;
                }
        }
        if (n > 0)
                qsort(found, n, sizeof(Found), by_name);
        *ret = found;
        *ret_n = n;
        return 0;
}

/* The file's text; an empty file or /dev/null (a mask) gives len 0. */
static int read_rule_file(const char *path, char **ret, size_t *ret_len, char *err, size_t err_size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                snprintf(err, err_size, "%s: %s", path, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return -errno;
        }
        if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
                snprintf(err, err_size, "%s: not a regular file", path);
                close(fd);
                return -EINVAL;
        }
        char *buf = malloc(RULE_FILE_MAX + 1);
        size_t len = 0;
        ssize_t k = 1;
        while (buf && len <= RULE_FILE_MAX && (k = read(fd, buf + len, RULE_FILE_MAX + 1 - len)) > 0)
                len += (size_t) k;
        close(fd);
        if (!buf || k < 0) {
                snprintf(err, err_size, "%s: %s", path, buf ? strerror(errno) : "out of memory");
                free(buf);
                return buf ? -EIO : -ENOMEM;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

int rules_load(const char *const *dirs, size_t n_dirs, RuleSet *ret, char *err, size_t err_size) {
        Found *found = NULL;
        size_t n_found = 0;
        int r = scan(dirs, n_dirs, &found, &n_found, err, err_size);
        if (r < 0)
                return r;

        RuleSet set = { .rules = calloc(n_found + 1, sizeof(Rule)) };
        if (!set.rules) {
                found_done(found, n_found);
                snprintf(err, err_size, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_found && r >= 0; i++) {
                char *text = NULL;
                size_t len = 0;
                r = read_rule_file(found[i].path, &text, &len, err, err_size);
                if (r < 0)
                        break;
                if (len > 0) { /* empty: masked */
                        if (set.n == RULES_MAX) {
                                snprintf(err, err_size, "%s: more than %u rules", found[i].path, RULES_MAX);
                                r = -E2BIG;
                        } else if ((r = rule_parse(found[i].path, text, len, &set.rules[set.n], err, err_size)) >= 0)
                                set.n++;
                }
                free(text);
        }
        found_done(found, n_found);
        if (r < 0) {
                rule_set_done(&set);
                return r;
        }
        rule_set_done(ret);
        *ret = set;
        return 0;
}
