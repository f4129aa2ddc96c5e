/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "util/key-file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *strip(char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
                s[--n] = 0;
        return s;
}

int key_file_open(KeyFile *f, const char *path, const char *text, size_t len, size_t max, char *err, size_t err_size) {
        *f = (KeyFile){};
        if (len > max) {
                snprintf(err, err_size, "%s: file is larger than %zu KiB", path, max / 1024);
                return -EINVAL;
        }
        if (memchr(text, 0, len)) {
                snprintf(err, err_size, "%s: file contains a NUL byte", path);
                return -EINVAL;
        }
        f->copy = malloc(len + 1);
        if (!f->copy)
                return -ENOMEM;
        memcpy(f->copy, text, len);
        f->copy[len] = 0;
        f->next = f->copy;
        return 0;
}

char *key_file_next(KeyFile *f) {
        while (f->next) {
                char *line = f->next;
                f->next = strchr(line, '\n');
                if (f->next)
                        *f->next++ = 0;
                f->lineno++;
                char *l = strip(line);
                if (*l != 0 && *l != '#' && *l != ';')
                        return l;
        }
        return NULL;
}

int key_file_split(char *line, char **ret_key, char **ret_value) {
        char *eq = strchr(line, '=');
        if (!eq)
                return -EINVAL;
        *eq = 0;
        *ret_key = strip(line);
        *ret_value = strip(eq + 1);
        return 0;
}

void key_file_done(KeyFile *f) {
        free(f->copy);
        *f = (KeyFile){};
}
