/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos-oci-hook: an OCI runtime hook. At createRuntime it asks pmqosd for
 * the latency bound the container's annotations name, bound to the
 * container's cgroup or init (RequestFor), so the bound ends when the
 * container dies; at poststop it cancels that request if it is still there.
 * Each decision goes to the journal (runtimes discard a hook's stderr);
 * refusals to stderr too. See pmqos-oci-hook(8). */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "oci-broker.h"
#include "oci-conf.h"
#include "oci-state.h"
#include "oci-target.h"
#include "pmqos.h"
#include "util/cpuidle.h"
#include "util/file-io.h"

#define HOOK_TIMEOUT_SEC 5 /* the whole hook, bus included: never a hang */

static volatile sig_atomic_t fail_status; /* what a failure exits with: 1 when required */
static const char *container_id;          /* for the journal's CONTAINER_ID= */

/* One line to the journal (SYSLOG_IDENTIFIER=pmqos-oci-hook, CONTAINER_ID=);
 * a warning to stderr too, where it is read when no journal listens
 * (sd_journal_send() is silent then), or when sending failed. */
static void say(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int priority, const char *fmt, ...) {
        char msg[OCI_ERR_MAX + 400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        int r = sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", priority, "SYSLOG_IDENTIFIER=pmqos-oci-hook",
                                "CONTAINER_ID=%s", container_id ? container_id : "", NULL);
        if (priority <= LOG_WARNING || r < 0)
                fprintf(stderr, "pmqos-oci-hook: %s\n", msg);
}

static void on_alarm(int sig) {
        (void) sig;
        static const char msg[] = "pmqos-oci-hook: no answer from pmqosd within 5 s; giving up\n";
        ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void) ignored;
        _exit(fail_status);
}

