/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosctl metrics: what pmqosd holds and what its bounds cost, in the
 * Prometheus text exposition format (what node_exporter's textfile
 * collector reads), from Explain(), Ledger() and RequestCount through
 * libpmqos. Label cardinality is bounded by the machine and by pmqosd: one
 * series per online CPU, one per holder row (pmqosd keeps at most 64;
 * beyond HOLDER_SERIES_MAX here the rest add up in one series of kind
 * "other"). */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pmqosctl-cli.h"

#define HOLDER_SERIES_MAX 64u

/* A label value: \, " and newline escaped, other control characters as '?'. */
static void label(FILE *f, const char *s) {
        for (; *s; s++)
                if (*s == '\\' || *s == '"')
                        fprintf(f, "\\%c", *s);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc((unsigned char) *s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static void seconds(FILE *f, uint64_t usec) {
        fprintf(f, "%" PRIu64 ".%06" PRIu64 "\n", usec / 1000000u, usec % 1000000u);
}

static void family(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_cpus(FILE *f, const pmqos_explanation *e) {
        family(f, "pmqos_cpu_shallow_idle_seconds_total", "counter",
               "Idle time this CPU spent while a latency bound kept it out of a C-state, since pmqosd started.");
        for (size_t i = 0; i < e->n_cpu_costs; i++) {
                fprintf(f, "pmqos_cpu_shallow_idle_seconds_total{cpu=\"%" PRIu32 "\"} ", e->cpu_costs[i].cpu);
                seconds(f, e->cpu_costs[i].shallow_idle_usec);
        }
        family(f, "pmqos_cpu_blocked_entries_total", "counter",
               "Entries into C-states the bound in force blocked (0 when the kernel obeys), since pmqosd started.");
        for (size_t i = 0; i < e->n_cpu_costs; i++)
                fprintf(f, "pmqos_cpu_blocked_entries_total{cpu=\"%" PRIu32 "\"} %" PRIu64 "\n", e->cpu_costs[i].cpu,
                        e->cpu_costs[i].blocked_entries);
        family(f, "pmqos_cpu_bound_verified", "gauge",
               "1 when a bound blocks a C-state on this CPU and none was entered since it took effect.");
        for (size_t i = 0; i < e->n_cpu_costs; i++)
                fprintf(f, "pmqos_cpu_bound_verified{cpu=\"%" PRIu32 "\"} %d\n", e->cpu_costs[i].cpu,
                        e->cpu_costs[i].verified ? 1 : 0);
}

static void holder_series(FILE *f, const char *name, const pmqos_ledger_row *row, const char *kind) {
        fprintf(f, "%s{kind=\"", name);
        label(f, kind);
        fprintf(f, "\",uid=\"%" PRIu32 "\",comm=\"", row->uid);
        label(f, row->comm);
        fputs("\",unit=\"", f);
        label(f, row->unit);
        fputs("\"} ", f);
}

/* The rows past HOLDER_SERIES_MAX - 1 summed into one of kind "other". */
static void write_holders(FILE *f, const pmqos_ledger_row *rows, size_t n) {
        size_t shown = n <= HOLDER_SERIES_MAX ? n : HOLDER_SERIES_MAX - 1;
        pmqos_ledger_row rest = { .uid = UINT32_MAX, .comm = (char *) "", .unit = (char *) "" };
        for (size_t i = shown; i < n; i++) {
                rest.held_usec += rows[i].held_usec;
                rest.shallow_idle_usec += rows[i].shallow_idle_usec;
                rest.blocked_entries += rows[i].blocked_entries;
        }
        static const char *const names[] = { "pmqos_holder_shallow_idle_seconds_total",
                                             "pmqos_holder_held_seconds_total", "pmqos_holder_blocked_entries_total" };
        static const char *const helps[] = {
                "Idle time the CPUs this holder bound spent kept out of C-states, summed over CPUs.",
                "Wall time this holder's bound kept a C-state blocked, summed over CPUs.",
                "Entries into C-states this holder's bound blocked (0 when the kernel obeys).",
        };
        for (unsigned m = 0; m < 3; m++) {
                family(f, names[m], "counter", helps[m]);
                for (size_t i = 0; i < shown + (n > shown); i++) {
                        const pmqos_ledger_row *row = i < shown ? &rows[i] : &rest;
                        holder_series(f, names[m], row, i < shown ? row->kind : "other");
                        if (m == 0)
                                seconds(f, row->shallow_idle_usec);
                        else if (m == 1)
                                seconds(f, row->held_usec);
                        else
                                fprintf(f, "%" PRIu64 "\n", row->blocked_entries);
                }
        }
}

static int write_metrics(pmqos_client *c, FILE *f) {
        pmqos_explanation *e = NULL;
        pmqos_ledger_row *rows = NULL;
        size_t n_rows = 0;
        uint32_t n_requests;
        int r = pmqos_get_request_count(c, &n_requests);
        if (r >= 0)
                r = pmqos_explain(c, &e);
        if (r >= 0)
                r = pmqos_ledger(c, &rows, &n_rows);
        if (r < 0) {
                pmqos_explanation_free(e);
                return broker_error(c, "metrics", r);
        }
        family(f, "pmqos_requests", "gauge", "Live latency requests pmqosd holds.");
        fprintf(f, "pmqos_requests %" PRIu32 "\n", n_requests);
        if (e->kernel >= 0) {
                family(f, "pmqos_kernel_latency_seconds", "gauge",
                       "The CPU latency bound the kernel applies for all holders of /dev/cpu_dma_latency (2000 s: "
                       "none).");
                fputs("pmqos_kernel_latency_seconds ", f);
                seconds(f, (uint64_t) e->kernel);
        }
        if (e->effective >= 0) {
                family(f, "pmqos_effective_latency_seconds", "gauge", "The bound pmqosd asks the kernel for.");
                fputs("pmqos_effective_latency_seconds ", f);
                seconds(f, (uint64_t) e->effective);
        }
        write_cpus(f, e);
        write_holders(f, rows, n_rows);
        pmqos_ledger_free(rows, n_rows);
        pmqos_explanation_free(e);
        return 0;
}

/* Where PATH's temporary file goes: ".NAME.XXXXXX" in PATH's own
 * directory (the text up to its last '/', kept as written; the current
 * directory only when PATH has no '/'), so that rename() replaces PATH.
 * NULL when out of memory. PATH itself is not changed. */
static char *temporary_beside(const char *path) {
        const char *slash = strrchr(path, '/');
        size_t dir_len = slash ? (size_t) (slash - path) + 1 : 0;
        char *tmp = NULL;
        if (asprintf(&tmp, "%.*s.%s.XXXXXX", (int) dir_len, path, path + dir_len) < 0)
                return NULL;
        return tmp;
}

/* A --textfile PATH names a file: not empty, not ending in '/', "." or "..". */
static bool names_a_file(const char *path) {
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        return *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* PATH written whole or not at all: a temporary file beside it, renamed. */
static int write_textfile(pmqos_client *c, const char *path) {
        char *tmp = temporary_beside(path);
        if (!tmp) {
                fprintf(stderr, "pmqosctl metrics: out of memory\n");
                return EXIT_REFUSED;
        }
        int fd = mkostemp(tmp, O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
                fprintf(stderr, "pmqosctl metrics: cannot write beside %s: %s\n", path, strerror(errno));
                if (fd >= 0) {
                        close(fd);
                        unlink(tmp);
                }
                free(tmp);
                return EXIT_REFUSED;
        }
        int r = write_metrics(c, f), err = 0;
        if (r == 0 && (fchmod(fd, 0644) < 0 || fflush(f) != 0 || ferror(f) || fsync(fd) < 0))
                err = errno ?: EIO;
        if (fclose(f) != 0 && r == 0 && err == 0)
                err = errno;
        if (r == 0 && err == 0 && rename(tmp, path) < 0)
                err = errno;
        if (r != 0 || err != 0) {
                if (err != 0)
                        fprintf(stderr, "pmqosctl metrics: cannot write %s: %s\n", path, strerror(err));
                unlink(tmp);
        }
        free(tmp);
        return r ? r : err ? EXIT_REFUSED : 0;
}

int verb_metrics(int argc, char *argv[]) {
        static const struct option options[] = { { "help", no_argument, NULL, 'h' },
                                                 { "textfile", required_argument, NULL, 't' },
                                                 {} };
        const char *textfile = NULL;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "ht:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("Usage: pmqosctl metrics [--textfile PATH]\n"
                               "Print what pmqosd holds and what its bounds cost (per CPU and per holder)\n"
                               "in the Prometheus text format.\n"
                               "  --textfile PATH  write PATH instead, atomically and mode 0644 (for\n"
                               "                   node_exporter's --collector.textfile.directory)\n");
                        return 0;
                case 't':
                        if (!names_a_file(optarg))
                                return usage_error("metrics", "--textfile needs the path of a file, not \"%s\"",
                                                   optarg);
                        textfile = optarg;
                        break;
                default:
                        return bad_option("metrics", argc, argv);
                }
        if (optind < argc)
                return usage_error("metrics", "unexpected argument \"%s\"", argv[optind]);

        pmqos_client *client;
        int r = connect_broker(&client);
        if (r)
                return r;
        r = textfile ? write_textfile(client, textfile) : write_metrics(client, stdout);
        pmqos_client_free(client);
        return r; /* standard output is flushed and checked by main() */
}
