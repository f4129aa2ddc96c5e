/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl: the command-line face of pmqosd, built on libpmqos only.
 * Exit status: 0 success, 1 the broker refused or failed, 2 usage error. */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu-list.h"
#include "contract.h"
#include "text.h"
#include "pmqos.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2

static bool arg_ask_password = true;
static const char *arg_sysfs_root = "/sys";

static int usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *verb, const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "pmqosctl %s: ", verb);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see pmqosctl %s --help)\n", verb);
        return EXIT_USAGE;
}

static int bad_option(const char *verb, int argc, char *argv[]) {
        const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        return usage_error(verb, "unknown option or missing value in \"%s\"", arg);
}

/* Text from the broker made safe for a terminal: control characters and
 * invalid UTF-8 escaped as \\xNN, as pmqosd does with command lines. */
static char *term_text(const char *s) {
        size_t len = strlen(s);
        return text_clean(s, len, 4 * len + 8);
}

static int broker_error(pmqos_client *c, const char *what, int r) {
        const char *msg = c ? pmqos_client_last_error(c) : NULL;
        if (r == -ECONNREFUSED && !msg)
                msg = "pmqosd is not running";
        else if (r == -EHOSTDOWN)
                msg = "the system bus is not available";
        char *clean = term_text(msg ?: strerror(-r));
        fprintf(stderr, "pmqosctl: %s: %s\n", what, clean ?: "(out of memory)");
        free(clean);
        return EXIT_REFUSED;
}

static int connect_broker(pmqos_client **ret) {
        int r = pmqos_client_new(ret);
        if (r < 0)
                return broker_error(NULL, "cannot reach pmqosd", r);
        pmqos_client_set_allow_interactive(*ret, arg_ask_password && isatty(STDIN_FILENO));
        return 0;
}

static int parse_usec(const char *s, int32_t *ret) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 0 || v > PMQOS_LATENCY_MAX)
                return -EINVAL;
        *ret = (int32_t) v;
        return 0;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *ret) {
        char *end;
        errno = 0;
        if (*s == '-' || *s == '+')
                return -EINVAL;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        *ret = (uint32_t) v;
        return 0;
}

static void format_usec(int32_t v, char *buf, size_t size) {
        if (v < 0 || v >= PMQOS_LATENCY_MAX)
                snprintf(buf, size, "none");
        else
                snprintf(buf, size, "%" PRIi32 " µs", v);
}

/* ---- status ---- */

static int read_sysfs_line(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(buf, (int) size, f)) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return 0;
}

static void print_cstates(int32_t effective) {
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s/devices/system/cpu/cpu0/cpuidle", arg_sysfs_root);
        DIR *d = opendir(dir);
        if (!d)
                return; /* no cpuidle here (VMs often have none): nothing to show */

        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, "state", 5) == 0)
                        n++;
        closedir(d);

        char bound[32];
        format_usec(effective, bound, sizeof(bound));
        printf("C-states of cpu0 (bound %s):\n", bound);
        for (unsigned k = 0; k < n; k++) {
                char path[1200], name[64] = "?", latency[32] = "", disable[8] = "0";
                snprintf(path, sizeof(path), "%s/state%u/name", dir, k);
                if (read_sysfs_line(path, name, sizeof(name)) < 0)
                        continue;
                snprintf(path, sizeof(path), "%s/state%u/latency", dir, k);
                read_sysfs_line(path, latency, sizeof(latency));
                snprintf(path, sizeof(path), "%s/state%u/disable", dir, k);
                read_sysfs_line(path, disable, sizeof(disable));
                long exit_latency = strtol(latency, NULL, 10);
                /* cpuidle picks no state whose exit latency exceeds the bound. */
                const char *verdict = strcmp(disable, "0") != 0                      ? "disabled"
                                      : (effective < 0 || exit_latency <= effective) ? "allowed"
                                                                                     : "blocked";
                printf("  state%-2u %-10s %6ld µs  %s\n", k, name, exit_latency, verdict);
        }
}

