/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl list: every request, for people (escaped, aligned by characters)
 * and as JSON. */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pmqosctl.h"
#include "util/text.h"

/* ---- list ---- */

void json_string(const char *s) {
        putchar('"');
        for (size_t i = 0, len = strlen(s); i < len;) {
                unsigned char ch = (unsigned char) s[i];
                size_t k = 1;
                while (k < 4 && i + k < len && !utf8_is_valid(s + i, k))
                        k++;
                if (!utf8_is_valid(s + i, k)) {
                        fputs("\\ufffd", stdout);
                        i++;
                        continue;
                }
                if (ch == '"' || ch == '\\')
                        printf("\\%c", ch);
                else if (ch < 0x20 || ch == 0x7f)
                        printf("\\u%04x", ch);
                else if (k == 2 && ch == 0xc2 && (unsigned char) s[i + 1] < 0xa0)
                        printf("\\u%04x", (unsigned char) s[i + 1]); /* C1: U+0080 … U+009F */
                else
                        fwrite(s + i, 1, k, stdout);
                i += k;
        }
        putchar('"');
}

void json_request(const pmqos_request_info *q) {
        printf("{\"cookie\": %" PRIu32 ", \"type\": ", q->cookie);
        json_string(q->type);
        printf(", \"value\": %" PRIi32 ", \"uid\": %" PRIu32 ", \"pid\": %" PRIu32 ", \"exec\": ", q->value, q->uid,
               q->pid);
        json_string(q->exec);
        printf(", \"reason\": ");
        json_string(q->reason);
        printf(", \"created\": %" PRIi64 ", \"persistent\": %s, \"expires\": %" PRIi64 ", \"cpus\": [", q->created_usec,
               q->persistent ? "true" : "false", q->expires_usec);
        for (size_t k = 0; k < q->n_cpus; k++)
                printf("%s%" PRIu32, k ? ", " : "", q->cpus[k]);
        printf("], \"sender\": ");
        json_string(q->sender);
        printf("}");
}

/* Display columns of UTF-8 text: one per character (escaped text has no
 * control characters left). */
static int text_columns(const char *s) {
        int n = 0;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                n += (*p & 0xc0) != 0x80;
        return n;
}

static void print_padded(const char *s, int width) {
        fputs(s, stdout);
        for (int n = text_columns(s); n < width; n++)
                putchar(' ');
}

static void cpus_text(const pmqos_request_info *r, char *buf, size_t size) {
        size_t len = 0;
        buf[0] = 0;
        if (r->n_cpus == 0) {
                snprintf(buf, size, "all");
                return;
        }
        for (size_t i = 0; i < r->n_cpus && len + 12 < size; i++)
                len += (size_t) snprintf(buf + len, size - len, "%s%" PRIu32, i ? "," : "", r->cpus[i]);
}

/* The table shows at most REASON_COLUMNS characters of a reason ("…" marks
 * the cut); --json has all of it. */
#define REASON_COLUMNS 40

static char *table_reason(const char *reason) {
        char *t = term_text(reason[0] ? reason : "-");
        if (!t || text_columns(t) <= REASON_COLUMNS)
                return t;
        char *p = t;
        for (int n = 0; n < REASON_COLUMNS - 1; p++)
                n += (p[1] & 0xc0) != 0x80;
        strcpy(p, "\u2026");
        return t;
}

/* Column widths from the data, counted in characters (not bytes: "µs"), so
 * the table lines up for people; reason and command escaped. */
static void print_table(const pmqos_request_info *infos, size_t n) {
        int w_cookie = 6, w_value = 5, w_uid = 3, w_pid = 3, w_cpus = 4, w_reason = 6;
        char buf[256];
        for (size_t i = 0; i < n; i++) {
                int k;
                if ((k = snprintf(buf, sizeof(buf), "%" PRIu32, infos[i].cookie)) > w_cookie)
                        w_cookie = k;
                format_usec(infos[i].value, buf, sizeof(buf));
                if ((k = text_columns(buf)) > w_value)
                        w_value = k;
                if ((k = snprintf(buf, sizeof(buf), "%" PRIu32, infos[i].uid)) > w_uid)
                        w_uid = k;
                if ((k = snprintf(buf, sizeof(buf), "%" PRIu32, infos[i].pid)) > w_pid)
                        w_pid = k;
                cpus_text(&infos[i], buf, sizeof(buf));
                if ((k = (int) strlen(buf)) > w_cpus)
                        w_cpus = k;
        }
        for (size_t i = 0; i < n; i++) {
                char *reason = table_reason(infos[i].reason);
                int k = reason ? text_columns(reason) : 0;
                if (k > w_reason)
                        w_reason = k;
                free(reason);
        }
        /* A TYPE column only where there is more than cpu_dma (Linux 6.19's cpu_wakeup). */
        bool types = false;
        for (size_t i = 0; i < n; i++)
                types |= strcmp(infos[i].type, "cpu_dma") != 0;
        printf("%-*s ", w_cookie, "COOKIE");
        if (types)
                printf("%-10s ", "TYPE");
        print_padded("VALUE", w_value);
        printf(" %-*s %-*s %-10s %-*s ", w_uid, "UID", w_pid, "PID", "LIFETIME", w_cpus, "CPUS");
        print_padded("REASON", w_reason);
        printf(" COMMAND\n");
        time_t now = time(NULL);
        for (size_t i = 0; i < n; i++) {
                const pmqos_request_info *q = &infos[i];
                char value[32], life[32], cpus[256];
                format_usec(q->value, value, sizeof(value));
                if (q->expires_usec > 0)
                        snprintf(life, sizeof(life), "%llds%s", (long long) (q->expires_usec / 1000000 - now),
                                 q->persistent ? "+p" : "");
                else
                        snprintf(life, sizeof(life), "%s", q->persistent ? "persistent" : "client");
                cpus_text(q, cpus, sizeof(cpus));
                char *reason = table_reason(q->reason), *exec = term_text(q->exec);
                printf("%-*" PRIu32 " ", w_cookie, q->cookie);
                if (types) {
                        char *type = term_text(q->type);
                        printf("%-10s ", type ?: "?");
                        free(type);
                }
                print_padded(value, w_value);
                printf(" %-*" PRIu32 " %-*" PRIu32 " %-10s %-*s ", w_uid, q->uid, w_pid, q->pid, life, w_cpus, cpus);
                print_padded(reason ?: "?", w_reason);
                printf(" %s\n", exec ?: "?");
                free(reason);
                free(exec);
        }
}

int verb_list(int argc, char *argv[]) {
        static const struct option options[] = { { "help", no_argument, NULL, 'h' },
                                                 { "json", no_argument, NULL, 'j' },
                                                 {} };
        bool json = false;
        int c;
        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "hj", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl list [--json]\n"
                               "List every latency request, one line each, or as a JSON array.\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                default:
                        return bad_option("list", argc, argv);
                }
        if (optind < argc)
                return usage_error("list", "unexpected argument \"%s\"", argv[optind]);

        pmqos_client *client;
        pmqos_request_info *infos;
        size_t n;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = pmqos_list_requests(client, &infos, &n);
        if (r < 0) {
                r = broker_error(client, "cannot list requests", r);
                pmqos_client_free(client);
                return r;
        }

        if (json) {
                printf("[");
                for (size_t i = 0; i < n; i++) {
                        printf("%s\n  ", i ? "," : "");
                        json_request(&infos[i]);
                }
                printf("%s]\n", n ? "\n" : "");
        } else {
                print_table(infos, n);
        }
        pmqos_request_info_free(infos, n);
        pmqos_client_free(client);
        return 0;
}
