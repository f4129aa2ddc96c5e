/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The hook's key file, read strictly: an unknown section, key or value is
 * an error that names the line, never a setting quietly ignored. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/key-file.h"
#include "oci-conf.h"

static int parse_line(char *l, const char *path, unsigned lineno, bool *in_hook, OciConf *c, char *err, size_t size) {
        if (l[0] == '[') {
                *in_hook = strcmp(l, "[Hook]") == 0;
                if (*in_hook)
                        return 0;
                snprintf(err, size, "%s:%u: unknown section \"%.40s\" (known: [Hook])", path, lineno, l);
                return -EINVAL;
        }
        char *key, *value;
        if (key_file_split(l, &key, &value) < 0) {
                snprintf(err, size, "%s:%u: expected Key=Value, got \"%.40s\"", path, lineno, l);
                return -EINVAL;
        }
        if (!*in_hook) {
                snprintf(err, size, "%s:%u: %.40s: a key before the [Hook] section", path, lineno, key);
                return -EINVAL;
        }
        if (strcmp(key, "MachineWide") != 0) {
                snprintf(err, size, "%s:%u: %.40s: unknown key (known: MachineWide)", path, lineno, key);
                return -EINVAL;
        }
        if (strcmp(value, "allow") == 0 || strcmp(value, "deny") == 0) {
                c->machine_wide = value[0] == 'a';
                return 0;
        }
        snprintf(err, size, "%s:%u: MachineWide: invalid value \"%.40s\", expected deny or allow", path, lineno, value);
        return -EINVAL;
}

int oci_conf_parse(const char *path, const char *text, size_t len, OciConf *ret, char *err, size_t size) {
        OciConf c = { .machine_wide = false };
        bool in_hook = false;
        KeyFile f;
        int r = key_file_open(&f, path, text, len, OCI_CONF_MAX, err, size);
        for (char *l; r >= 0 && (l = key_file_next(&f));)
                r = parse_line(l, path, f.lineno, &in_hook, &c, err, size);
        key_file_done(&f);
        if (r == -ENOMEM)
                snprintf(err, size, "%s: out of memory", path);
        if (r >= 0)
                *ret = c;
        return r < 0 ? r : 0;
}
