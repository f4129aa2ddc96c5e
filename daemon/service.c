/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* pmqosd and its service manager: the devices' descriptors kept in its
 * store across a restart, whether a stop is a restart, and becoming an
 * unprivileged user once everything that needs root is open. */

#include "service.h"

#include <errno.h>
#include <sys/resource.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "record/fd-name.h"
#include "record/state-file.h"
#include "util/log.h"
#include "util/macro.h"

/* The names of the devices' descriptors in the service manager's store. */
#define DEVICE_FDNAME "cpu_dma_latency"
#define WAKEUP_FDNAME "cpu_wakeup_latency"

/* Becomes user: no root, no capabilities (not even in the bounding set), no
 * way back. The state directory is handed over first, through descriptors,
 * so persistence goes on. */
int service_drop_privileges(const struct passwd *pw, const char *state_dir, RuntimeRecord *record) {
        int r = state_hand_over(state_dir, pw->pw_uid, pw->pw_gid);
        if (r < 0) {
                log_error("Cannot hand %s to user %s: %s", state_dir, pw->pw_name,
                          r == -EMLINK ? "its state file is not a plain file with one link" : strerror(-r));
                return r;
        }
        r = runtime_record_hand_over(record, pw->pw_uid, pw->pw_gid);
        if (r < 0) {
                log_error("Cannot hand %s to user %s: %s", record->dir, pw->pw_name,
                          r == -EMLINK ? "its record is not a plain file with one link" : strerror(-r));
                return r;
        }
        /* Needs CAP_SETPCAP; where it is missing the uid change below still
         * clears every effective and permitted capability. */
        for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM && errno != EINVAL)
                        break;
        if (setgroups(0, NULL) < 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0) {
                log_error_errno(errno, "Cannot switch to user %s: %m", pw->pw_name);
                return -errno;
        }
        /* A uid change from 0 clears the effective, permitted and ambient sets,
         * not the inheritable one, which systemd 257 fills with the bounding
         * set (252 left it empty): empty it too. */
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[2] = { { 0 } };
        if (syscall(SYS_capset, &header, none) < 0)
                return log_error_errno(errno, "Cannot clear the inheritable capabilities: %m");
        /* Make sure no capability can come back. */
        (void) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (pw->pw_uid != 0 && setresuid(0, 0, 0) == 0) {
                log_error("Still able to become root after switching to %s; refusing to run.", pw->pw_name);
                return -EPERM;
        }
        log_info("Running as user %s (uid %u) with no capabilities.", pw->pw_name, (unsigned) pw->pw_uid);
        return 0;
}

/* A restart under systemd: the device's descriptor comes back from the
 * store (LISTEN_FDS, named DEVICE_FDNAME); anything else passed is closed. */
/* Whether name is a held request's: then it goes to held[*n]. */
static bool take_held(const char *name, int fd, StoredFd *held, size_t *n) {
        FdNameKind kind;
        uint32_t cookie;
        if (!held || !name || fd_name_parse(name, &kind, &cookie) < 0)
                return false;
        held[(*n)++] = (StoredFd){ .kind = kind == FD_NAME_PROCESS  ? HOLD_PROCESS
                                           : kind == FD_NAME_CGROUP ? HOLD_CGROUP
                                                                    : HOLD_FD,
                                   .cookie = cookie,
                                   .fd = fd };
        /* fd_name_parse() took it: at most FD_NAME_MAX - 1 bytes. */
        snprintf(held[*n - 1].name, sizeof(held[*n - 1].name), "%s", name);
        return true;
}

/* The held requests' descriptors taken back, until service_store_device_fds(). */
static StoredFd *stored_held;
static size_t n_stored_held;

void service_take_stored_fds(CoreConfig *core) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(true, &names);
        StoredFd *held = n > 0 ? calloc((size_t) n, sizeof(StoredFd)) : NULL;
        size_t n_held = 0;

        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (!core->have_device_fd && names && names[i] && strcmp(names[i], DEVICE_FDNAME) == 0) {
                        core->have_device_fd = true;
                        core->device_fd = fd;
                } else if (!core->have_wakeup_fd && names && names[i] && strcmp(names[i], WAKEUP_FDNAME) == 0) {
                        core->have_wakeup_fd = true;
                        core->wakeup_fd = fd;
                } else if (take_held(names ? names[i] : NULL, fd, held, &n_held)) {
                        continue;
                } else {
                        log_warning("Closing descriptor %d (\"%s\") passed by the service manager: not ours.", fd,
                                    names && names[i] ? names[i] : "");
                        close(fd);
                        if (getenv("NOTIFY_SOCKET") && names && names[i] && names[i][0] && strlen(names[i]) < 240 &&
                            !strchr(names[i], '\n')) {
                                char state[288];
                                snprintf(state, sizeof(state), "FDSTOREREMOVE=1\nFDNAME=%s", names[i]);
                                (void) sd_notify(false, state);
                        }
                }
        }
        stored_held = held;
        n_stored_held = n_held;
        if (names)
                for (char **p = names; *p; p++)
                        free(*p);
        free(names);
}

