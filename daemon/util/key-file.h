/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lines of pmqosd's small key files (pmqosd.conf, unit rules): bounded
 * in size, no NUL, "#" and ";" comments, blanks stripped; the meaning of
 * sections and keys is each parser's own. Pure text, no I/O. */
#pragma once

#include <stddef.h>

typedef struct KeyFile {
        char *copy, *next;
        unsigned lineno; /* of the line last handed out */
} KeyFile;

/* Takes text[0..len): at most max bytes, no NUL (else -EINVAL with "path:
 * …" in err), copied. Returns 0, -EINVAL or -ENOMEM; key_file_done() in any case. */
int key_file_open(KeyFile *f, const char *path, const char *text, size_t len, size_t max, char *err, size_t err_size);
/* The next line that is neither blank nor a comment, stripped of blanks at
 * both ends (and of a CR), writable; NULL at the end. */
char *key_file_next(KeyFile *f);
/* Splits "Key = Value" in place, both stripped; -EINVAL without "=". */
int key_file_split(char *line, char **ret_key, char **ret_value);
void key_file_done(KeyFile *f);
