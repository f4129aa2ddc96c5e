/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /etc/pmqos/pmqosd.conf: "Key=Value" lines, "#" comments, an optional
 * [pmqosd] section header. Pure parsing here; reading the file is main.c's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dbus/contract.h"

#define PMQOS_DEFAULT_CONFIG "/etc/pmqos/pmqosd.conf"
#define CONFIG_FILE_MAX (64u * 1024u)

/* Every bound on what callers may make pmqosd hold or do; documented in
 * pmqosd.conf(5). Root is exempt from the request counts and from the
 * pending counts once its identity is known. */
typedef struct Limits {
        unsigned max_per_connection;           /* MaxRequestsPerConnection: live requests */
        unsigned max_per_uid;                  /* MaxRequestsPerUser */
        uint32_t max_timeout_sec;              /* MaxTimeoutSec: the longest "timeout" */
        uint32_t max_unprivileged_timeout_sec; /* MaxUnprivilegedTimeoutSec: longer needs request-latency-persistent */
        unsigned max_pending_per_connection;   /* MaxPendingPerConnection: calls waiting for credentials or polkit */
        unsigned max_pending_per_uid;          /* MaxPendingPerUser */
        unsigned max_pending;                  /* MaxPending: all callers together */
        unsigned max_polkit_in_flight;         /* MaxPolkitChecksInFlight: checks polkitd has at once */
        unsigned max_clients;                  /* MaxClients: connections tracked at once */
        unsigned max_held; /* MaxHeldRequests: requests held by a descriptor, process or cgroup (one fd each) */
        unsigned max_calls_per_sec_per_uid;       /* MaxCallsPerSecondPerUser (bus/budget.h) */
        unsigned max_unread_bytes_per_connection; /* MaxUnreadBytesPerConnection: sent, not shown read */
        unsigned max_unread_bytes_per_uid;        /* MaxUnreadBytesPerUser */
} Limits;

#define LIMITS_DEFAULT_CALLS_PER_SEC_PER_UID 500u
#define LIMITS_DEFAULT_UNREAD_BYTES_PER_CONNECTION (1024u * 1024u)
#define LIMITS_DEFAULT_UNREAD_BYTES_PER_UID (2u * 1024u * 1024u)

#define LIMITS_DEFAULT                                                                            \
        ((Limits){ .max_per_connection = PMQOS_DEFAULT_MAX_PER_CONNECTION,                        \
                   .max_per_uid = PMQOS_DEFAULT_MAX_PER_UID,                                      \
                   .max_timeout_sec = PMQOS_DEFAULT_MAX_TIMEOUT_SEC,                              \
                   .max_unprivileged_timeout_sec = PMQOS_DEFAULT_MAX_UNPRIVILEGED_TIMEOUT_SEC,    \
                   .max_pending_per_connection = PMQOS_DEFAULT_MAX_PENDING_PER_CONNECTION,        \
                   .max_pending_per_uid = PMQOS_DEFAULT_MAX_PENDING_PER_UID,                      \
                   .max_pending = PMQOS_DEFAULT_MAX_PENDING,                                      \
                   .max_polkit_in_flight = PMQOS_DEFAULT_MAX_POLKIT_IN_FLIGHT,                    \
                   .max_clients = PMQOS_DEFAULT_MAX_CLIENTS,                                      \
                   .max_held = PMQOS_DEFAULT_MAX_HELD,                                            \
                   .max_calls_per_sec_per_uid = LIMITS_DEFAULT_CALLS_PER_SEC_PER_UID,             \
                   .max_unread_bytes_per_connection = LIMITS_DEFAULT_UNREAD_BYTES_PER_CONNECTION, \
                   .max_unread_bytes_per_uid = LIMITS_DEFAULT_UNREAD_BYTES_PER_UID })

/* dbus-daemon lets one connection wait for 128 replies at most, pmqosd's
 * own connection to polkitd included: stay well below. */
#define POLKIT_IN_FLIGHT_CEILING 100u

/* A latency written as a C-state name ("C1E"), kept as written with its
 * line: what it stands for is the machine's, which conf/ does not read. */
typedef struct ConfigCState {
        char *name; /* NULL: the value is a number (or none) */
        unsigned line;
} ConfigCState;

/* ForeignWrites=: what pmqosd does when another process writes a per-CPU
 * idle knob (sys/foreign-writes.h). */
typedef enum ForeignPolicy {
        FOREIGN_REPORT,  /* name it, change nothing (the default) */
        FOREIGN_RESTORE, /* write pmqosd's value back, once per write, unless the writer fights back */
        FOREIGN_ADOPT,   /* a resume latency value becomes a request of the writer, bound to its process */
} ForeignPolicy;

const char *foreign_policy_to_string(ForeignPolicy p);

typedef struct Config {
        Limits limits;
        int32_t default_floor; /* -1: none */
        int32_t battery_floor; /* OnBatteryMinimumLatency: in force while UPower says OnBattery; -1: none */
        /* Set instead of the floor above when the last line of the file that
         * set it gave a C-state name: the loader resolves it (options.c). */
        ConfigCState default_floor_cstate, battery_floor_cstate;
        char *state_dir; /* NULL: not set in the file */
        ForeignPolicy foreign_writes;
        /* The lines of the last file read that set MaxTimeoutSec and
         * MaxUnprivilegedTimeoutSec (0: it did not), for the loader to name
         * where one is above the other. */
        unsigned max_timeout_line, max_unprivileged_timeout_line;
} Config;

/* Which keys the file set (so that command-line options can win over them). */
enum {
        CONFIG_SET_MAX_PER_CONNECTION = 1 << 0,
        CONFIG_SET_MAX_PER_UID = 1 << 1,
        CONFIG_SET_MAX_TIMEOUT = 1 << 2,
        CONFIG_SET_DEFAULT_FLOOR = 1 << 3,
        CONFIG_SET_STATE_DIR = 1 << 4,
        CONFIG_SET_MAX_UNPRIVILEGED_TIMEOUT = 1 << 5,
        CONFIG_SET_MAX_PENDING_PER_CONNECTION = 1 << 6,
        CONFIG_SET_MAX_PENDING_PER_UID = 1 << 7,
        CONFIG_SET_MAX_PENDING = 1 << 8,
        CONFIG_SET_MAX_POLKIT_IN_FLIGHT = 1 << 9,
        CONFIG_SET_MAX_CLIENTS = 1 << 10,
        CONFIG_SET_BATTERY_FLOOR = 1 << 11,
        CONFIG_SET_MAX_HELD = 1 << 12,
        CONFIG_SET_MAX_CALLS_PER_SEC = 1 << 13,
        CONFIG_SET_MAX_UNREAD_PER_CONNECTION = 1 << 14,
        CONFIG_SET_MAX_UNREAD_PER_UID = 1 << 15,
        CONFIG_SET_FOREIGN_WRITES = 1 << 16,
};

void config_done(Config *c);

/* Parses text into *ret, starting from the values already in *ret (its
 * C-state names are the file's own: those of a file read before are
 * dropped). Returns 0, or -EINVAL with "PATH:LINE: Key: problem" in err and
 * *ret untouched. */
int config_parse(const char *path, const char *text, size_t len, Config *ret, unsigned *ret_set, char *err,
                 size_t err_size);
