/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* From annotations to one request: its value, its CPUs, its reason. The
 * reason starts with "container ID", which is how poststop finds it again. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbus/contract.h"
#include "oci-state.h"
#include "util/cpu-list.h"
#include "util/parse-value.h"

/* Microseconds as decimal digits only (the shared grammar's integers: no
 * unit, sign or base), 0 … the contract's maximum. */
static int plan_usec(const char *s, int32_t *ret) {
        uint64_t v;
        int r = parse_decimal(s, PMQOS_CONTRACT_LATENCY_MAX, &v);
        if (r < 0)
                return r;
        *ret = (int32_t) v;
        return 0;
}

static bool cstate_name(const char *s) {
        size_t n = strlen(s);
        return n > 0 && n < 32 && !(s[0] >= '0' && s[0] <= '9') &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

const char *oci_shown(const char *s, char *buf, size_t size) {
        size_t n = 0;
        for (; s && *s && n + 1 < size; s++)
                buf[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
        buf[n] = 0;
        return buf;
}

/* Printable ASCII for the listing, anything else as '?'. */
static void append_clean(char *buf, size_t size, const char *prefix, const char *s) {
        size_t len = strlen(buf);
        if (len + strlen(prefix) >= size)
                return;
        strcpy(buf + len, prefix);
        len += strlen(prefix);
        for (; *s && len + 1 < size; s++)
                buf[len++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
        buf[len] = 0;
}

/* The pod by CRI-O's keys, else by containerd's. */
static void make_reason(const OciState *s, char *buf, size_t size) {
        const char *ns = s->pod_namespace ? s->pod_namespace : s->cri_namespace;
        const char *pod = s->pod_name ? s->pod_name : s->cri_pod;
        const char *name = s->container_name ? s->container_name : s->cri_container;
        snprintf(buf, size, "container %s", s->id);
        if (ns || pod) {
                append_clean(buf, size, " pod ", ns ? ns : "?");
                append_clean(buf, size, "/", pod ? pod : "?");
        }
        if (name)
                append_clean(buf, size, " name ", name);
}

static int plan_crio(const char *v, OciPlan *plan, char *err, size_t size) {
        if (strcmp(v, "enable") == 0)
                return 0; /* CRI-O: every C-state allowed, nothing to hold */
        if (strcmp(v, "disable") == 0)
                plan->usec = 0;
        else if (strncmp(v, "max_latency:", 12) != 0 || plan_usec(v + 12, &plan->usec) < 0)
                return oci_error(err, size, -EINVAL,
                                 OCI_ANN_CRIO "=\"%s\": expected enable, disable or max_latency:USEC",
                                 oci_shown(v, (char[41]){ 0 }, 41));
        plan->act = true;
        plan->want_container = true;
        return 0;
}

static int plan_cpus(const char *v, OciPlan *plan, char *err, size_t size) {
        if (!v)
                return 0;
        if (strcmp(v, "container") == 0) {
                plan->want_container = true;
                return 0;
        }
        if (cpu_list_parse(v, &plan->cpus, &plan->n_cpus) < 0)
                return oci_error(err, size, -EINVAL,
                                 OCI_ANN_CPUS "=\"%s\": expected \"container\" or a CPU list like 0-3,8",
                                 oci_shown(v, (char[41]){ 0 }, 41));
        return 0;
}

int oci_plan_make(const OciState *s, OciPlan *plan, char *err, size_t size) {
        *plan = (OciPlan){ 0 };
        make_reason(s, plan->reason, sizeof(plan->reason));
        /* Pod annotations reach the pause container too: it never gets a
         * request, and no value of them fails it. */
        if ((s->cri_type && strcmp(s->cri_type, "sandbox") == 0) ||
            (s->crio_type && strcmp(s->crio_type, "sandbox") == 0)) {
                plan->sandbox = true;
                return 0;
        }
        if (s->required && strcmp(s->required, "true") == 0)
                plan->required = true;
        else if (s->required && strcmp(s->required, "false") != 0) {
                plan->required = true; /* a typo must not quietly start a container without its bound */
                return oci_error(err, size, -EINVAL, OCI_ANN_REQUIRED "=\"%s\": expected true or false",
                                 oci_shown(s->required, (char[41]){ 0 }, 41));
        }

        if (!s->latency) {
                if (s->crio)
                        return plan_crio(s->crio, plan, err, size);
                if (s->cpus)
                        return oci_error(err, size, -EINVAL, OCI_ANN_CPUS " is given without " OCI_ANN_LATENCY);
                return 0;
        }
        int r = plan_usec(s->latency, &plan->usec);
        if (r == -ERANGE)
                return oci_error(err, size, -EINVAL, OCI_ANN_LATENCY "=\"%s\": at most %d µs",
                                 oci_shown(s->latency, (char[41]){ 0 }, 41), PMQOS_CONTRACT_LATENCY_MAX);
        if (r < 0) {
                if (!cstate_name(s->latency))
                        return oci_error(err, size, -EINVAL,
                                         OCI_ANN_LATENCY "=\"%s\": expected microseconds or a C-state name",
                                         oci_shown(s->latency, (char[41]){ 0 }, 41));
                plan->cstate = s->latency;
        }
        plan->act = true;
        return plan_cpus(s->cpus, plan, err, size);
}

void oci_plan_done(OciPlan *plan) {
        free(plan->cpus);
        plan->cpus = NULL;
        plan->n_cpus = 0;
}

static bool within(uint32_t cpu, const uint32_t *set, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (set[i] == cpu)
                        return true;
        return false;
}

/* The plan's CPUs (its list, else the cpuset) hold every online CPU: the
 * whole machine in all but name. Unknown online CPUs count as all. */
static bool every_online(const OciPlan *plan, const uint32_t *set, size_t n, const char *online) {
        uint32_t *on = NULL;
        size_t n_on = 0;
        if (!online || cpu_list_parse(online, &on, &n_on) < 0)
                return true;
        bool all = true;
        for (size_t i = 0; i < n_on && all; i++)
                all = plan->cpus ? within(on[i], plan->cpus, plan->n_cpus) : within(on[i], set, n);
        free(on);
        return all;
}

int oci_plan_confine(const OciPlan *plan, const char *config_cpus, const char *online, bool machine_wide,
                     const char *conf_path, char *err, size_t size) {
        if (!plan->act)
                return 0;
        char shown[41];
        bool cpuset = config_cpus && config_cpus[strspn(config_cpus, " \n")];
        if (!plan->cpus && !plan->want_container && !machine_wide)
                return oci_error(err, size, -EPERM,
                                 "no " OCI_ANN_CPUS
                                 ": a bound on the whole machine, which MachineWide=deny in %s refuses",
                                 oci_shown(conf_path, (char[121]){ 0 }, 121));
        if (!cpuset)
                return machine_wide ? 0
                                    : oci_error(err, size, -EPERM,
                                                "the container has no cpuset (linux.resources.cpu.cpus): its bound "
                                                "would reach every CPU, which MachineWide=deny in %s refuses",
                                                oci_shown(conf_path, (char[121]){ 0 }, 121));
        uint32_t *set = NULL;
        size_t n = 0;
        if (cpu_list_parse(config_cpus, &set, &n) < 0)
                return oci_error(err, size, -EINVAL,
                                 "the container's cpuset (linux.resources.cpu.cpus \"%s\") is not a CPU list",
                                 oci_shown(config_cpus, shown, sizeof(shown)));
        int r = 0;
        for (size_t i = 0; plan->cpus && i < plan->n_cpus && r == 0; i++)
                if (!within(plan->cpus[i], set, n))
                        r = oci_error(err, size, -EPERM,
                                      OCI_ANN_CPUS " names CPU %u, outside the container's cpuset \"%s\"",
                                      plan->cpus[i], oci_shown(config_cpus, shown, sizeof(shown)));
        if (r == 0 && !machine_wide && every_online(plan, set, n, online))
                r = oci_error(
                        err, size, -EPERM,
                        "its CPUs are every online CPU (%s): the whole machine, which MachineWide=deny in %s refuses",
                        online ? oci_shown(online, shown, sizeof(shown)) : "unknown",
                        oci_shown(conf_path, (char[121]){ 0 }, 121));
        free(set);
        return r;
}

bool oci_reason_matches(const char *reason, const char *id) {
        size_t n = strlen(id);
        return reason && strncmp(reason, "container ", 10) == 0 && strncmp(reason + 10, id, n) == 0 &&
               (reason[10 + n] == 0 || reason[10 + n] == ' ');
}