static int verb_status(int argc, char *argv[]) {
        static const struct option options[] = { { "help", no_argument, NULL, 'h' }, {} };
        int c;
        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (c != 'h')
                        return bad_option("status", argc, argv);
                {
                        printf("Usage: pmqosctl status\n"
                               "Show the effective, kernel and minimum latency, the number of requests,\n"
                               "and which C-states of cpu0 the effective bound still allows.\n");
                        return 0;
                }
        }
        if (optind < argc)
                return usage_error("status", "unexpected argument \"%s\"", argv[optind]);

        pmqos_client *client;
        int32_t effective, kernel, minimum;
        uint32_t count;
        int r = connect_broker(&client);
        if (r)
                return r;
        if ((r = pmqos_get_latency(client, &effective)) < 0 || (r = pmqos_get_kernel_latency(client, &kernel)) < 0 ||
            (r = pmqos_get_minimum_latency(client, &minimum)) < 0 ||
            (r = pmqos_get_request_count(client, &count)) < 0) {
                r = broker_error(client, "cannot read the broker's state", r);
                pmqos_client_free(client);
                return r;
        }
        char e[32], k[32], m[32];
        format_usec(effective, e, sizeof(e));
        format_usec(kernel, k, sizeof(k));
        format_usec(minimum, m, sizeof(m));
        printf("Effective latency: %s\n", e);
        printf("Kernel latency:    %s\n", k);
        printf("Minimum latency:   %s\n", m);
        printf("Requests:          %" PRIu32 "\n", count);
        print_cstates(effective);
        pmqos_client_free(client);
        return 0;
}

/* ---- list ---- */

/* Valid UTF-8 JSON whatever the broker sent: every control character (C0,
 * DEL, C1) as \\uXXXX, a byte of no valid sequence as U+FFFD. */
static void json_string(const char *s) {
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
        printf("%-*s ", w_cookie, "COOKIE");
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
                print_padded(value, w_value);
                printf(" %-*" PRIu32 " %-*" PRIu32 " %-10s %-*s ", w_uid, q->uid, w_pid, q->pid, life, w_cpus, cpus);
                print_padded(reason ?: "?", w_reason);
                printf(" %s\n", exec ?: "?");
                free(reason);
                free(exec);
        }
}

static int verb_list(int argc, char *argv[]) {
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
                        const pmqos_request_info *q = &infos[i];
                        printf("%s\n  {\"cookie\": %" PRIu32 ", \"type\": \"cpu_dma\", \"value\": %" PRIi32
                               ", \"uid\": %" PRIu32 ", \"pid\": %" PRIu32 ", \"exec\": ",
                               i ? "," : "", q->cookie, q->value, q->uid, q->pid);
                        json_string(q->exec);
                        printf(", \"reason\": ");
                        json_string(q->reason);
                        printf(", \"created\": %" PRIi64 ", \"persistent\": %s, \"expires\": %" PRIi64 ", \"cpus\": [",
                               q->created_usec, q->persistent ? "true" : "false", q->expires_usec);
                        for (size_t k = 0; k < q->n_cpus; k++)
                                printf("%s%" PRIu32, k ? ", " : "", q->cpus[k]);
                        printf("], \"sender\": ");
                        json_string(q->sender);
                        printf("}");
                }
                printf("%s]\n", n ? "\n" : "");
        } else {
                print_table(infos, n);
        }
        pmqos_request_info_free(infos, n);
        pmqos_client_free(client);
        return 0;
}

/* ---- hold ---- */

