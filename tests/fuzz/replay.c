/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs a fuzz target over files or directories of inputs (the seed corpus),
 * so that every build replays them without libFuzzer. */

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
        FILE *f = fopen(path, "rb");
        if (!f) {
                perror(path);
                return -1;
        }
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                if (len == cap) {
                        cap = cap ? cap * 2 : 4096;
                        uint8_t *p = realloc(buf, cap);
                        if (!p) {
                                free(buf);
                                fclose(f);
                                return -1;
                        }
                        buf = p;
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                if (n == 0)
                        break;
                len += n;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        return 0;
}

int main(int argc, char *argv[]) {
        int n = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        return EXIT_FAILURE;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (run_file(argv[i]) < 0)
                                return EXIT_FAILURE;
                        n++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d)
                        return EXIT_FAILURE;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char path[4096];
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        if (run_file(path) < 0) {
                                closedir(d);
                                return EXIT_FAILURE;
                        }
                        n++;
                }
                closedir(d);
        }
        printf("%d passed, 0 failed\n", n);
        return n > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
