/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What pmqos-oci-hook reads: the OCI state on stdin, the bundle's
 * config.json, and what the annotations ask for. Pure parsing, no system
 * calls, so that the fuzz target runs it as the hook does. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OCI_ANN_LATENCY "org.freedesktop.pmqos.latency"
#define OCI_ANN_CPUS "org.freedesktop.pmqos.cpus"
#define OCI_ANN_REQUIRED "org.freedesktop.pmqos.required"
#define OCI_ANN_CRIO "cpu-c-states.crio.io"
#define OCI_ANN_CRI_TYPE "io.kubernetes.cri.container-type"   /* containerd's */
#define OCI_ANN_CRIO_TYPE "io.kubernetes.cri-o.ContainerType" /* CRI-O's */
#define OCI_ID_MAX 128u                                       /* bytes of a container id we accept */
#define OCI_JSON_MAX (4u << 20)                               /* bytes of a state or config.json we read */
#define OCI_ERR_MAX 320u

typedef struct OciState {
        char *id;
        int pid; /* 0 when the state has none (poststop) */
        char *bundle;
        char *status; /* "creating", "created", "running", "stopped", or NULL */
        /* annotation values, NULL when absent */
        char *latency, *cpus, *required, *crio;
        char *pod_namespace, *pod_name, *container_name; /* CRI-O's io.kubernetes.pod.namespace, … */
        char *cri_namespace, *cri_pod, *cri_container;   /* containerd's io.kubernetes.cri.sandbox-namespace, … */
        char *cri_type, *crio_type;                      /* "sandbox" for a pod's pause container */
} OciState;

/* Parses the state JSON (id required, pid and bundle optional). Returns 0, or
 * -EINVAL with a one-line reason in err. */
int oci_state_parse(const char *text, size_t len, OciState *ret, char *err, size_t err_size);
/* Annotations of config.json fill the ones the state did not carry; *ret_cpus
 * is linux.resources.cpu.cpus (NULL when absent). */
int oci_config_parse(const char *text, size_t len, OciState *s, char **ret_cpus, char *err, size_t err_size);
void oci_state_done(OciState *s);

typedef struct OciPlan {
        bool act;      /* false: the annotations ask for nothing */
        bool sandbox;  /* a pod's sandbox (pause) container: never a request */
        bool required; /* org.freedesktop.pmqos.required=true */
        int32_t usec;
        const char *cstate;  /* a C-state name to resolve (usec not set yet), or NULL */
        bool want_container; /* per-CPU on the container's CPUs */
        uint32_t *cpus;      /* the explicit list, or NULL */
        size_t n_cpus;
        char reason[257];
} OciPlan;

/* What the annotations ask for. Returns 0, or -EINVAL with err set (bad
 * value); plan->required is set before any other check, so a caller knows
 * whether a failure must fail the container. */
int oci_plan_make(const OciState *s, OciPlan *plan, char *err, size_t err_size);
void oci_plan_done(OciPlan *plan);
/* Keeps the plan within the container's own CPUs: config_cpus is its cpuset
 * (linux.resources.cpu.cpus, NULL when it has none). An explicit list must
 * lie within it; a bound that reaches every CPU (no list, no cpuset, or CPUs
 * that are all of online, the machine's online CPU list, NULL when unknown)
 * needs machine_wide (MachineWide=allow in conf_path). 0, or -EPERM (-EINVAL
 * for a cpuset that is no CPU list) with err set. */
int oci_plan_confine(const OciPlan *plan, const char *config_cpus, const char *online, bool machine_wide,
                     const char *conf_path, char *err, size_t err_size);
/* The message, formatted into err; returns errnum (a negative errno). */
int oci_error(char *err, size_t size, int errnum, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Text from outside, fit for a one-line message: printable ASCII (anything
 * else as '?'), cut to fit buf. Returns buf. */
const char *oci_shown(const char *s, char *buf, size_t size);
/* True when a listed request's reason is the one the hook made for id. */
bool oci_reason_matches(const char *reason, const char *id);
