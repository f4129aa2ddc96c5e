/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bench's world: the private bus, pmqosd started as a service manager would, the device, and the calls every figure
 * makes. */

#include "bench.h"

Row rows[24];
int n_rows;
char tmpdir[256];
char runtime_dir[300]; /* on a tmpfs, as /run is under systemd */
char bus_address[512];
pid_t bus_group; /* dbus-broker: the launcher's process group, all of it ended at the end */
const char *bus_name = "dbus-daemon";
int32_t kernel_baseline;
pid_t bus_pid, daemon_pid, reference_pid, reference_work_pid;

/* Only kill(): also called from the signal handler. */
void kill_children(void) {
        if (reference_pid > 0)
                kill(reference_pid, SIGTERM);
        if (reference_work_pid > 0)
                kill(reference_work_pid, SIGTERM);
        if (daemon_pid > 0)
                kill(daemon_pid, SIGTERM);
        if (bus_group > 0)
                kill(-bus_group, SIGTERM);
        else if (bus_pid > 0)
                kill(bus_pid, SIGTERM);
}

void die(const char *what, int r) {
        fprintf(stderr, "pmqos-bench: %s: %s\n", what, strerror(r < 0 ? -r : r));
        kill_children();
        exit(EXIT_FAILURE);
}

uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

double p50_us(uint64_t *ns, int n) {
        qsort(ns, (size_t) n, sizeof(uint64_t), cmp_u64);
        return (double) ns[n / 2] / 1000.0;
}

/* Whether --only asks for group (every group without --only). */
bool wanted(const Config *c, const char *group) {
        if (!c->only)
                return true;
        size_t n = strlen(group);
        for (const char *p = c->only; *p;) {
                size_t k = strcspn(p, ",");
                if (k == n && strncmp(p, group, n) == 0)
                        return true;
                p += k + (p[k] == ',');
        }
        return false;
}

Row *add_row(const char *figure) {
        Row *r = &rows[n_rows++];
        *r = (Row){ .figure = figure, .pass = true };
        return r;
}

/* ---- the world: bus, daemon, device ---- */

