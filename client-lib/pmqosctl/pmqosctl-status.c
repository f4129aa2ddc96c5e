/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl status: what ExplainFolded() says, for people — the bound and what
 * sets it, other holders, each group of identical CPUs with its C-states — or
 * Explain() as JSON (pmqosctl-status-json.c); --watch redraws it and adds each state's residency over
 * the interval (the CLI polls; pmqosd never does). */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/parse-value.h"
#include "pmqosctl-cli.h"

/* ---- for people ---- */

static void print_exec(const char *exec) {
        char *t = term_text(exec[0] ? exec : "?");
        printf("`%s`", t ?: "?");
        free(t);
}

/* What status shows: the explanation, the request count, and the requests
 * when a CPU has a bound of its own (to name who sets it). */
typedef struct status_view {
        pmqos_explanation *e;
        uint32_t count;
        pmqos_request_info *reqs;
        size_t n_reqs;
} status_view;

static void status_view_clear(status_view *v) {
        v->e = pmqos_explanation_free(v->e);
        pmqos_request_info_free(v->reqs, v->n_reqs);
        v->reqs = NULL;
        v->n_reqs = 0;
}

static void print_bound_by(const status_view *v) {
        const pmqos_explanation *e = v->e;
        char bound[32], kernel[32];
        format_usec(e->effective, bound, sizeof(bound));
        format_usec(e->kernel, kernel, sizeof(kernel));
        const char *by = e->bound_by;
        printf("Bound:    ");
        if (strcmp(by, "request") == 0 && e->binding) {
                printf("%s, set by ", bound);
                print_request_who(e->binding);
        } else if (strcmp(by, "floor") == 0)
                printf("%s, set by the floor (pmqosctl set-minimum)", bound);
        else if (strcmp(by, "default-floor") == 0)
                printf("%s, set by the configured default floor (DefaultMinimumLatency= in pmqosd.conf)", bound);
        else if (strcmp(by, "battery-floor") == 0)
                printf("%s, set by the battery floor (OnBatteryMinimumLatency= in pmqosd.conf): on battery", bound);
        else if (strcmp(by, "external") == 0) {
                printf("the kernel is at %s because ", kernel);
                if (e->n_holders == 0)
                        printf("another holder of the device asks for less (one pmqosd cannot see)");
                else if (e->n_holders > 1)
                        printf("other programs hold the device themselves: ");
                for (size_t i = 0; i < e->n_holders; i++) {
                        printf("%s", i ? ", " : "");
                        print_exec(e->holders[i].exec);
                        printf(" (pid %" PRIu32 ")", e->holders[i].pid);
                }
                printf("%s; pmqosd asks for %s", e->n_holders == 1 ? " holds the device itself" : "", bound);
        } else if (has_cpu_bounds(e, false))
                printf("none machine-wide");
        else
                printf("none: nothing asks for one");
        /* Per-CPU bounds stricter than the machine-wide one: "; cpu1 10 µs by request …". */
        print_cpu_bounds(e, v->reqs, v->n_reqs);
        printf("\n");
        printf("Kernel:   %s%s\n", kernel,
               e->kernel_ignores_writes ? " — the kernel ignores writes to the device: no bound has any effect" : "");
}

static void print_rules(const pmqos_explanation *e) {
        if (e->n_rules == 0)
                return;
        size_t holding = 0;
        for (size_t i = 0; i < e->n_rules; i++)
                holding += e->rules[i].holds;
        if (!e->rules_followed)
                printf("Rules:    %zu, inactive: systemd is not on the bus\n", e->n_rules);
        else
                printf("Rules:    %zu, %zu holding\n", e->n_rules, holding);
        for (size_t i = 0; i < e->n_rules; i++) {
                const pmqos_rule_info *rule = &e->rules[i];
                char v[32];
                char *file = term_text(rule->file), *unit = term_text(rule->unit), *state = term_text(rule->state);
                format_usec(rule->latency, v, sizeof(v));
                printf("  %s: %s while %s is active (%s)%s\n", file ?: "?", v, unit ?: "?",
                       state && state[0] ? state : "unknown", rule->holds ? ", holding" : "");
                free(file);
                free(unit);
                free(state);
        }
}