static int hold_loop(pmqos_client *client, pid_t child) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0) {
                fprintf(stderr, "pmqosctl: cannot watch signals: %s\n", strerror(errno));
                return EXIT_REFUSED;
        }

        for (;;) {
                /* Keeps our request alive across a broker restart. */
                int r = pmqos_client_process(client);
                if (r < 0) {
                        fprintf(stderr, "pmqosctl: lost the system bus: %s\n", strerror(-r));
                        close(sfd);
                        if (child > 0)
                                kill(child, SIGTERM);
                        return EXIT_REFUSED;
                }
                struct pollfd p[2] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = pmqos_client_get_fd(client), .events = (short) pmqos_client_get_events(client) },
                };
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        close(sfd);
                        return EXIT_REFUSED;
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) != sizeof(si))
                        continue;
                if (si.ssi_signo == SIGCHLD && child > 0) {
                        int status;
                        if (waitpid(child, &status, WNOHANG) != child)
                                continue;
                        close(sfd);
                        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                }
                if (si.ssi_signo == SIGCHLD)
                        continue;
                if (child <= 0) {
                        close(sfd);
                        return 0; /* interrupted: release and succeed */
                }
                /* The terminal already sent SIGINT to the whole group; pass on the others. */
                if (si.ssi_signo != SIGINT)
                        kill(child, (int) si.ssi_signo);
        }
}

static void block_hold_signals(sigset_t *old) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, old);
}

/* Runs command with the signal mask pmqosctl had; returns its pid, or -1 (said why). */
static pid_t start_command(char **command, const sigset_t *old) {
        pid_t child = fork();
        if (child < 0) {
                fprintf(stderr, "pmqosctl: cannot start %s: %s\n", command[0], strerror(errno));
                return -1;
        }
        if (child == 0) {
                sigprocmask(SIG_SETMASK, old, NULL);
                execvp(command[0], command);
                fprintf(stderr, "pmqosctl: cannot run %s: %s\n", command[0], strerror(errno));
                _exit(127);
        }
        return child;
}

static int verb_hold(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "reason", required_argument, NULL, 'r' },
                { "cpus", required_argument, NULL, 'c' },
                {},
        };
        const char *reason = NULL;
        uint32_t *cpus = NULL;
        size_t n_cpus = 0;
        int32_t usec;
        int c;

        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "hr:c:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl hold USEC [--reason TEXT] [--cpus LIST] [-- COMMAND [ARG…]]\n"
                               "Hold a latency bound while COMMAND runs (exit status is COMMAND's),\n"
                               "or until interrupted when no COMMAND is given. LIST is like 0-3,8.\n");
                        free(cpus);
                        return 0;
                case 'r':
                        reason = optarg;
                        break;
                case 'c':
                        free(cpus);
                        if (cpu_list_parse(optarg, &cpus, &n_cpus) < 0)
                                return usage_error("hold", "invalid CPU list \"%s\"", optarg);
                        break;
                default:
                        free(cpus);
                        return bad_option("hold", argc, argv);
                }
        if (optind >= argc) {
                free(cpus);
                return usage_error("hold", "missing USEC");
        }
        if (parse_usec(argv[optind], &usec) < 0) {
                free(cpus);
                return usage_error("hold", "invalid latency \"%s\"; give microseconds, 0 … 2000000000", argv[optind]);
        }
        char **command = argv + optind + 1;
        if (*command && strcmp(*command, "--") == 0)
                command++;

        /* Block before the child exists so that no SIGCHLD is lost. */
        sigset_t old;
        block_hold_signals(&old);

        pmqos_client *client;
        uint32_t cookie;
        int r = connect_broker(&client);
        if (r) {
                free(cpus);
                return r;
        }
        r = pmqos_request_full(client, usec, reason, 0, cpus, n_cpus, 0, &cookie);
        free(cpus);
        if (r < 0) {
                r = broker_error(client, "cannot hold the latency bound", r);
                pmqos_client_free(client);
                return r;
        }

        pid_t child = 0;
        if (*command) {
                child = start_command(command, &old);
                if (child < 0) {
                        pmqos_client_free(client);
                        return EXIT_REFUSED;
                }
        } else
                fprintf(stderr, "Holding %" PRIi32 " µs (cookie %" PRIu32 "); interrupt to release.\n", usec, cookie);

        r = hold_loop(client, child);
        pmqos_client_free(client); /* the bound ends here */
        return r;
}

/* ---- request, cancel, set-minimum ---- */