int32_t kernel_read(const char *device) {
        int32_t v = 0;
        int fd = open(device, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("open device", errno);
        if (pread(fd, &v, sizeof(v), 0) != sizeof(v))
                die("read device", errno);
        close(fd);
        return v;
}

/* PMQOS_TEST_STANDIN=1 without --device: a file stands in for the device (as
 * in the integration tests), so that nothing touches the real one; said on a
 * SKIP: line. Returns its path, to unlink at the end, or NULL. */
char standin_path[] = "/tmp/pmqos-bench-device-XXXXXX";

const char *make_standin_device(void) {
        const char *e = getenv("PMQOS_TEST_STANDIN");
        if (!e || strcmp(e, "1") != 0)
                return NULL;
        int fd = mkstemp(standin_path);
        if (fd < 0)
                die("create the stand-in device", errno);
        int32_t none = 2000000000;
        if (write(fd, &none, sizeof(none)) != sizeof(none))
                die("write the stand-in device", errno);
        close(fd);
        fprintf(stderr,
                "SKIP: kernel read-back on /dev/cpu_dma_latency (PMQOS_TEST_STANDIN=1: using the file %s instead)\n",
                standin_path);
        return standin_path;
}

/* Next to the bench's source: how dbus-broker is started without systemd. */
static const char *broker_script = BENCH_SOURCE_DIR "/dbus-broker-run";

void start_bus(void) {
        char conf[512], sock[300], policy_dir[300];
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/pmqos-bench-XXXXXX");
        if (!mkdtemp(tmpdir))
                die("mkdtemp", errno);
        chmod(tmpdir, 0755);
        snprintf(runtime_dir, sizeof(runtime_dir), "/dev/shm/pmqos-bench-run-XXXXXX");
        if (!mkdtemp(runtime_dir))
                snprintf(runtime_dir, sizeof(runtime_dir), "%s/run", tmpdir); /* no /dev/shm: on disk, slower */
        snprintf(sock, sizeof(sock), "%s/bus", tmpdir);
        snprintf(conf, sizeof(conf), "%s/bus.conf", tmpdir);
        snprintf(policy_dir, sizeof(policy_dir), "%s/system.d", tmpdir);
        mkdir(policy_dir, 0755);
        FILE *f = fopen(conf, "we");
        if (!f)
                die("write bus config", errno);
        fprintf(f,
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN\"\n"
                " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                "<busconfig><type>system</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>\n"
                "<limit name=\"max_replies_per_connection\">50000</limit>\n"
                "<limit name=\"max_match_rules_per_connection\">50000</limit>\n"
                "<limit name=\"max_connections_per_user\">100000</limit>\n"
                "<limit name=\"max_completed_connections\">100000</limit>\n"
                "<policy context=\"default\"><allow user=\"*\"/><allow own=\"*\"/><allow send_type=\"method_call\"/>\n"
                "<allow send_type=\"signal\"/><allow send_requested_reply=\"true\" send_type=\"method_return\"/>\n"
                "<allow send_requested_reply=\"true\" send_type=\"error\"/><allow receive_type=\"method_call\"/>\n"
                "<allow receive_type=\"method_return\"/><allow receive_type=\"error\"/><allow "
                "receive_type=\"signal\"/>\n"
                "</policy></busconfig>\n",
                sock);
        fclose(f);

        char cmd[2048];
        if (strcmp(bus_name, "dbus-broker") == 0) {
                /* No systemd as PID 1 here: the helper script stands in for what it provides. */
                snprintf(cmd, sizeof(cmd), "%s %s %s 2>%s/dbus.log", broker_script, conf, sock, tmpdir);
                FILE *p = popen(cmd, "re");
                if (!p || fscanf(p, "%d %d", &bus_group, &bus_pid) != 2)
                        die("start dbus-broker (see dbus-broker-run)", EIO);
                pclose(p);
                snprintf(bus_address, sizeof(bus_address), "unix:path=%s", sock);
        } else {
                snprintf(cmd, sizeof(cmd),
                         "dbus-daemon --config-file=%s --fork --print-address=1 --print-pid=1 2>%s/dbus.log", conf,
                         tmpdir);
                FILE *p = popen(cmd, "re");
                if (!p || fscanf(p, "%511s %d", bus_address, &bus_pid) != 2)
                        die("start dbus-daemon", EIO);
                pclose(p);
        }
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
}

sd_bus *connect_bus(void) {
        sd_bus *bus;
        int r = sd_bus_open_system(&bus);
        if (r < 0)
                die("connect to the bus", r);
        return bus;
}

/* ---- pmqosd, started as a service manager would ---- */

/* The bench plays systemd's part for the restart rows: a notification
 * socket (READY=1, FDSTORE=1 with the device's descriptor) and LISTEN_FDS. */
int notify_fd = -1;
int stored_fd = -1; /* what pmqosd handed over with FDSTORE=1 */
static char notify_path[300];

void open_notify(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(notify_path, sizeof(notify_path), "%s/notify", tmpdir);
        size_t len = strlen(notify_path);
        if (len >= sizeof(sa.sun_path))
                die("notification socket path too long", ENAMETOOLONG);
        memcpy(sa.sun_path, notify_path, len + 1);
        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (notify_fd < 0 || bind(notify_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                die("bind the notification socket", errno);
        int one = 1;
        (void) setsockopt(notify_fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
}

/* The value of FDNAME= in a notification, copied into name (empty if none). */
static void fdname_of(const char *buf, char *name, size_t size) {
        const char *p = strstr(buf, "FDNAME=");
        name[0] = 0;
        if (!p || (p != buf && p[-1] != '\n'))
                return;
        p += strlen("FDNAME=");
        size_t n = strcspn(p, "\n");
        if (n < size)
                memcpy(name, p, n), name[n] = 0;
}

/* Whether name is a held request's (h, p or c and the cookie in 8 hex
 * digits), not a device's. */
static bool held_name(const char *name) {
        return strlen(name) == 9 && strchr("hpc", name[0]) && strspn(name + 1, "0123456789abcdef") == 8;
}

/* A descriptor handed over with FDSTORE=1: a held request's goes to the
 * store; the device's replaces the one kept (a new run opened it anew). */
static void keep_fd(const char *buf, const char *name, int fd) {
        if (!strstr(buf, "FDSTORE=1"))
                close(fd);
        else if (held_name(name))
                fdstore_keep(name, fd);
        else {
                if (stored_fd >= 0)
                        close(stored_fd);
                stored_fd = fd;
        }
}

/* Handles one notification if there is one; returns 1 for READY=1. */
int read_notification(void) {
        char buf[4096], name[64], control[CMSG_SPACE(sizeof(int) * 4) + CMSG_SPACE(sizeof(struct ucred))];
        struct iovec iov = { buf, sizeof(buf) - 1 };
        struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)
        };
        ssize_t n = recvmsg(notify_fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return 0;
        buf[n] = 0;
        fdname_of(buf, name, sizeof(name));
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm), sizeof(int));
                        keep_fd(buf, name, fd);
                }
        if (strstr(buf, "FDSTOREREMOVE=1") && held_name(name))
                fdstore_remove(name);
        return strstr(buf, "READY=1") != NULL;
}

