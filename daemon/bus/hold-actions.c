/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hold() and RequestFor(): a request whose owner is a Hold (holds.h), not
 * the caller's connection. Same steps as Request (know the caller → limits
 * → authorize → one transaction → reply → publish), plus the target's owner
 * for RequestFor(). */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus/actions.h"
#include "util/log.h"
#include "sys/target.h"
#include "util/macro.h"

static int check_held_limit(const Manager *m, sd_bus_error *error) {
        if (m->holds.n >= m->holds.max)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "pmqosd already holds %u requests bound to a descriptor, process or cgroup, "
                                         "the most it holds (MaxHeldRequests).",
                                         m->holds.n);
        return 0;
}

/* 1. the caller, 2. its limits, 3. polkit (action, or what Request needs). */
static int know_and_authorize(Manager *m, sd_bus_message *message, const NewRequest *nr, const char *action,
                              Client **ret, sd_bus_error *error) {
        int r = call_know_caller(&m->calls, message, ret, error);
        if (r <= 0)
                return r;
        /* The held limit bounds pmqosd's descriptors and what a restart can
         * take back (MaxHeldRequests): root's count too. */
        r = (*ret)->uid != 0 ? check_request_limits(m, *ret, error) : 0;
        if (r >= 0)
                r = check_held_limit(m, error);
        if (r < 0)
                return r;
        return call_authorize(&m->calls, message, *ret, action ?: request_action(m, false, nr->timeout_usec), error);
}

/* A process target's request is named after that process, not the
 * caller: its pid and command line are what ListRequests, Explain, the
 * ledger and a restart show (the caller's uid stays: it is billed and may
 * cancel). Who asked goes to the audit trail. */
static int name_after_target(Request *req, const Client *c, const Target *t, const char *exec, char **ret_asker) {
        SharedString *s = shared_string_new(exec);
        size_t n = strlen(request_exec(req)) + 32;
        *ret_asker = malloc(n);
        if (!s || !*ret_asker) {
                shared_string_unref(s);
                free(*ret_asker);
                *ret_asker = NULL;
                return -ENOMEM;
        }
        snprintf(*ret_asker, n, "pid %d (%s)", (int) c->pid, request_exec(req));
        shared_string_unref(req->exec);
        req->exec = s;
        req->pid = t->pid;
        return 0;
}

/* A process target's request is named in the ledger after that process:
 * its comm and unit, read now, kept only if its pidfd says the pid was
 * still that process's. */
static int name_after_process(Request *req, int pidfd, pid_t pid) {
        Origin *o = process_origin(pid);
        if (!o)
                return -ENOMEM;
        if (!target_alive(pidfd))
                o->comm[0] = o->unit[0] = 0;
        origin_unref(req->origin);
        req->origin = o;
        return 0;
}

/* 4. and 5.: h owns the new request; the reply carries the cookie (and peer_fd). */
static int add_held(Manager *m, sd_bus_message *message, const Client *c, const NewRequest *nr, Hold *h, char *target,
                    const Target *t, const char *exec, int peer_fd, sd_bus_error *error) {
        _cleanup_(freep) char *asker = NULL;
        ChangeSet changes;

        Request *req = new_request(m, c, nr);
        if (!req || (t && t->kind == TARGET_PROCESS && name_after_process(req, h->fd, t->pid) < 0) ||
            (exec && name_after_target(req, c, t, exec, &asker) < 0)) {
                request_free(req);
                free(target);
                hold_free(h);
                return -ENOMEM;
        }
        req->hold = h->kind;
        req->target = target;
        if (t) {
                req->target_pid = t->pid;
                req->target_key = t->kind == TARGET_PROCESS ? t->start_time : t->cgroup_id;
        }
        uint32_t cookie = req->cookie;
        int r = core_add_for(&m->core, req, &h->owner, asker, &changes);
        if (r < 0) {
                hold_free(h);
                return kernel_refused(m, r, error);
        }
        hold_store(h, cookie); /* before the reply: a crash from now on keeps it */
        r = peer_fd >= 0 ? sd_bus_reply_method_return(message, "uh", cookie, peer_fd)
                         : sd_bus_reply_method_return(message, "u", cookie);
        publish(&m->pub, &changes);
        return r;
}