static int verb_request(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "timeout", required_argument, NULL, 't' },
                { "reason", required_argument, NULL, 'r' },
                { "persistent", no_argument, NULL, 'p' },
                {},
        };
        const char *reason = NULL;
        uint32_t timeout = 0;
        bool persistent = false;
        int32_t usec;
        int c;

        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "ht:r:p", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl request USEC --timeout SECONDS [--reason TEXT] [--persistent]\n"
                               "Make a request that outlives this command, and print its cookie.\n"
                               "It ends at its timeout; --persistent also keeps it across restarts.\n");
                        return 0;
                case 't':
                        if (parse_u32(optarg, 1, UINT32_MAX, &timeout) < 0)
                                return usage_error("request", "invalid timeout \"%s\"; give whole seconds", optarg);
                        break;
                case 'r':
                        reason = optarg;
                        break;
                case 'p':
                        persistent = true;
                        break;
                default:
                        return bad_option("request", argc, argv);
                }
        if (optind + 1 != argc)
                return usage_error("request", "give exactly one USEC");
        if (parse_usec(argv[optind], &usec) < 0)
                return usage_error("request", "invalid latency \"%s\"; give microseconds, 0 … 2000000000",
                                   argv[optind]);
        if (timeout == 0 && !persistent)
                return usage_error("request", "--timeout is needed: a plain request would end with this command");

        pmqos_client *client;
        uint32_t cookie;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = pmqos_request_full(client, usec, reason, timeout, NULL, 0, persistent ? PMQOS_REQUEST_PERSISTENT : 0,
                               &cookie);
        if (r < 0)
                r = broker_error(client, "request refused", r);
        else
                printf("%" PRIu32 "\n", cookie);
        pmqos_client_free(client);
        return r < 0 ? EXIT_REFUSED : r;
}

/* Commands that are one library call: connect, call, say why if refused. */
typedef int (*OneCall)(pmqos_client *c, int64_t arg);

static int call_cancel(pmqos_client *c, int64_t cookie) {
        return pmqos_cancel(c, (uint32_t) cookie);
}

static int call_set_minimum(pmqos_client *c, int64_t usec) {
        return pmqos_set_minimum_latency(c, (int32_t) usec);
}

static int run_one_call(const char *what, OneCall call, int64_t arg) {
        pmqos_client *client;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = call(client, arg);
        if (r < 0)
                r = broker_error(client, what, r);
        pmqos_client_free(client);
        return r;
}

static int verb_cancel(int argc, char *argv[]) {
        uint32_t cookie;
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl cancel COOKIE\nEnd a latency request.\n");
                return 0;
        }
        if (argc != 2)
                return usage_error("cancel", "give exactly one COOKIE");
        if (parse_u32(argv[1], 1, UINT32_MAX, &cookie) < 0)
                return usage_error("cancel", "invalid cookie \"%s\"", argv[1]);

        return run_one_call("cannot cancel", call_cancel, cookie);
}

static int verb_set_minimum(int argc, char *argv[]) {
        int32_t usec;
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl set-minimum USEC|none\n"
                       "Set the administrator floor: no bound goes below it. \"none\" removes it.\n");
                return 0;
        }
        if (argc != 2)
                return usage_error("set-minimum", "give exactly one USEC or \"none\"");
        if (strcmp(argv[1], "none") == 0)
                usec = PMQOS_LATENCY_NONE;
        else if (parse_usec(argv[1], &usec) < 0)
                return usage_error("set-minimum", "invalid latency \"%s\"; give microseconds or \"none\"", argv[1]);

        return run_one_call("cannot set the minimum latency", call_set_minimum, usec);
}

/* ---- monitor ---- */

static void on_event(pmqos_client *c, pmqos_event event, int32_t usec, void *userdata) {
        char v[32];
        (void) c, (void) userdata;
        switch (event) {
        case PMQOS_EVENT_LATENCY_CHANGED:
                format_usec(usec, v, sizeof(v));
                printf("latency %s\n", v);
                break;
        case PMQOS_EVENT_REQUESTS_CHANGED:
                printf("requests changed\n");
                break;
        case PMQOS_EVENT_BROKER_LOST:
                printf("broker stopped\n");
                break;
        case PMQOS_EVENT_BROKER_RESTARTED:
                printf("broker started\n");
                break;
        }
        fflush(stdout);
}

