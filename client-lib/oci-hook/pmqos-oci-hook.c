/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqos-oci-hook: an OCI runtime hook. At createRuntime it asks pmqosd for
 * the latency bound the container's annotations name, bound to the
 * container's cgroup or init (RequestFor), so the bound ends when the
 * container dies; at poststop it cancels that request if it is still there.
 * See pmqos-oci-hook(8). */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../pmqosctl-cli.h"
#include "oci-broker.h"
#include "oci-state.h"
#include "oci-target.h"

#define HOOK_TIMEOUT_SEC 5 /* the whole hook, bus included: never a hang */

bool arg_ask_password = false;
const char *arg_sysfs_root = "/sys";
static volatile sig_atomic_t fail_status; /* what a failure exits with: 1 when required */

/* pmqosctl-cstate.c's helpers, with the hook's prefix. */
int usage_error(const char *verb, const char *fmt, ...) {
        va_list ap;
        fprintf(stderr, "pmqos-oci-hook: %s: ", verb);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return EXIT_USAGE;
}

int parse_usec(const char *s, int32_t *ret) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (!s[0] || *end || errno || v < 0 || v > PMQOS_LATENCY_MAX)
                return -EINVAL;
        *ret = (int32_t) v;
        return 0;
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
        va_list ap;
        fprintf(stderr, "pmqos-oci-hook: container %s: ", id ? id : "?");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s\n", fail_status ? "" : " (starting it without the bound)");
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

/* The bound, its CPUs and its target; 0 or an exit status after saying why. */
static int create(OciState *s) {
        char err[OCI_ERR_MAX], *config_cpus = NULL;
        OciPlan plan;
        int pidfd = -1, cgroup = -1, status = 0;
        uint32_t cookie;

        int r = load_config(s, &config_cpus, err, sizeof(err));
        if (r >= 0)
                r = oci_plan_make(s, &plan, err, sizeof(err));
        else
                plan = (OciPlan){ .required = s->required && strcmp(s->required, "false") != 0 };
        fail_status = plan.required ? 1 : 0;
        if (r < 0 || !plan.act) {
                status = r < 0 ? complain(s->id, "%s", err) : 0;
                goto out;
        }
        if (plan.cstate) {
                char verb[200];
                snprintf(verb, sizeof(verb), "container %s: " OCI_ANN_LATENCY, s->id);
                const char *spelling;
                if (parse_usec_or_cstate(verb, plan.cstate, &plan.usec, &spelling) != 0) {
                        status = fail_status;
                        goto out;
                }
        }
        r = oci_target_open(s->pid, &pidfd, &cgroup, err, sizeof(err));
        if (r < 0 || (plan.want_container && oci_container_cpus(config_cpus, cgroup, s->pid, &plan.cpus, &plan.n_cpus,
                                                                err, sizeof(err)) < 0)) {
                status = complain(s->id, "%s", err);
                goto out;
        }
        r = oci_request_for(cgroup >= 0 ? cgroup : pidfd, &plan, &cookie, err, sizeof(err));
        if (r < 0)
                status = complain(s->id, "pmqosd did not grant %d µs: %s", plan.usec, err);
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
                return fprintf(stderr, "pmqos-oci-hook: cannot read the OCI state: %s\n", strerror(errno)), 0;
        OciState s;
        int r = oci_state_parse(text, len, &s, err, sizeof(err));
        free(text);
        if (r < 0)
                return fprintf(stderr, "pmqos-oci-hook: %s\n", err), 0;

        const char *stage = argc > 1 ? argv[1] : (s.status && strcmp(s.status, "stopped") == 0) ? "poststop" : "";
        int status = 0;
        if (strcmp(stage, "poststop") == 0) {
                if (oci_cancel_container(s.id, err, sizeof(err)) < 0)
                        fprintf(stderr, "pmqos-oci-hook: container %s: cannot cancel its bound: %s\n", s.id, err);
        } else
                status = create(&s);
        oci_state_done(&s);
        return status;
}