static void print_holders(const pmqos_explanation *e) {
        printf("Holders:  %s", e->n_holders ? "" : "none besides pmqosd");
        for (size_t i = 0; i < e->n_holders; i++) {
                printf("%spid %" PRIu32 " uid %" PRIu32 " ", i ? ", " : "", e->holders[i].pid, e->holders[i].uid);
                print_exec(e->holders[i].exec);
        }
        if (e->holders_left_out > 0)
                printf(" and %" PRIu32 " more holder%s not listed", e->holders_left_out,
                       e->holders_left_out == 1 ? "" : "s");
        /* Incomplete for a bound: the counts say it; else some processes were hidden. */
        bool explained = e->holders_left_out > 0 || e->n_holders_unscanned > 0;
        printf("%s\n", e->holders_complete || explained ? "" : " (incomplete: some processes could not be looked at)");
        if (e->n_holders_unscanned == 0)
                return;
        printf("          not looked at (the scan's bound per user): ");
        for (size_t i = 0; i < e->n_holders_unscanned; i++)
                printf("%s%" PRIu32 " process%s of uid %" PRIu32, i ? ", " : "", e->holders_unscanned[i].processes,
                       e->holders_unscanned[i].processes == 1 ? "" : "es", e->holders_unscanned[i].uid);
        printf("\n");
}

/* Two CPUs fold into one row when everything shown of them is the same. */
static bool same_row(const pmqos_cpu_info *a, const pmqos_cpu_info *b) {
        if (a->bound != b->bound || a->foreign != b->foreign || a->n_cstates != b->n_cstates ||
            strcmp(a->resume_latency, b->resume_latency) != 0)
                return false;
        for (size_t k = 0; k < a->n_cstates; k++) {
                const pmqos_cstate_info *x = &a->cstates[k], *y = &b->cstates[k];
                if (strcmp(x->name, y->name) != 0 || x->latency_usec != y->latency_usec || x->allowed != y->allowed ||
                    x->disabled != y->disabled)
                        return false;
        }
        return true;
}

static void print_cpu_set(const pmqos_explanation *e, const bool *in_row) {
        uint32_t *cpus = calloc(e->n_cpus + 1, sizeof(uint32_t));
        size_t n = 0;
        if (!cpus)
                return;
        for (size_t i = 0; i < e->n_cpus; i++)
                if (in_row[i])
                        cpus[n++] = e->cpus[i].cpu;
        print_cpu_numbers(cpus, n);
        free(cpus);
}

static const pmqos_cpu_info *find_cpu(const pmqos_explanation *e, uint32_t cpu) {
        for (size_t i = 0; e && i < e->n_cpus; i++)
                if (e->cpus[i].cpu == cpu)
                        return &e->cpus[i];
        return NULL;
}

/* The share of the interval the row's CPUs spent in state k: NAN without a
 * previous sample of the same state. */
static double residency(const pmqos_explanation *e, const pmqos_explanation *prev, const bool *in_row, size_t k,
                        double interval_usec) {
        double sum = 0;
        unsigned n = 0;
        for (size_t i = 0; i < e->n_cpus; i++) {
                if (!in_row[i])
                        continue;
                const pmqos_cpu_info *before = find_cpu(prev, e->cpus[i].cpu);
                if (!before || before->n_cstates <= k || strcmp(before->cstates[k].name, e->cpus[i].cstates[k].name))
                        return NAN;
                uint64_t now = e->cpus[i].cstates[k].time_usec, then = before->cstates[k].time_usec;
                sum += now >= then ? (double) (now - then) : 0;
                n++;
        }
        return n && interval_usec > 0 ? 100.0 * sum / (n * interval_usec) : NAN;
}

/* A row's bound and C-states, those of cpu (its first); with prev, each
 * state's share of the interval for the row's CPUs (in_row). */