static int verb_monitor(int argc, char *argv[]) {
        if (argc == 2 && strcmp(argv[1], "--help") == 0) {
                printf("Usage: pmqosctl monitor\n"
                       "Print each change of the effective latency and of the request set, until interrupted.\n");
                return 0;
        }
        if (argc != 1)
                return usage_error("monitor", "unexpected argument \"%s\"", argv[1]);

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);

        pmqos_client *client;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = pmqos_client_set_event_callback(client, on_event, NULL);
        int32_t now;
        if (r >= 0)
                r = pmqos_get_latency(client, &now); /* a round trip: the subscription is in place */
        if (r < 0) {
                r = broker_error(client, "cannot monitor", r);
                pmqos_client_free(client);
                return r;
        }
        fprintf(stderr, "Monitoring %s; interrupt to stop.\n", PMQOS_BUS_NAME);

        for (;;) {
                if (pmqos_client_process(client) < 0) {
                        fprintf(stderr, "pmqosctl: lost the system bus\n");
                        close(sfd);
                        pmqos_client_free(client);
                        return EXIT_REFUSED;
                }
                struct pollfd p[2] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = pmqos_client_get_fd(client), .events = (short) pmqos_client_get_events(client) },
                };
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents & POLLIN)
                        break;
        }
        close(sfd);
        pmqos_client_free(client);
        return 0;
}

/* ---- main ---- */

static void help(void) {
        printf("Usage: pmqosctl [--no-ask-password] [--sysfs-root DIR] COMMAND [ARGS…]\n"
               "Ask pmqosd for CPU latency bounds and see who holds them.\n\n"
               "Commands:\n"
               "  status                       effective, kernel and minimum latency; C-states allowed\n"
               "  list [--json]                all requests\n"
               "  hold USEC [--reason TEXT] [--cpus LIST] [-- COMMAND…]\n"
               "                               hold a bound while COMMAND runs, or until interrupted\n"
               "  request USEC --timeout SECONDS [--reason TEXT] [--persistent]\n"
               "                               a request that outlives this command; prints its cookie\n"
               "  cancel COOKIE                end a request\n"
               "  set-minimum USEC|none        set or clear the administrator floor\n"
               "  monitor                      print changes as they happen\n\n"
               "Exit status: 0 success, 1 refused or failed, 2 usage error.\n"
               "Each command takes --help.\n");
}

int main(int argc, char *argv[]) {
        static const struct {
                const char *name;
                int (*run)(int argc, char *argv[]);
        } verbs[] = {
                { "status", verb_status },   { "list", verb_list },     { "hold", verb_hold },
                { "request", verb_request }, { "cancel", verb_cancel }, { "set-minimum", verb_set_minimum },
                { "monitor", verb_monitor },
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "no-ask-password", no_argument, NULL, 'n' },
                { "sysfs-root", required_argument, NULL, 's' },
                {},
        };
        const char *env_root = getenv("PMQOS_SYSFS_ROOT");
        int c;

        if (env_root && *env_root)
                arg_sysfs_root = env_root;
        opterr = 0; /* we say it ourselves, in one line */
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'V':
                        printf("pmqosctl %s\n", PMQOS_VERSION);
                        return 0;
                case 'n':
                        arg_ask_password = false;
                        break;
                case 's':
                        arg_sysfs_root = optarg;
                        break;
                default:
                        fprintf(stderr, "pmqosctl: unknown option \"%s\" (see pmqosctl --help)\n", argv[optind - 1]);
                        return EXIT_USAGE;
                }
        if (optind >= argc) {
                fprintf(stderr, "pmqosctl: missing command (see pmqosctl --help)\n");
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                if (strcmp(argv[optind], verbs[i].name) == 0)
                        return verbs[i].run(argc - optind, argv + optind);
        fprintf(stderr, "pmqosctl: unknown command \"%s\" (see pmqosctl --help)\n", argv[optind]);
        return EXIT_USAGE;
}
