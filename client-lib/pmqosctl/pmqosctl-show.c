/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl list: every request, for people (escaped, aligned by display
 * width, fitted to the terminal) and as JSON. */

#include <locale.h>
#include <pwd.h>
#include <sys/ioctl.h>
#include <wchar.h>
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

#include "pmqosctl-cli.h"
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
        printf(", \"bound_to\": ");
        json_string(q->bound_to);
        printf(", \"target\": ");
        json_string(q->target);
        printf("}");
}

/* Display columns of UTF-8 text (escaped text has no control characters
 * left): wide characters (CJK, emoji) take two, combining marks none, as
 * the terminal draws them, whatever the caller's locale. */
static int char_columns(const char *s, size_t *ret_len) {
        static locale_t utf8;
        static bool tried;
        wchar_t wc;
        mbstate_t st = {};

        if (!tried) {
                utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t) 0);
                tried = true;
        }
        locale_t old = utf8 ? uselocale(utf8) : (locale_t) 0;
        size_t n = mbrtowc(&wc, s, MB_CUR_MAX, &st);
        int w = n == 0 || n > 4 ? -1 : wcwidth(wc);
        if (old)
                uselocale(old);
        if (n == 0 || n > 4) { /* not UTF-8 after all: one byte, one column */
                *ret_len = 1;
                return 1;
        }
        *ret_len = n;
        return w < 0 ? 1 : w;
}

int text_columns(const char *s) {
        int n = 0;
        for (size_t len; *s; s += len)
                n += char_columns(s, &len);
        return n;
}

