/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos-bench: measures pmqosd against the bus's own floor, in one run, on a
 * private bus it starts, with pmqosd on the real device (or the one given by
 * --device), and prints one row per figure with its target and PASS/FAIL. Absolute times drift on shared
 * machines; every target is a ratio to a baseline measured in the same run.
 *
 *   pmqos-bench [--pmqosd PATH] [--device PATH] [--quick] [--json] [--pairs-only]
 *
 * --quick shrinks every figure (for meson test) and checks that each row
 * is produced, and that the rows whose target is an exact count (kernel
 * writes per change, wake-ups when idle) meet it, as do the counts a row
 * checks besides a time (every held request back after a restart, every
 * release seen): those are behaviour, not speed. --pairs-only stops after the floor, request+cancel and
 * reference rows: the quick loop when working on the request path.
 * Needs root: requests from other users need polkit.
 *
 * The figures are in bench-latency.c, bench-crowds.c, bench-restart.c,
 * bench-held.c and bench-fdstore.c;
 * the world they run in in bench-world.c and bench-reference.c. */

#include "bench.h"

/* Interrupted (meson's timeout, ^C): take pmqosd, the reference and the
 * private bus along, and the directories and the stand-in device, by rm
 * (fork and exec are safe in a signal handler; system() is not). */
static void on_interrupt(int sig) {
        kill_children();
        char *argv[] = { "rm", "-rf", "--", NULL, NULL, NULL, NULL };
        int n = 3;
        char *paths[] = { tmpdir, runtime_dir, standin_path };
        for (size_t i = 0; i < 3; i++)
                if (paths[i][0] && !strstr(paths[i], "XXXXXX"))
                        argv[n++] = paths[i];
        pid_t pid = n > 3 ? fork() : -1;
        if (pid == 0) {
                execv("/bin/rm", argv);
                _exit(127);
        }
        if (pid > 0)
                (void) waitpid(pid, NULL, 0);
        _exit(128 + sig);
}

/* ---- main ---- */

/* Pads by display width: "µ" and "×" are two bytes but one column. */
static void print_padded(const char *s, int width) {
        int cols = 0;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if ((*p & 0xC0) != 0x80)
                        cols++;
        printf("%s%*s", s, cols < width ? width - cols : 1, "");
}

static void print_rows(const Config *c) {
        if (c->json) {
                printf("{\"quick\": %s, \"bus\": \"%s\", \"rows\": [\n", c->quick ? "true" : "false", bus_name);
                for (int i = 0; i < n_rows; i++)
                        printf("  {\"figure\": \"%s\", \"value\": \"%s\", \"number\": %.3f, \"target\": \"%s\", "
                               "\"pass\": %s}%s\n",
                               rows[i].figure, rows[i].value, rows[i].number, rows[i].target,
                               !rows[i].has_target ? "null"
                               : rows[i].pass      ? "true"
                                                   : "false",
                               i + 1 < n_rows ? "," : "");
                printf("]}\n");
                return;
        }
        printf("bus: %s\n", bus_name);
        print_padded("FIGURE", 16);
        print_padded("VALUE", 90);
        print_padded("TARGET", 34);
        printf("RESULT\n");
        for (int i = 0; i < n_rows; i++) {
                print_padded(rows[i].figure, 16);
                print_padded(rows[i].value, 90);
                print_padded(rows[i].target, 34);
                printf("%s\n", !rows[i].has_target ? "-" : rows[i].pass ? "PASS" : "FAIL");
        }
}