int action_hold(Manager *m, sd_bus_message *message, const NewRequest *nr, sd_bus_error *error) {
        Client *c;
        Hold *h;
        int peer_fd;

        int r = know_and_authorize(m, message, nr, NULL, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        r = hold_new_fd(&m->holds, -1, &h, &peer_fd);
        if (r < 0)
                return r == -EMFILE || r == -ENFILE
                               ? sd_bus_error_set(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                                  "pmqosd cannot open another descriptor now; retry later.")
                               : r;
        r = add_held(m, message, c, nr, h, NULL, NULL, NULL, peer_fd, error);
        close(peer_fd); /* the reply has its copy */
        return r;
}

/* The command line of pid, read by pid, then checked to be that process
 * still: "" when it is gone (the pid may be another's by now). */
static char *process_exec(int pidfd, pid_t pid) {
        char *exec = process_command_line(pid);
        if (exec && !target_alive(pidfd))
                exec[0] = 0;
        return exec;
}

/* "pid N (exec)", or "pid N" without one. */
static char *process_target(pid_t pid, const char *exec) {
        size_t n = strlen(exec) + 32;
        char *s = malloc(n);
        if (s)
                snprintf(s, n, exec[0] ? "pid %d (%s)" : "pid %d", (int) pid, exec);
        return s;
}

static int refuse_target(int r, const char *why, sd_bus_error *error) {
        if (r == -EINVAL || r == -ESRCH || r == -EREMOTE)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, why);
        return sd_bus_error_setf(error, PMQOS_ERROR_FAILED, "Cannot read what the target is: %s.", strerror(-r));
}

/* The descriptor a new hold watches: a copy of the pidfd, or pmqosd's own
 * descriptor of the cgroup (taken from t). */
static int hold_target(Manager *m, Target *t, int target, Hold **ret, sd_bus_error *error) {
        /* Each failure returns its own negative value (with error set where the
         * caller should read a sentence): *ret is set exactly when r >= 0. */
        int fd = t->kind == TARGET_CGROUP ? t->fd : fcntl(target, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
                if (errno != EMFILE && errno != ENFILE)
                        return -errno;
                (void) sd_bus_error_set(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                        "pmqosd cannot open another descriptor now; retry later.");
                return -EMFILE;
        }
        if (t->kind == TARGET_CGROUP)
                t->fd = -1; /* the hold's now, or closed below */
        int r = t->kind == TARGET_PROCESS ? hold_new_process(&m->holds, fd, ret) : hold_new_cgroup(&m->holds, fd, ret);
        if (r >= 0)
                return r;
        close(fd);
        if (r == -ECHILD)
                (void) sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "The cgroup %s has no process in it: its request would end at once.", t->path);
        else if (r == -ENOENT)
                (void) sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "The cgroup %s has no cgroup.events (the root cgroup never empties).",
                                         t->path);
        return r;
}

