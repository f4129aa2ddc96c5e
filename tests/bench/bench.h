/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the parts of pmqos-bench share: its configuration, its rows, the
 * world it starts (bus, pmqosd, references) and the calls it makes. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <search.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>
#include "contract.h"

#define BUS_NAME PMQOS_BUS_NAME
#define PATH PMQOS_OBJECT_PATH
#define QOS PMQOS_QOS_INTERFACE
#define NATIVE PMQOS_NATIVE_INTERFACE
#define LATENCY_NONE_KERNEL PMQOS_CONTRACT_LATENCY_MAX

typedef struct Config {
        const char *pmqosd;
        const char *device;
        bool quick, json, pairs_only;
        const char *only; /* --only: a comma-separated list of figures' groups, or NULL: all */
        /* sizes */
        int pings, pairs, held_conns, held_per_conn, throughput_secs, vanish_rounds, vanish_requests, idle_secs,
                memory_requests, write_ops;
} Config;

typedef struct Row {
        const char *figure;
        char value[256];
        char target[96];
        bool pass;
        bool has_target;
        bool exact;    /* a count, not a time: held to its target in --quick too */
        bool miscount; /* a count the row checks went wrong (a request lost, a release missed): fails --quick too */
        double number; /* for --json */
} Row;

typedef struct DaemonOptions {
        bool no_record; /* --runtime-dir "" */
        bool notify;    /* NOTIFY_SOCKET */
        int listen_fd;  /* given back as LISTEN_FDS, or -1 */
        /* Held requests' descriptors given back after it (LISTEN_FDS), and
         * their names joined with ':' (LISTEN_FDNAMES), as the store has them. */
        const int *held_fds;
        int n_held;
        const char *held_names;
} DaemonOptions;

/* What the bench raises RLIMIT_NOFILE to, for itself and pmqosd: the
 * shipped unit's LimitNOFILE= (a held request is a descriptor in pmqosd,
 * in its holder, and in the service manager's store); without
 * CAP_SYS_RESOURCE, the hard limit. The bench keeps each held request's
 * descriptor in one process only (the store's, or the holder's), so that
 * 10,000 fit under a hard limit of 20,000. */
#define BENCH_NOFILE 222208

/* The spec makes every change send five signals: LatencyChanged and
 * RequestsChanged at both object paths, and PropertiesChanged. The
 * reference peer answers RequestLatency and CancelRequest with a reply and
 * those five signals, built as cheaply as sd-bus allows, and does nothing
 * else: its pair time is the bus's price for the operation's messages, and
 * pmqosd's pair over it is the broker's own share. */
#define REFERENCE_NAME "org.freedesktop.PMQoS.BenchReference"
/* A second reference also does the work the contract asks of every change
 * before its reply — the kernel write and one appended record line — and
 * nothing of pmqosd's own bookkeeping: pmqosd's pair over its pair is what
 * the broker adds beyond that work. */
#define REFERENCE_WORK_NAME "org.freedesktop.PMQoS.BenchReferenceWork"

extern Row rows[24];
extern int n_rows;
extern char tmpdir[256];
extern char runtime_dir[300]; /* on a tmpfs, as /run is under systemd */
extern char bus_address[512];
extern pid_t bus_group; /* dbus-broker: the launcher's process group, all of it ended at the end */
extern const char *bus_name;
extern int32_t kernel_baseline;
extern pid_t bus_pid, daemon_pid, reference_pid, reference_work_pid;
extern double pair_cpu_us, reference_cpu_us, reference_work_cpu_us, reference_work_us;
extern int notify_fd;
extern int stored_fd; /* what pmqosd handed over with FDSTORE=1 */

void kill_children(void);
__attribute__((noreturn)) void die(const char *what, int r);
uint64_t now_ns(void);
double p50_us(uint64_t *ns, int n);
bool wanted(const Config *c, const char *group);
Row *add_row(const char *figure);
int32_t kernel_read(const char *device);
const char *make_standin_device(void);
extern char standin_path[]; /* its template until then */
void start_bus(void);
sd_bus *connect_bus(void);
void open_notify(void);
int read_notification(void);
pid_t spawn_daemon(const Config *c, const DaemonOptions *o);
uint64_t wait_ready(void);
bool daemon_exited(int timeout_ms);
void stop_daemon(void);
void wait_pingable(void);
void start_daemon(const Config *c);
void stop_all(void);
uint64_t cpu_ticks(pid_t pid);
long status_field(pid_t pid, const char *task, const char *key);
long ctx_switches(pid_t pid);
uint32_t request_at(sd_bus *bus, const char *destination, int32_t value);
void cancel_at(sd_bus *bus, const char *destination, uint32_t cookie);
uint32_t request(sd_bus *bus, int32_t value);
void cancel(sd_bus *bus, uint32_t cookie);
void update_at(sd_bus *bus, const char *destination, uint32_t cookie, int32_t value);
void update(sd_bus *bus, uint32_t cookie, int32_t value);
void get_latency_at(sd_bus *bus, const char *destination);
void ping(sd_bus *bus);
void start_reference(const Config *c);
void timed_pairs(sd_bus *bus, const char *destination, uint64_t *t, int n, int first);
void measure_pairs(const Config *c, sd_bus *bus, double *ret_floor_us, double *ret_pair_us, double *ret_reference_us);
void hold_many(sd_bus **conns, int n_conns, int per_conn, int32_t base);
void measure_scaling(const Config *c, sd_bus *bus, double floor_us, double pair_us, long rss_start);
void measure_throughput(const Config *c);
void vanish_row(const Config *c);
void measure_idle(const Config *c);
void measure_flood(const Config *c, sd_bus *bus);
void measure_crowds(const Config *c);
void writes_row(const Config *c, sd_bus *bus);
void drain_notifications(void);
void restart_with(const Config *c, const DaemonOptions *o);
uint32_t request_count(void);
uint64_t restart_and_watch(const Config *c, const DaemonOptions *o, int32_t bound, uint64_t *ret_ready, long *ret_off);
pid_t spawn_crowd(const char *destination, int procs, int per_proc, int per_conn, bool held);
/* The service manager's store of held requests' descriptors (bench-fdstore.c). */
void fdstore_keep(const char *name, int fd);
void fdstore_remove(const char *name);
int fdstore_count(void);
void fdstore_clear(void);
void pass_listen_fds(const DaemonOptions *o);
uint32_t hold(sd_bus *bus, int32_t value, int *ret_fd);
uint64_t wait_released(int dev, uint64_t t0);
void measure_held(const Config *c);
void measure_held_restart(const Config *c);
void measure_record(const Config *c);
void measure_restart(const Config *c);
