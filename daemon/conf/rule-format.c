/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The same line rules as pmqosd.conf (comments, blanks, Key=Value), with
 * one section, [Rule], required before any key, and every key once. */

#include "conf/rule-format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbus/contract.h"
#include "util/cpu-list.h"
#include "util/key-file.h"
#include "util/text.h"
#include "util/macro.h"
#include "util/parse-value.h"

void rule_done(Rule *r) {
        free(r->file);
        free(r->unit);
        free(r->latency_cstate);
        free(r->cpus);
        free(r->reason);
        *r = (Rule){};
}

static bool same_string(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool rule_equal(const Rule *a, const Rule *b) {
        return same_string(a->file, b->file) && same_string(a->unit, b->unit) && a->latency == b->latency &&
               a->n_cpus == b->n_cpus &&
               (a->n_cpus == 0 || memcmp(a->cpus, b->cpus, a->n_cpus * sizeof(uint32_t)) == 0) &&
               same_string(a->reason, b->reason);
}

bool rule_unit_name_valid(const char *name) {
        static const char *const suffixes[] = { ".service", ".socket", ".target", ".device", ".mount", ".automount",
                                                ".swap",    ".timer",  ".path",   ".slice",  ".scope" };
        size_t len = strlen(name);
        if (len == 0 || len > RULE_UNIT_MAX || name[0] == '.' || name[0] == '@')
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      strchr(":_.-@\\", *p)))
                        return false;
        const char *dot = strrchr(name, '.');
        bool known = false;
        for (size_t i = 0; dot && i < ELEMENTSOF(suffixes); i++)
                known |= strcmp(dot, suffixes[i]) == 0;
        if (!known || dot == name)
                return false;
        const char *at = strchr(name, '@');
        return !at || (at + 1 < dot && !strchr(at + 1, '@')); /* an instance, not a template */
}

enum { KEY_UNIT = 1 << 0, KEY_LATENCY = 1 << 1, KEY_CPUS = 1 << 2, KEY_REASON = 1 << 3 };

/* One Key=Value line into r; NULL, or what is wrong with it. */
static const char *parse_line(char *key, char *value, unsigned lineno, Rule *r, unsigned *seen, int *ret_errno) {
        static const struct {
                const char *name;
                unsigned bit;
        } keys[] = { { "Unit", KEY_UNIT }, { "Latency", KEY_LATENCY }, { "CPUs", KEY_CPUS }, { "Reason", KEY_REASON } };
        unsigned bit = 0;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (strcmp(key, keys[i].name) == 0)
                        bit = keys[i].bit;
        if (!bit)
                return "unknown key (known: Unit, Latency, CPUs, Reason)";
        if (*seen & bit)
                return "set twice";
        *seen |= bit;
        if (bit == KEY_UNIT) {
                if (!rule_unit_name_valid(value))
                        return "not a unit name (NAME.service, NAME.socket, …; an instance, not a template)";
                return (r->unit = strdup(value)) ? NULL : (*ret_errno = -ENOMEM, "out of memory");
        }
        if (bit == KEY_LATENCY && latency_is_cstate_name(value)) {
                r->latency_line = lineno;
                return (r->latency_cstate = strdup(value)) ? NULL : (*ret_errno = -ENOMEM, "out of memory");
        }
        if (bit == KEY_LATENCY)
                return parse_latency(value, PMQOS_CONTRACT_LATENCY_MAX, &r->latency) < 0
                               ? "expected microseconds, 0 … 2000000000, bare or with a unit (\"50us\", \"2ms\"), "
                                 "or a C-state name (\"C1E\")"
                               : NULL;
        if (bit == KEY_CPUS) {
                int k = cpu_list_parse(value, &r->cpus, &r->n_cpus);
                if (k == -ENOMEM)
                        return *ret_errno = k, "out of memory";
                if (k < 0 || r->n_cpus == 0)
                        return "expected a CPU list such as 0-3,8";
                return NULL;
        }
        size_t len = strlen(value);
        if (len == 0 || len > PMQOS_REASON_MAX || !utf8_is_valid(value, len))
                return "expected 1 … 256 bytes of UTF-8";
        for (const unsigned char *p = (const unsigned char *) value; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return "contains a control character";
        return (r->reason = strdup(value)) ? NULL : (*ret_errno = -ENOMEM, "out of memory");
}

int rule_parse(const char *path, const char *text, size_t len, Rule *ret, char *err, size_t err_size) {
        Rule r = {};
        unsigned seen = 0;
        bool in_section = false;
        int k = 0;

        KeyFile f;
        k = key_file_open(&f, path, text, len, RULE_FILE_MAX, err, err_size);
        if (k < 0) {
                key_file_done(&f);
                return k;
        }
        for (char *l; (l = key_file_next(&f));) {
                unsigned lineno = f.lineno;
                const char *problem = NULL;
                char *key = l, *value = NULL;
                if (*l == '[') {
                        if (strcmp(l, "[Rule]") != 0)
                                problem = "unknown section (expected [Rule])";
                        else if (in_section)
                                problem = "[Rule] twice: one rule per file";
                        in_section = true;
                } else if (!in_section)
                        problem = "expected [Rule] before any key";
                else {
                        if (key_file_split(l, &key, &value) < 0)
                                problem = "expected Key=Value";
                        else
                                problem = parse_line(key, value, lineno, &r, &seen, &k);
                }
                if (problem) {
                        char *shown = text_clean(key, strlen(key), 40);
                        if (value)
                                snprintf(err, err_size, "%s:%u: %s: %s", path, lineno, shown ?: "?", problem);
                        else
                                snprintf(err, err_size, "%s:%u: %s", path, lineno, problem);
                        free(shown);
                        if (k == 0)
                                k = -EINVAL;
                        break;
                }
        }
        key_file_done(&f);
        if (k == 0 && (seen & (KEY_UNIT | KEY_LATENCY)) != (KEY_UNIT | KEY_LATENCY)) {
                snprintf(err, err_size, "%s: a rule needs %s", path,
                         !(seen & KEY_UNIT) ? (seen & KEY_LATENCY ? "Unit=" : "Unit= and Latency=") : "Latency=");
                k = -EINVAL;
        }
        /* Shown in listings and errors: it must be valid UTF-8 like everything on the bus. */
        if (k == 0 && !(r.file = text_clean(path, strlen(path), PMQOS_EXEC_MAX - 8)))
                k = -ENOMEM;
        if (k < 0) {
                rule_done(&r);
                return k;
        }
        *ret = r;
        return 0;
}