int action_request_for(Manager *m, sd_bus_message *message, const NewRequest *nr, int target, sd_bus_error *error) {
        _cleanup_(target_done) Target t = {};
        char why[256];
        Client *c;
        Hold *h = NULL;

        /* What the target is, and whose, is read anew at each run: a pending
         * polkit check must not decide for a target that changed owner. */
        if (bus_gate_is_refused(m->gate, target))
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "pmqosd keeps as many descriptors it could not close safely as it may, for "
                                         "your user or in all (sent on file systems that may never answer); the "
                                         "target was dropped unseen. Try again later.");
        int r = target_identify(target, &t, why, sizeof(why));
        if (r < 0)
                return refuse_target(r, why, error);
        r = call_know_caller(&m->calls, message, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        const char *action = t.uid != c->uid ? ACTION_REQUEST_LATENCY_FOR_OTHERS : NULL;
        r = know_and_authorize(m, message, nr, action, &c, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        _cleanup_(freep) char *exec = t.kind == TARGET_PROCESS ? process_exec(target, t.pid) : NULL;
        if (t.kind == TARGET_PROCESS && !exec)
                return -ENOMEM;
        char *name = exec ? process_target(t.pid, exec) : strdup(t.path);
        if (!name)
                return -ENOMEM;
        r = hold_target(m, &t, target, &h, error);
        if (r < 0 || !h) { /* h is set whenever r >= 0; the check says so to the analyzer */
                free(name);
                return r < 0 ? r : -EIO;
        }
        return add_held(m, message, c, nr, h, name, &t, exec, -1, error);
}

/* The descriptor of req's target, reopened after a restart, or negative. */
static int reopen_target(const Request *req) {
        switch (req->hold) {
        case HOLD_PROCESS:
                return target_reopen_process(req->target_pid, req->target_key);
        case HOLD_CGROUP:
                return req->target ? target_reopen_cgroup(req->target, req->target_key) : -ESRCH;
        default:
                return -ENOENT; /* a descriptor's pipe: only the service manager's store could keep it */
        }
}

/* A hold on req's target reopened from the runtime record, kept in the store. */
static Hold *reopen_one(Manager *m, Request *req) {
        Hold *h = NULL;
        int fd = reopen_target(req);
        if (fd == -ENOSYS)
                log_warning("Cannot reopen the process of request %" PRIu32 ": this system has no pidfd_open(2).",
                            req->cookie);
        if (fd < 0)
                return NULL;
        int r = req->hold == HOLD_PROCESS ? hold_new_process(&m->holds, fd, &h) : hold_new_cgroup(&m->holds, fd, &h);
        if (r < 0) {
                close(fd);
                return NULL;
        }
        hold_store(h, req->cookie);
        return h;
}

static Hold *rebind_one(Manager *m, Request *req) {
        /* The very descriptor, kept by the service manager's store; else reopened. */
        Hold *h = holds_take_stored(&m->holds, req->hold, req->cookie);
        if (!h)
                h = reopen_one(m, req);
        if (h && req->hold == HOLD_PROCESS) {
                /* The record keeps the pid, not the listing's "pid N (exec)": named again either way. */
                _cleanup_(freep) char *exec = process_exec(h->fd, req->target_pid);
                char *name = exec ? process_target(req->target_pid, exec) : NULL;
                if (name) {
                        free(req->target);
                        req->target = name;
                }
        }
        return h;
}

Hold **held_rebind(Manager *m, const RuntimeData *d, RequestOwner **owners) {
        Hold **held = NULL;
        size_t n_rebound = 0, n_ended = 0;

        for (size_t i = 0; i < d->n_entries; i++) {
                Request *req = d->entries[i].request;
                if (req->hold == HOLD_NONE)
                        continue;
                if (!held && !(held = calloc(d->n_entries, sizeof(Hold *))))
                        return NULL; /* out of memory: they end */
                held[i] = m->holds.n < m->holds.max ? rebind_one(m, req) : NULL;
                if (held[i]) {
                        owners[i] = &held[i]->owner;
                        n_rebound++;
                } else
                        n_ended++;
        }
        if (n_rebound + n_ended > 0)
                log_info("Re-bound %zu request(s) to their descriptor, process or cgroup; %zu held one(s) ended (their "
                         "descriptor, process or cgroup is gone).",
                         n_rebound, n_ended);
        return held;
}

void held_rebind_done(Hold **held, size_t n) {
        for (size_t i = 0; held && i < n; i++)
                if (held[i] && held[i]->owner.n_requests == 0)
                        hold_free(held[i]);
        free(held);
}