static void print_row(const pmqos_cpu_info *cpu, const pmqos_explanation *e, const pmqos_explanation *prev,
                      const bool *in_row, double interval_usec) {
        char bound[32];
        format_usec(cpu->bound, bound, sizeof(bound));
        printf(": bound %s", bound);
        if (cpu->foreign) {
                char *t = term_text(cpu->resume_latency);
                printf(" (its pm_qos_resume_latency_us holds \"%s\", written by someone else)", t ?: "?");
                free(t);
        }
        printf("%s\n", cpu->n_cstates ? "" : "; no cpuidle states");
        /* The names' column as wide as the widest ("haltpoll idle"). */
        int name_w = 10;
        for (size_t k = 0; k < cpu->n_cstates; k++) {
                char *name = term_text(cpu->cstates[k].name);
                int w = text_columns(name ?: "?");
                name_w = w > name_w ? w : name_w;
                free(name);
        }
        for (size_t k = 0; k < cpu->n_cstates; k++) {
                const pmqos_cstate_info *st = &cpu->cstates[k];
                char *name = term_text(st->name);
                printf("  %s%*s %6" PRIu32 " µs  %-*s", name ?: "?", name_w - text_columns(name ?: "?"), "",
                       st->latency_usec, prev ? 8 : 0,
                       st->disabled  ? "disabled"
                       : st->allowed ? "allowed"
                                     : "blocked");
                free(name);
                if (prev) {
                        double share = residency(e, prev, in_row, k, interval_usec);
                        if (isnan(share))
                                printf("       -");
                        else
                                printf("  %5.1f %%", share);
                }
                printf("\n");
        }
}

/* ExplainFolded()'s groups: the broker folded the rows already. */
static void print_groups(const pmqos_explanation *e) {
        for (size_t i = 0; i < e->n_cpu_groups; i++) {
                const pmqos_cpu_group_info *g = &e->cpu_groups[i];
                pmqos_cpu_info first = { .cpu = g->n_cpus ? g->cpus[0] : 0,
                                         .bound = g->bound,
                                         .resume_latency = g->resume_latency,
                                         .foreign = g->foreign,
                                         .cstates = g->cstates,
                                         .n_cstates = g->n_cstates };
                printf("\n");
                print_cpu_numbers(g->cpus, g->n_cpus);
                print_row(&first, e, NULL, NULL, 0);
        }
}

static void print_cpus(const pmqos_explanation *e, const pmqos_explanation *prev, double interval_usec) {
        if (e->cpu_groups) {
                print_groups(e);
                return;
        }
        bool *done = calloc(e->n_cpus + 1, sizeof(bool)), *in_row = calloc(e->n_cpus + 1, sizeof(bool));
        if (!done || !in_row) {
                free(done);
                free(in_row);
                return;
        }
        for (size_t i = 0; i < e->n_cpus; i++) {
                if (done[i])
                        continue;
                for (size_t j = i; j < e->n_cpus; j++)
                        done[j] |= in_row[j] = !done[j] && same_row(&e->cpus[i], &e->cpus[j]);
                in_row[i] = done[i] = true;
                printf("\n");
                print_cpu_set(e, in_row);
                print_row(&e->cpus[i], e, prev, in_row, interval_usec);
                memset(in_row, 0, (e->n_cpus + 1) * sizeof(bool));
        }
        free(done);
        free(in_row);
}

static void print_status(const status_view *v, const pmqos_explanation *prev, double interval_usec) {
        const pmqos_explanation *e = v->e;
        char floor[32];
        format_usec(e->floor, floor, sizeof(floor));
        print_bound_by(v);
        printf("Floor:    %s\n", floor);
        if (e->wakeup_kernel >= 0) { /* the kernel has /dev/cpu_wakeup_latency */
                char w[32], k[32];
                format_usec(e->wakeup_effective, w, sizeof(w));
                format_usec(e->wakeup_kernel, k, sizeof(k));
                printf("Wakeup:   %s asked (cpu_wakeup), the kernel at %s\n", w, k);
        }
        printf("Requests: %" PRIu32 "\n", v->count);
        print_holders(e);
        print_rules(e);
        if (prev)
                printf("\nC-states, with each one's share of the last %.1f s:\n", interval_usec / 1e6);
        print_cpus(e, prev, interval_usec);
}

/* folded: ExplainFolded(), small on many CPUs; Explain() from a pmqosd
 * without it (UnknownMethod), and for --json and --watch (the per-CPU
 * figures: the contract's dictionary, each CPU's residency). */
static int explain(pmqos_client *client, bool folded, status_view *ret) {
        *ret = (status_view){};
        int r = folded ? pmqos_explain_folded(client, &ret->e) : -EBADR;
        if (r == -EBADR)
                r = pmqos_explain(client, &ret->e);
        if (r >= 0)
                r = pmqos_get_request_count(client, &ret->count);
        if (r >= 0 && has_cpu_bounds(ret->e, true))
                r = pmqos_list_requests(client, &ret->reqs, &ret->n_reqs);
        if (r < 0)
                status_view_clear(ret);
        return r < 0 ? broker_error(client, "cannot read the broker's explanation", r) : 0;
}