/* The command line into c; -1 to go on, else the exit status. */
static int parse_options(int argc, char *argv[], Config *c) {
        static const struct option options[] = {
                { "pmqosd", required_argument, NULL, 'p' },
                { "device", required_argument, NULL, 'd' },
                { "quick", no_argument, NULL, 'q' },
                { "json", no_argument, NULL, 'j' },
                { "pairs-only", no_argument, NULL, 'P' },
                { "bus", required_argument, NULL, 'b' },
                { "only", required_argument, NULL, 'o' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int opt;
        while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (opt) {
                case 'p':
                        c->pmqosd = optarg;
                        break;
                case 'd':
                        c->device = optarg;
                        break;
                case 'q':
                        c->quick = true;
                        break;
                case 'j':
                        c->json = true;
                        break;
                case 'P':
                        c->pairs_only = true;
                        break;
                case 'o':
                        c->only = optarg;
                        break;
                case 'b':
                        if (strcmp(optarg, "dbus-daemon") != 0 && strcmp(optarg, "dbus-broker") != 0) {
                                fprintf(stderr, "pmqos-bench: --bus takes dbus-daemon or dbus-broker, not \"%s\"\n",
                                        optarg);
                                return 2;
                        }
                        bus_name = optarg;
                        break;
                case 'h':
                        printf("Usage: pmqos-bench [--pmqosd PATH] [--device PATH] [--bus dbus-daemon|dbus-broker] "
                               "[--quick] [--json] [--pairs-only]\n"
                               "                   [--only scaling,throughput,vanish,idle,writes,crowds,flood,"
                               "record,restart,held]\n");
                        return 0;
                default:
                        return 2;
                }
        return -1;
}

/* How much of each figure: --quick shrinks every one. */
static void set_sizes(Config *c) {
        if (c->quick) {
                c->pings = 200, c->pairs = 200, c->held_conns = 10, c->held_per_conn = 100, c->throughput_secs = 1;
                c->vanish_rounds = 3, c->vanish_requests = 100, c->idle_secs = 1, c->memory_requests = 1000;
                c->write_ops = 1000;
        } else {
                c->pings = 5000, c->pairs = 3000, c->held_conns = 100, c->held_per_conn = 100, c->throughput_secs = 5;
                c->vanish_rounds = 20, c->vanish_requests = 1000, c->idle_secs = 10, c->memory_requests = 10000;
                c->write_ops = 10000;
        }
}

/* The groups after the first three rows (--only picks some). */
static void measure_groups(const Config *c, sd_bus *bus, double floor_us, double pair_us, long rss_start) {
        if (wanted(c, "scaling"))
                measure_scaling(c, bus, floor_us, pair_us, rss_start);
        if (wanted(c, "throughput"))
                measure_throughput(c);
        if (wanted(c, "vanish"))
                vanish_row(c);
        if (wanted(c, "idle"))
                measure_idle(c);
        if (wanted(c, "writes"))
                writes_row(c, bus);
        if (wanted(c, "crowds"))
                measure_crowds(c);
        if (wanted(c, "flood"))
                measure_flood(c, bus);
        open_notify();
        if (wanted(c, "record"))
                measure_record(c);
        if (wanted(c, "restart"))
                measure_restart(c);
        if (wanted(c, "held"))
                measure_held(c);
}

int main(int argc, char *argv[]) {
        Config c = { .pmqosd = "pmqosd", .device = NULL };
        const char *standin = NULL;
        int status = parse_options(argc, argv, &c);
        if (status >= 0)
                return status;
        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: pmqos-bench needs root (requests from other users need polkit).\n");
                return 77;
        }
        if (!c.device)
                c.device = (standin = make_standin_device()) ? standin : "/dev/cpu_dma_latency";
        set_sizes(&c);
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, on_interrupt);
        signal(SIGTERM, on_interrupt);

        kernel_baseline = kernel_read(c.device);
        start_bus();
        start_daemon(&c);
        start_reference(&c);
        sd_bus *bus = connect_bus();
        long rss_start = status_field(daemon_pid, NULL, "VmRSS");

        /* floor and request+cancel, measured together */
        double floor_us, pair_us, ref_us;
        measure_pairs(&c, bus, &floor_us, &pair_us, &ref_us);
        Row *r = add_row("floor");
        snprintf(r->value, sizeof(r->value), "Ping p50 %.1f µs", floor_us);
        snprintf(r->target, sizeof(r->target), "(baseline)");
        r->number = floor_us;

        /* Judged against what the bus itself costs for the contract's reply and
         * five signals (the reference peer), not against bare Pings. */
        r = add_row("reference");
        snprintf(r->value, sizeof(r->value), "reply+5 signals p50 %.1f µs = %.2f × 2×floor", ref_us,
                 ref_us / (2 * floor_us));
        snprintf(r->target, sizeof(r->target), "(what the spec's signals cost)");
        r->number = ref_us / (2 * floor_us);
        r = add_row("request+cancel");
        snprintf(r->value, sizeof(r->value),
                 "pair p50 %.1f µs = %.2f × reference (%.2f × 2×floor); %.2f × the reference doing the kernel write "
                 "and record (%.1f µs); CPU %.1f µs a pair, reference %.1f, working reference %.1f",
                 pair_us, pair_us / ref_us, pair_us / (2 * floor_us), pair_us / reference_work_us, reference_work_us,
                 pair_cpu_us, reference_cpu_us, reference_work_cpu_us);
        snprintf(r->target, sizeof(r->target), "≤ 1.10 × reference");
        r->number = pair_us / ref_us;
        r->has_target = true;
        r->pass = r->number <= 1.10;
        if (!c.pairs_only)
                measure_groups(&c, bus, floor_us, pair_us, rss_start);

        sd_bus_flush_close_unref(bus);
        stop_all();
        print_rows(&c);
        if (standin)
                unlink(standin);

        for (int i = 0; i < n_rows; i++)
                if (rows[i].miscount || (rows[i].has_target && !rows[i].pass && (!c.quick || rows[i].exact)))
                        return 1;
        if (c.quick)
                return c.only || n_rows == (c.pairs_only ? 3 : 21) ? 0 : 1; /* smoke: every row produced */
        return 0;
}