/* s cut to at most max columns, "…" marking the cut (malloc'd; NULL: no memory). */
static char *cut_columns(const char *s, int max) {
        if (text_columns(s) <= max)
                return strdup(s);
        size_t bytes = 0, len;
        for (int n = 0; s[bytes]; bytes += len) {
                int w = char_columns(s + bytes, &len);
                if (n + w > max - 1)
                        break;
                n += w;
        }
        char *t = malloc(bytes + sizeof("\u2026"));
        if (t) {
                memcpy(t, s, bytes);
                strcpy(t + bytes, "\u2026");
        }
        return t;
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

/* On a terminal (without --full) the table shows at most REASON_COLUMNS
 * columns of a reason ("…" marks the cut); --json, --full and output that
 * is not a terminal have all of it. */
#define REASON_COLUMNS 40
/* And of a process or cgroup a request is bound to. */
#define LIFETIME_COLUMNS 40
#define COMMAND_COLUMNS_MIN 12

/* One row as text, each cell escaped for the terminal. */
enum {
        COL_COOKIE,
        COL_TYPE,
        COL_VALUE,
        COL_USER,
        COL_PID,
        COL_SINCE,
        COL_LIFETIME,
        COL_CPUS,
        COL_REASON,
        COL_COMMAND,
        N_COLS
};
static const char *const col_names[N_COLS] = { "COOKIE", "TYPE",     "VALUE", "USER",   "PID",
                                               "SINCE",  "LIFETIME", "CPUS",  "REASON", "COMMAND" };

static void since_text(int64_t created_usec, time_t now, char *buf, size_t size) {
        time_t t = (time_t) (created_usec / 1000000);
        struct tm tm;
        if (created_usec <= 0 || !localtime_r(&t, &tm)) {
                snprintf(buf, size, "-");
                return;
        }
        /* The time of day within the last day, else the date. */
        strftime(buf, size, now - t < 86400 && t <= now ? "%H:%M:%S" : "%Y-%m-%d", &tm);
}

/* How long it lives: what it is bound to (a descriptor, a rule, the process
 * or cgroup it names: not the requester, often gone), its deadline, or its
 * owner's connection. */
static char *lifetime_text(const pmqos_request_info *q, time_t now, bool cut) {
        const char *bound = q->bound_to ? q->bound_to : "";
        char *s = NULL;
        if (strcmp(bound, "process") == 0 || strcmp(bound, "cgroup") == 0) {
                char *target = term_text(q->target && q->target[0] ? q->target : bound);
                s = target ? cut_columns(target, cut ? LIFETIME_COLUMNS : INT32_MAX) : NULL;
                free(target);
        } else if (strcmp(bound, "fd") == 0 || strcmp(bound, "rule") == 0)
                s = strdup(bound);
        else if (q->expires_usec > 0)
                (void) !asprintf(&s, "%llds%s", (long long) (q->expires_usec / 1000000 - now),
                                 q->persistent ? "+p" : "");
        else
                s = strdup(q->persistent ? "persistent" : "client");
        return s;
}

static void row_cells(const pmqos_request_info *q, time_t now, bool cut, char *cells[N_COLS]) {
        char buf[256];
        struct passwd *pw = getpwuid(q->uid);

        (void) !asprintf(&cells[COL_COOKIE], "%" PRIu32, q->cookie);
        cells[COL_TYPE] = term_text(q->type);
        format_usec(q->value, buf, sizeof(buf));
        cells[COL_VALUE] = strdup(buf);
        if (pw)
                cells[COL_USER] = term_text(pw->pw_name);
        else
                (void) !asprintf(&cells[COL_USER], "%" PRIu32, q->uid);
        (void) !asprintf(&cells[COL_PID], "%" PRIu32, q->pid);
        since_text(q->created_usec, now, buf, sizeof(buf));
        cells[COL_SINCE] = strdup(buf);
        cells[COL_LIFETIME] = lifetime_text(q, now, cut);
        cpus_text(q, buf, sizeof(buf));
        cells[COL_CPUS] = strdup(buf);
        char *reason = term_text(q->reason[0] ? q->reason : "-");
        cells[COL_REASON] = reason ? cut_columns(reason, cut ? REASON_COLUMNS : INT32_MAX) : NULL;
        free(reason);
        cells[COL_COMMAND] = term_text(q->exec);
}

/* How wide the table may be: the terminal's width, or no limit with --full
 * or when the output is not a terminal (a pipe, a file: all of it). */
static int table_width(bool full) {
        struct winsize ws;
        if (full || !isatty(STDOUT_FILENO))
                return INT32_MAX;
        const char *env = getenv("COLUMNS");
        uint32_t v;
        if (env && parse_u32(env, 1, 10000, &v) == 0)
                return (int) v;
        return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

/* Columns sized by display width, so the table lines up for people; the
 * last column (the command) is cut to what the terminal has left. full: no
 * cut anywhere; legend: the header line. */
static void print_table(const pmqos_request_info *infos, size_t n, bool full, bool legend) {
        char *(*cells)[N_COLS] = calloc(n ? n : 1, sizeof(*cells));
        int width[N_COLS];
        bool show[N_COLS];
        time_t now = time(NULL);
        int max_width = table_width(full);

        if (!cells) {
                fprintf(stderr, "pmqosctl: out of memory\n");
                return;
        }
        for (int k = 0; k < N_COLS; k++) {
                width[k] = text_columns(col_names[k]);
                show[k] = k != COL_TYPE;
        }
        for (size_t i = 0; i < n; i++) {
                row_cells(&infos[i], now, max_width != INT32_MAX, cells[i]);
                /* A TYPE column only where there is more than cpu_dma (Linux 6.19's cpu_wakeup). */
                show[COL_TYPE] |= strcmp(infos[i].type, "cpu_dma") != 0;
                for (int k = 0; k < N_COLS; k++)
                        if (cells[i][k] && text_columns(cells[i][k]) > width[k])
                                width[k] = text_columns(cells[i][k]);
        }
        int used = 0;
        for (int k = 0; k < COL_COMMAND; k++)
                used += show[k] ? width[k] + 1 : 0;
        int room = max_width - used;
        width[COL_COMMAND] = room > COMMAND_COLUMNS_MIN ? room : COMMAND_COLUMNS_MIN;

        for (size_t i = legend ? 0 : 1; i <= n; i++) {
                for (int k = 0; k < N_COLS; k++) {
                        if (!show[k])
                                continue;
                        const char *text = i == 0 ? col_names[k] : cells[i - 1][k] ?: "?";
                        if (k == COL_COMMAND) {
                                char *cut = cut_columns(text, width[k]);
                                printf("%s\n", cut ?: "?");
                                free(cut);
                        } else {
                                print_padded(text, width[k]);
                                putchar(' ');
                        }
                }
        }
        for (size_t i = 0; i < n; i++)
                for (int k = 0; k < N_COLS; k++)
                        free(cells[i][k]);
        free(cells);
}

int verb_list(int argc, char *argv[]) {
        static const struct option options[] = { { "help", no_argument, NULL, 'h' },
                                                 { "json", no_argument, NULL, 'j' },
                                                 { "full", no_argument, NULL, 'l' },
                                                 { "no-legend", no_argument, NULL, 'L' },
                                                 {} };
        bool json = false, full = false, legend = true;
        int c;
        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "hjl", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl list [--json] [--full] [--no-legend]\n"
                               "List every latency request, one line each, or as a JSON array.\n"
                               "  -l --full    no column cut to the terminal's width (output that is not a\n"
                               "               terminal is never cut)\n"
                               "     --no-legend  no header line\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                case 'l':
                        full = true;
                        break;
                case 'L':
                        legend = false;
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
                print_table(infos, n, full, legend);
        }
        pmqos_request_info_free(infos, n);
        pmqos_client_free(client);
        return 0;
}