static double now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Redraws every interval until SIGINT or SIGTERM: exit status 0. */
static int watch(pmqos_client *client, double seconds) {
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        sigprocmask(SIG_BLOCK, &stop, NULL);
        bool tty = isatty(STDOUT_FILENO);
        status_view prev = {};
        double prev_at = 0;
        for (;;) {
                status_view v;
                int r = explain(client, false, &v);
                if (r) {
                        status_view_clear(&prev);
                        return r;
                }
                double at = now_usec();
                if (tty)
                        printf("\033[H\033[2J");
                else if (prev.e)
                        printf("\n");
                print_status(&v, prev.e, at - prev_at);
                fflush(stdout);
                status_view_clear(&prev);
                prev = v;
                prev_at = at;
                /* What came meanwhile (pmqosd's Peer.Ping: do we read?) is answered. */
                (void) pmqos_client_process(client);
                struct timespec ts = { .tv_sec = (time_t) seconds,
                                       .tv_nsec = (long) ((seconds - (double) (time_t) seconds) * 1e9) };
                if (sigtimedwait(&stop, NULL, &ts) >= 0)
                        break;
        }
        status_view_clear(&prev);
        return 0;
}

/* A time span (parse-value.h: "2", "0.5", "500ms", "1min"), 0.1 s … 1 h. */
static int parse_seconds(const char *s, double *ret) {
        uint64_t usec;
        if (parse_timespan(s, USEC_PER_SEC, &usec) < 0 || usec < USEC_PER_SEC / 10 || usec > 3600 * USEC_PER_SEC)
                return -EINVAL;
        *ret = (double) usec / (double) USEC_PER_SEC;
        return 0;
}

int verb_status(int argc, char *argv[]) {
        static const struct option options[] = { { "help", no_argument, NULL, 'h' },
                                                 { "json", no_argument, NULL, 'j' },
                                                 { "watch", optional_argument, NULL, 'w' },
                                                 { "check", no_argument, NULL, 'c' },
                                                 {} };
        bool json = false, watching = false, check = false;
        double seconds = 2;
        int c;
        optind = 0; /* full re-initialisation after main()'s own parsing */
        while ((c = getopt_long(argc, argv, "hjw::", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl status [--json | --watch [SECONDS] | --check]\n"
                               "Show what sets the latency bound (a request, a floor, or another program\n"
                               "holding the device), the other holders, and per CPU (identical CPUs in one\n"
                               "row) which C-states the bound allows, blocks, or are disabled.\n"
                               "  --json             print the broker's Explain() dictionary as JSON\n"
                               "  --watch [SECONDS]  redraw every SECONDS (default 2, 0.1 to 3600) with each\n"
                               "                     C-state's share of the interval; Ctrl-C ends it\n"
                               "  --check            exit 0 when the kernel applies what pmqosd asks (the device\n"
                               "                     and every per-CPU file read back), else 1 with one line\n"
                               "                     per mismatch (another holder or writer, a value not applied)\n");
                        return 0;
                case 'j':
                        json = true;
                        break;
                case 'c':
                        check = true;
                        break;
                case 'w':
                        watching = true;
                        /* "--watch 5" as well as "--watch=5": a number right after is the interval. */
                        if (!optarg && optind < argc && parse_seconds(argv[optind], &seconds) == 0)
                                optind++;
                        else if (optarg && parse_seconds(optarg, &seconds) < 0)
                                return usage_error("status", "--watch takes seconds from 0.1 to 3600, not \"%s\"",
                                                   optarg);
                        break;
                default:
                        return bad_option("status", argc, argv);
                }
        if (optind < argc)
                return usage_error("status", "unexpected argument \"%s\"", argv[optind]);
        if (json + watching + check > 1)
                return usage_error("status", "--json, --watch and --check do not go together");

        pmqos_client *client;
        int r = connect_broker(&client);
        if (r)
                return r;
        if (watching) {
                r = watch(client, seconds);
                pmqos_client_free(client);
                return r;
        }
        status_view v;
        r = explain(client, !json && !check, &v); /* --check: the per-CPU ledger, of Explain() only */
        if (r == 0) {
                if (check)
                        r = status_check(v.e);
                else if (json)
                        print_explanation_json(v.e, client);
                else {
                        print_status(&v, NULL, 0);
                        print_cost(client, v.e);
                        print_writers(client, v.e);
                }
                status_view_clear(&v);
        }
        pmqos_client_free(client);
        return r;
}