pid_t spawn_daemon(const Config *c, const DaemonOptions *o) {
        char state[300], log[300], config[300];
        snprintf(state, sizeof(state), "%s/state", tmpdir);
        snprintf(log, sizeof(log), "%s/pmqosd.log", tmpdir);
        snprintf(config, sizeof(config), "%s/pmqosd.conf", tmpdir);
        pid_t pid = fork();
        if (pid < 0)
                die("fork", errno);
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                dup2(fd, 1);
                dup2(fd, 2);
                if (o->notify)
                        setenv("NOTIFY_SOCKET", notify_path, 1);
                pass_listen_fds(o);
                execl(c->pmqosd, c->pmqosd, "--device", c->device, "--config", config, "--state-dir", state,
                      "--runtime-dir", o->no_record ? "" : runtime_dir, (char *) NULL);
                _exit(127);
        }
        return pid;
}

/* Until READY=1; returns the ns it took from now. */
uint64_t wait_ready(void) {
        uint64_t t0 = now_ns();
        while (now_ns() - t0 < 30ull * 1000000000u) {
                struct pollfd p = { .fd = notify_fd, .events = POLLIN };
                if (poll(&p, 1, 100) > 0 && read_notification())
                        return now_ns() - t0;
                if (waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid)
                        die("pmqosd exited before READY=1", EIO);
        }
        die("pmqosd did not say READY=1", ETIMEDOUT);
        return 0;
}

/* Whether pmqosd has exited; its notifications are read meanwhile, as a
 * service manager reads them (a full queue blocks it in sd_notify()). */
bool daemon_exited(int timeout_ms) {
        if (waitpid(daemon_pid, NULL, WNOHANG) != 0)
                return true;
        struct pollfd p = { .fd = notify_fd, .events = POLLIN };
        if (poll(&p, 1, timeout_ms) > 0)
                (void) read_notification();
        return false;
}

void stop_daemon(void) {
        kill(daemon_pid, SIGTERM);
        while (!daemon_exited(10))
                ;
        daemon_pid = 0;
}

void wait_pingable(void) {
        sd_bus *bus = connect_bus();
        for (int i = 0; i < 1000; i++) {
                if (sd_bus_call_method(bus, BUS_NAME, PATH, "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, "") >= 0) {
                        sd_bus_flush_close_unref(bus);
                        return;
                }
                usleep(10000);
        }
        die("pmqosd did not come up", ETIMEDOUT);
}

/* pmqosd's own configuration (no system file counts), and the descriptor
 * limit its unit gives it: 10,000 held requests at once (root is not held
 * to MaxHeldRequests, but pmqosd sizes its descriptor table by it). */
void start_daemon(const Config *c) {
        char config[300];
        snprintf(config, sizeof(config), "%s/pmqosd.conf", tmpdir);
        FILE *f = fopen(config, "we");
        if (!f)
                die("write pmqosd.conf", errno);
        int written = fprintf(f, "[pmqosd]\nMaxHeldRequests=10000\n");
        if (fclose(f) != 0 || written < 0)
                die("write pmqosd.conf", EIO);
        struct rlimit rl = { BENCH_NOFILE, BENCH_NOFILE };
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) { /* no CAP_SYS_RESOURCE: up to the hard limit */
                if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                        die("read RLIMIT_NOFILE", errno);
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        die("raise RLIMIT_NOFILE", errno);
        }
        daemon_pid = spawn_daemon(c, &(DaemonOptions){ .listen_fd = -1 });
        wait_pingable();
}