static void store_fd(int fd, const char *state, const char *device) {
        int r = sd_pid_notify_with_fds(0, false, state, &fd, 1);
        if (r <= 0)
                log_warning("Cannot hand %s to the service manager's descriptor store (%s): a restart will drop its "
                            "bound for a moment. Is FileDescriptorStoreMax= set?",
                            device, r < 0 ? strerror(-r) : "not supported");
}

/* The service manager keeps a copy of the devices' descriptors, so that the
 * kernel keeps our bounds while we restart; a stop releases them. */
void service_store_device_fds(Manager *m, const CoreConfig *core) {
        bool notify = getenv("NOTIFY_SOCKET") != NULL;

        /* Held requests' descriptors: to the store, and back from it (adopt.c). */
        m->holds.fdstore = notify;
        holds_set_stored(&m->holds, stored_held, n_stored_held);
        stored_held = NULL;
        n_stored_held = 0;

        if (core->have_device_fd && !m->core.device_adopted) {
                /* What the store held was not the device: replace it. */
                close(core->device_fd);
                if (notify)
                        (void) sd_notify(false, "FDSTOREREMOVE=1\nFDNAME=" DEVICE_FDNAME);
        }
        if (core->have_wakeup_fd && !m->core.wakeup_adopted) {
                close(core->wakeup_fd);
                if (notify)
                        (void) sd_notify(false, "FDSTOREREMOVE=1\nFDNAME=" WAKEUP_FDNAME);
        }
        if (m->core.device_adopted)
                log_info("Took %s back from the service manager; its bound held through the restart.", core->device);
        else if (notify)
                store_fd(m->core.sink.fd, "FDSTORE=1\nFDNAME=" DEVICE_FDNAME, core->device);
        if (m->core.wakeup_adopted)
                log_info("Took %s back from the service manager too.", core->wakeup_device);
        else if (notify && core_has_wakeup(&m->core))
                store_fd(m->core.wakeup.fd, "FDSTORE=1\nFDNAME=" WAKEUP_FDNAME, core->wakeup_device);
}

/* Whether the service manager stops us only to start us again (systemctl
 * restart, a package upgrade): our unit's pending job is a restart. Asked
 * with a short timeout: a stop must never wait on it. */
