/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one Check runner of the unit tests (see unit.h). */

#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int unit_run(Suite *s, enum fork_status fork) {
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, fork);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static const char *make_dir_in(const char *base, const char *name) {
        static char path[256];
        snprintf(path, sizeof(path), "%s/pmqos-unit-%s-XXXXXX", base, name);
        ck_assert_ptr_nonnull(mkdtemp(path));
        return path;
}

const char *unit_make_dir(const char *name) {
        return make_dir_in("/tmp", name);
}

const char *unit_make_memory_dir(const char *name) {
        struct stat st;
        return make_dir_in(stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp", name);
}

void unit_remove_dir(const char *path) {
        char cmd[512];
        ck_assert(strncmp(path, "/tmp/pmqos-unit-", 16) == 0 || strncmp(path, "/dev/shm/pmqos-unit-", 20) == 0);
        ck_assert(!strchr(path, '\''));
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
        ck_assert_int_eq(system(cmd), 0);
}

static void make_parents(char *path) {
        for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
                *p = 0;
                ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
                *p = '/';
        }
}

void unit_write_file(const char *dir, const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        make_parents(path);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

const char *unit_read_file(const char *dir, const char *name) {
        static char buf[4096];
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        buf[0] = 0;
        FILE *f = fopen(path, "r");
        if (!f)
                return buf;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        fclose(f);
        return buf;
}

int32_t unit_read_device(const char *path) {
        int32_t v = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pread(fd, &v, sizeof(v), 0), sizeof(v));
        close(fd);
        return v;
}

char *unit_capture_stderr(void (*f)(void)) {
        FILE *tmp = tmpfile();
        ck_assert_ptr_nonnull(tmp);
        fflush(stderr);
        int saved = dup(STDERR_FILENO);
        dup2(fileno(tmp), STDERR_FILENO);
        f();
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        long n = ftell(tmp);
        char *buf = calloc(1, (size_t) n + 1);
        rewind(tmp);
        ck_assert_uint_eq(fread(buf, 1, (size_t) n, tmp), (size_t) n);
        fclose(tmp);
        return buf;
}

unsigned unit_count(const char *text, const char *what) {
        unsigned n = 0;
        for (const char *p = text; (p = strstr(p, what)); p++)
                n++;
        return n;
}