void stop_all(void) {
        if (reference_pid > 0) {
                kill(reference_pid, SIGTERM);
                waitpid(reference_pid, NULL, 0);
        }
        if (reference_work_pid > 0) {
                kill(reference_work_pid, SIGTERM);
                waitpid(reference_work_pid, NULL, 0);
        }
        if (daemon_pid > 0)
                stop_daemon();
        if (bus_group > 0)
                kill(-bus_group, SIGTERM);
        else if (bus_pid > 0)
                kill(bus_pid, SIGTERM);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf %s %s", tmpdir, runtime_dir);
        if (system(cmd) != 0)
                fprintf(stderr, "pmqos-bench: could not remove %s\n", tmpdir);
}

/* utime + stime of a process, in clock ticks */
uint64_t cpu_ticks(pid_t pid) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        unsigned long utime = 0, stime = 0;
        /* fields after ")": state(3) … utime(14) stime(15) */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
                return 0;
        return utime + stime;
}

long status_field(pid_t pid, const char *task, const char *key) {
        char path[128], line[256];
        if (task)
                snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int) pid, task);
        else
                snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        FILE *f = fopen(path, "re");
        long v = -1;
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
                        v = strtol(line + strlen(key) + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}

/* Context switches of every thread of pid. */
long ctx_switches(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        DIR *d = opendir(path);
        long total = 0;
        struct dirent *de;
        if (!d)
                return -1;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        total += status_field(pid, de->d_name, "voluntary_ctxt_switches") +
                                 status_field(pid, de->d_name, "nonvoluntary_ctxt_switches");
        closedir(d);
        return total;
}

/* ---- calls ---- */

uint32_t request_at(sd_bus *bus, const char *destination, int32_t value) {
        sd_bus_message *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        uint32_t cookie = 0;
        int r = sd_bus_call_method(bus, destination, PATH, QOS, "RequestLatency", &e, &reply, "sib", "cpu_dma", value,
                                   0);
        if (r < 0) {
                fprintf(stderr, "pmqos-bench: RequestLatency: %s\n", e.message ?: strerror(-r));
                exit(EXIT_FAILURE);
        }
        sd_bus_message_read(reply, "u", &cookie);
        sd_bus_message_unref(reply);
        return cookie;
}

void cancel_at(sd_bus *bus, const char *destination, uint32_t cookie) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = sd_bus_call_method(bus, destination, PATH, QOS, "CancelRequest", &e, NULL, "u", cookie);
        if (r < 0) {
                fprintf(stderr, "pmqos-bench: CancelRequest: %s\n", e.message ?: strerror(-r));
                exit(EXIT_FAILURE);
        }
}

uint32_t request(sd_bus *bus, int32_t value) {
        return request_at(bus, BUS_NAME, value);
}

void cancel(sd_bus *bus, uint32_t cookie) {
        cancel_at(bus, BUS_NAME, cookie);
}

void update_at(sd_bus *bus, const char *destination, uint32_t cookie, int32_t value) {
        if (sd_bus_call_method(bus, destination, PATH, NATIVE, "Update", NULL, NULL, "ui", cookie, value) < 0)
                exit(EXIT_FAILURE);
}

void update(sd_bus *bus, uint32_t cookie, int32_t value) {
        update_at(bus, BUS_NAME, cookie, value);
}

void get_latency_at(sd_bus *bus, const char *destination) {
        if (sd_bus_call_method(bus, destination, PATH, QOS, "GetLatency", NULL, NULL, "s", "cpu_dma") < 0)
                exit(EXIT_FAILURE);
}

void ping(sd_bus *bus) {
        if (sd_bus_call_method(bus, BUS_NAME, PATH, "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, "") < 0)
                exit(EXIT_FAILURE);
}