static int complain(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int complain(const char *id, const char *fmt, ...) {
        char msg[OCI_ERR_MAX + 200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        say(fail_status ? LOG_ERR : LOG_WARNING, "container %s: %s%s", id ? id : "?", msg,
            fail_status ? " (failing its start: " OCI_ANN_REQUIRED "=true)" : " (starting it without the bound)");
        return fail_status;
}

static char *read_all(int fd, size_t *ret_len) {
        size_t len = 0, cap = 65536;
        char *buf = malloc(cap);
        while (buf) {
                if (len == cap) {
                        char *bigger = cap > OCI_JSON_MAX ? NULL : realloc(buf, cap * 2);
                        if (!bigger)
                                break;
                        buf = bigger;
                        cap *= 2;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        free(buf);
                        return NULL;
                }
                if (n == 0) {
                        *ret_len = len;
                        return buf;
                }
                len += (size_t) n;
        }
        free(buf);
        errno = EFBIG;
        return NULL;
}

static int load_config(OciState *s, char **ret_cpus, char *err, size_t size) {
        if (!s->bundle || !s->bundle[0])
                return snprintf(err, size, "the OCI state names no bundle"), -EINVAL;
        int dir = open(s->bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = dir < 0 ? -1 : openat(dir, "config.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        int e = errno;
        if (dir >= 0)
                close(dir);
        if (fd < 0)
                return snprintf(err, size, "no config.json in the bundle %s: %s",
                                oci_shown(s->bundle, (char[201]){ 0 }, 201), strerror(e)),
                       -e;
        size_t len;
        char *text = read_all(fd, &len);
        e = errno;
        close(fd);
        if (!text)
                return snprintf(err, size, "cannot read the bundle's config.json: %s", strerror(e)), -e;
        int r = oci_config_parse(text, len, s, ret_cpus, err, size);
        free(text);
        return r;
}

/* MachineWide= from the administrator's file: deny when it is absent, and
 * (after saying why) when it cannot be read or is not understood. */
static bool machine_wide_allowed(const char **ret_path) {
        const char *path = getenv(OCI_CONF_ENV);
        if (!path || !path[0])
                path = OCI_CONF_PATH;
        *ret_path = path;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 && errno == ENOENT)
                return false;
        char err[OCI_ERR_MAX];
        size_t len = 0;
        char *text = fd < 0 ? NULL : read_all(fd, &len);
        int e = errno;
        if (fd >= 0)
                close(fd);
        OciConf conf = { .machine_wide = false };
        if (!text)
                say(LOG_WARNING, "cannot read %s: %s (MachineWide=deny)", path, strerror(e));
        else if (oci_conf_parse(path, text, len, &conf, err, sizeof(err)) < 0)
                say(LOG_WARNING, "%s (MachineWide=deny)", err);
        free(text);
        return conf.machine_wide;
}

/* A C-state name as the latency this machine gives it: the largest exit
 * latency of an online CPU's state of that name (util/cpuidle.c, the rule
 * pmqosd and pmqosctl follow). 0, or -1 after saying why. */
static int cstate_usec(const char *id, const char *name, int32_t *ret) {
        char names[1024];
        uint32_t v;
        int r = cpuidle_latency_of("/sys", name, PMQOS_LATENCY_MAX, &v, names, sizeof(names));
        if (r == 0) {
                *ret = (int32_t) v;
                return 0;
        }
        if (r == -ENOENT)
                say(LOG_WARNING, "container %s: " OCI_ANN_LATENCY ": unknown C-state \"%s\"; this machine has: %s", id,
                    name, names);
        else if (r == -ENODEV)
                say(LOG_WARNING,
                    "container %s: " OCI_ANN_LATENCY ": \"%s\" is neither microseconds nor a C-state: this machine "
                    "shows no C-states (no cpuidle under /sys/devices/system/cpu)",
                    id, name);
        else
                say(LOG_WARNING, "container %s: " OCI_ANN_LATENCY ": cannot read the C-states: %s", id, strerror(-r));
        return -1;
}

/* The machine's online CPUs ("0-3"), or NULL when they cannot be read. */
static char *online_cpus(char *buf, size_t size) {
        if (read_small_at(AT_FDCWD, "/sys/devices/system/cpu/online", buf, size) <= 0)
                return NULL;
        buf[strcspn(buf, "\n")] = 0;
        return buf;
}

/* The plan, within the container's CPUs, with its value; 1 to go on, or
 * 0 and *status after saying why. */
static int decide(OciState *s, OciPlan *plan, char **config_cpus, int *status) {
        char err[OCI_ERR_MAX];
        int r = load_config(s, config_cpus, err, sizeof(err));
        if (*config_cpus && !(*config_cpus)[strspn(*config_cpus, " \n")]) {
                free(*config_cpus); /* blank: no cpuset */
                *config_cpus = NULL;
        }
        if (r >= 0)
                r = oci_plan_make(s, plan, err, sizeof(err));
        else
                *plan = (OciPlan){ .required = s->required && strcmp(s->required, "false") != 0 };
        fail_status = plan->required ? 1 : 0;
        if (r < 0)
                return *status = complain(s->id, "%s", err), 0;
        if (plan->sandbox) {
                say(LOG_INFO, "%s: a sandbox (pause) container, never given a request", plan->reason);
                return 0;
        }
        if (!plan->act)
                return 0;
        const char *conf;
        bool machine_wide = machine_wide_allowed(&conf);
        char online[4096];
        if (oci_plan_confine(plan, *config_cpus, online_cpus(online, sizeof(online)), machine_wide, conf, err,
                             sizeof(err)) < 0)
                return *status = complain(s->id, "%s", err), 0;
        if (plan->cstate && cstate_usec(s->id, plan->cstate, &plan->usec) < 0)
                return *status = fail_status, 0;
        return 1;
}

static void say_granted(const OciPlan *plan, uint32_t cookie, bool cgroup) {
        char cpus[200] = "the whole machine";
        size_t len = 0;
        for (size_t i = 0; i < plan->n_cpus && len + 12 < sizeof(cpus); i++)
                len += (size_t) snprintf(cpus + len, sizeof(cpus) - len, "%s%u", i ? "," : "CPUs ", plan->cpus[i]);
        say(LOG_INFO, "%s: %d µs on %s, request %u bound to its %s", plan->reason, plan->usec, cpus, cookie,
            cgroup ? "cgroup" : "init process");
}

/* The bound, its CPUs and its target; 0 or an exit status after saying why. */
static int create(OciState *s) {
        char err[OCI_ERR_MAX], *config_cpus = NULL;
        OciPlan plan = { 0 };
        int pidfd = -1, cgroup = -1, status = 0;
        uint32_t cookie;

        if (!decide(s, &plan, &config_cpus, &status))
                goto out;
        int r = oci_target_open(s->pid, &pidfd, &cgroup, err, sizeof(err));
        if (r < 0 || (plan.want_container && oci_container_cpus(config_cpus, cgroup, s->pid, &plan.cpus, &plan.n_cpus,
                                                                err, sizeof(err)) < 0)) {
                status = complain(s->id, "%s", err);
                goto out;
        }
        r = oci_request_for(cgroup >= 0 ? cgroup : pidfd, &plan, &cookie, err, sizeof(err));
        if (r < 0)
                status = complain(s->id, "pmqosd did not grant %d µs: %s", plan.usec, err);
        else
                say_granted(&plan, cookie, cgroup >= 0);
out:
        if (pidfd >= 0)
                close(pidfd);
        if (cgroup >= 0)
                close(cgroup);
        oci_plan_done(&plan);
        free(config_cpus);
        return status;
}

int main(int argc, char *argv[]) {
        signal(SIGALRM, on_alarm);
        alarm(HOOK_TIMEOUT_SEC);

        char err[OCI_ERR_MAX];
        size_t len;
        char *text = read_all(STDIN_FILENO, &len);
        if (!text)
                return say(LOG_WARNING, "cannot read the OCI state: %s", strerror(errno)), 0;
        OciState s;
        int r = oci_state_parse(text, len, &s, err, sizeof(err));
        free(text);
        if (r < 0) {
                say(LOG_WARNING, "%s: the container runtime gives it on standard input (pmqos-oci-hook(8))", err);
                return 0;
        }
        container_id = s.id;

        const char *stage = argc > 1 ? argv[1] : (s.status && strcmp(s.status, "stopped") == 0) ? "poststop" : "";
        int status = 0;
        if (strcmp(stage, "poststop") == 0) {
                if (oci_cancel_container(s.id, err, sizeof(err)) < 0)
                        say(LOG_WARNING, "container %s: cannot cancel its bound: %s", s.id, err);
        } else
                status = create(&s);
        oci_state_done(&s);
        return status;
}
