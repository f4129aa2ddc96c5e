/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The contract once: names, paths, interfaces, error names, bounds and
 * default limits, for the daemon, libpmqos, pmqosctl, the bench and the
 * stress test. pmqos.h stays self-contained; libpmqos.c checks that its
 * public constants equal these. */
#pragma once

#define PMQOS_BUS_NAME "org.freedesktop.PMQoS"
#define PMQOS_UPOWER_BUS_NAME "org.freedesktop.UPower" /* pmqosd --upower-name */
#define PMQOS_OBJECT_PATH "/org/freedesktop/PMQoS"
#define PMQOS_UPOWER_POLICY_PATH "/org/freedesktop/UPower/Policy"
#define PMQOS_QOS_INTERFACE "org.freedesktop.UPower.QoS"
#define PMQOS_NATIVE_INTERFACE "org.freedesktop.PMQoS"

#define PMQOS_ERROR_NO_SUCH_REQUEST "org.freedesktop.PMQoS.Error.NoSuchRequest"
#define PMQOS_ERROR_FAILED "org.freedesktop.PMQoS.Error.Failed"

#define PMQOS_CONTRACT_LATENCY_MAX 2000000000 /* µs; also the kernel's "no constraint" */
#define PMQOS_CONTRACT_LATENCY_NONE (-1)      /* listed, never constrains */
#define PMQOS_REASON_MAX 256u                 /* bytes of UTF-8 in a "reason" */
#define PMQOS_CPUS_MAX 1024u                  /* entries in one "cpus" option */
#define PMQOS_EXEC_MAX 1024u                  /* bytes of a listed command line, after cleaning */

/* Default limits (pmqosd.conf(5)). */
#define PMQOS_DEFAULT_MAX_PER_CONNECTION 64u
#define PMQOS_DEFAULT_MAX_PER_UID 256u
#define PMQOS_DEFAULT_MAX_TIMEOUT_SEC 86400u
#define PMQOS_DEFAULT_MAX_UNPRIVILEGED_TIMEOUT_SEC 300u
#define PMQOS_DEFAULT_MAX_PENDING_PER_CONNECTION 16u
#define PMQOS_DEFAULT_MAX_PENDING_PER_UID 32u
#define PMQOS_DEFAULT_MAX_PENDING 1024u
#define PMQOS_DEFAULT_MAX_POLKIT_IN_FLIGHT 32u
#define PMQOS_DEFAULT_MAX_CLIENTS 4096u
/* Requests held by a descriptor, a process or a cgroup: pmqosd keeps one
 * descriptor open for each (two while a cgroup's is watched); the unit's
 * LimitNOFILE= makes room for them and for the calls that may wait
 * (daemon/service.c), its FileDescriptorStoreMax= (12290) the two devices
 * and one per held request, so they survive a restart. */
#define PMQOS_DEFAULT_MAX_HELD 12288u
/* And at most: under systemd every held descriptor comes back at a restart
 * named in the one LISTEN_FDNAMES= string, which execve() refuses past
 * 128 KiB; 12288 names of 10 bytes (record/fd-name.h) and the devices' fit. */
#define PMQOS_MAX_MAX_HELD 12288u