bool service_restart_pending(sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *job = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(freep) char *type = NULL;
        const char *unit, *job_path;
        uint32_t id;
        int r;

        if (!getenv("NOTIFY_SOCKET") || sd_bus_set_method_call_timeout(bus, 1000000) < 0)
                return false;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "GetUnitByPID", &e, &reply, "u",
                               (uint32_t) getpid());
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &unit);
        if (r >= 0)
                r = sd_bus_get_property(bus, "org.freedesktop.systemd1", unit, "org.freedesktop.systemd1.Unit", "Job",
                                        &e, &job, "(uo)");
        if (r >= 0)
                r = sd_bus_message_read(job, "(uo)", &id, &job_path);
        if (r >= 0 && strcmp(job_path, "/") == 0)
                return false; /* no job: a plain SIGTERM */
        if (r >= 0)
                r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", job_path,
                                               "org.freedesktop.systemd1.Job", "JobType", &e, &type);
        if (r < 0) {
                /* No systemd on this bus (a test's manager): a plain stop. */
                if (!sd_bus_error_has_names(&e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        log_warning("Cannot ask the service manager whether this is a restart: %s; giving per-CPU "
                                    "values back.",
                                    e.message ?: strerror(-r));
                return false;
        }
        return strstr(type, "restart") != NULL; /* restart, try-restart, reload-or-restart */
}

/* Descriptors pmqosd needs besides its held requests' and the messages it
 * keeps: the bus, the devices, per-CPU files, polkit, the explainer, a
 * burst of file reads, and the one message being read (its descriptors
 * come before anyone can look at them). */
#define FD_BASE 1024u
/* Kept messages pmqosd leaves room for at the least, whatever the limit. */
#define KEPT_MIN 64u

/* The worst case, by construction: every call that waits keeps its message
 * and every descriptor attached to it (CALLS_FDS_PER_MESSAGE, referenced or
 * not: sd-bus says of none how many a message has). Waiting are at most
 * MaxPending calls at polkit, MaxPending waiting for the bus to say who made
 * them besides a first call of each of MaxClients connections (client.c
 * follows no more), and as many again of connections that do not read
 * (budget.c: half of the room). calls.c and budget.c keep no message past
 * the room returned here (LimitsExceeded, or no answer to a non-reader), so
 * with the limit wanted the table never fills — a message whose descriptors
 * find no room is cut short, and sd-bus drops the bus for it — and every
 * connection's first call, root's too, finds room. Below it, the kept calls
 * get what the held requests leave, or, if even these do not fit, half of
 * what is left past FD_BASE. */
/* The hard limit, or the kernel's bound on it (fs.nr_open) when it has none. */
static rlim_t fd_limit_ceiling(const struct rlimit *rl) {
        if (rl->rlim_max != RLIM_INFINITY)
                return rl->rlim_max;
        rlim_t nr_open = 1024u * 1024u; /* the kernel's default */
        FILE *f = fopen("/proc/sys/fs/nr_open", "re");
        unsigned long long v;
        if (f && fscanf(f, "%llu", &v) == 1 && v > 0)
                nr_open = (rlim_t) v;
        if (f)
                fclose(f);
        return nr_open;
}

unsigned service_raise_fd_limit(const Limits *l) {
        struct rlimit rl;
        rlim_t fixed = (rlim_t) l->max_held * 2 + FD_BASE;
        rlim_t kept = (rlim_t) 2 * ((rlim_t) l->max_pending * 2 + l->max_clients);
        rlim_t want = fixed + kept * CALLS_FDS_PER_MESSAGE;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return KEPT_MIN;
        /* As systemd's daemons do: the soft limit up to the hard one (a
         * service manager's or a shell's soft 1024 is for select()). */
        rlim_t cur = rl.rlim_cur, ceiling = fd_limit_ceiling(&rl);
        if (cur < ceiling) {
                rl.rlim_cur = ceiling;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_debug_errno(-errno, "Cannot raise the descriptor limit to %llu: %m.",
                                        (unsigned long long) ceiling);
                cur = getrlimit(RLIMIT_NOFILE, &rl) < 0 ? cur : rl.rlim_cur;
        }
        if (cur >= want)
                return (unsigned) kept;
        rlim_t room = cur >= fixed    ? (cur - fixed) / CALLS_FDS_PER_MESSAGE
                      : cur > FD_BASE ? (cur - FD_BASE) / 2 / CALLS_FDS_PER_MESSAGE
                                      : 0;
        /* The floor never takes more than a quarter of the table itself: at
         * a limit of 1024 (valgrind keeps it there) 64 kept messages of 16
         * descriptors would be the whole table. */
        rlim_t least = cur / 4 / CALLS_FDS_PER_MESSAGE;
        least = least > KEPT_MIN ? KEPT_MIN : least > 0 ? least : 1;
        room = room < least ? least : room > kept ? kept : room;
        /* Short of the held requests' part even at the hard limit: one
         * warning. Short of the waiting calls' only (never under the unit,
         * whose LimitNOFILE= fits the defaults): fewer calls wait, told when
         * verbose. */
        if (cur < fixed)
                log_warning("The descriptor limit (%llu) is below what MaxHeldRequests=%u needs (%llu) "
                            "and leaves room for %llu waiting calls of %llu: raise LimitNOFILE= (to %llu) or lower "
                            "MaxHeldRequests (outside systemd: ulimit -Hn in the shell that starts pmqosd).",
                            (unsigned long long) cur, l->max_held, (unsigned long long) fixed,
                            (unsigned long long) room, (unsigned long long) kept, (unsigned long long) want);
        else
                log_debug("The descriptor limit (%llu) leaves room for %llu waiting calls of the %llu that "
                          "MaxPending=%u and MaxClients=%u may make wait (LimitNOFILE=%llu fits them).",
                          (unsigned long long) cur, (unsigned long long) room, (unsigned long long) kept,
                          l->max_pending, l->max_clients, (unsigned long long) want);
        return (unsigned) room;
}
