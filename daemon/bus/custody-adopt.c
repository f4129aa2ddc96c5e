/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* custody-adopt.h: the writer's request, made as RequestFor() makes one
 * for a pidfd, with pmqosd as the one who asks. */

#include "bus/custody-adopt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bus/manager.h"
#include "sys/target.h"
#include "util/clock.h"

/* The writer's value as a bound: "n/a" is 0 µs, "0" none, else µs; -EINVAL. */
static int parse_resume(const char *text, int32_t *ret) {
        if (strcmp(text, "n/a") == 0) {
                *ret = 0;
                return 0;
        }
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || v < 0 || v > PMQOS_CONTRACT_LATENCY_MAX)
                return -EINVAL;
        *ret = v == 0 ? PMQOS_LATENCY_NONE : (int32_t) v;
        return 0;
}

/* The writer's adopted request on cpu: a process hold's one request with our reason. */
static Request *find_adopted(Manager *m, pid_t pid, uint32_t cpu, const char *reason) {
        for (Hold *h = m->holds.head; h; h = h->next) {
                Request *req = hold_request(h);
                if (req && h->kind == HOLD_PROCESS && req->target_pid == pid && req->n_cpus == 1 &&
                    req->cpus[0] == cpu && req->reason && strcmp(req->reason, reason) == 0)
                        return req;
        }
        return NULL;
}

static Request *adopted_request(Manager *m, const ForeignWrite *fw, const Target *t, int32_t value,
                                const char *reason) {
        Request *req = request_new(&m->core.store);
        if (!req)
                return NULL;
        char target[FOREIGN_COMM_MAX + 32];
        snprintf(target, sizeof(target), "pid %" PRIu32 " (%s)", fw->writer.pid, fw->writer.comm);
        req->value = value;
        req->type = QOS_TYPE_CPU_DMA;
        req->uid = t->uid;
        req->pid = (pid_t) fw->writer.pid;
        req->created_usec = now_realtime_usec();
        req->exec = shared_string_new(fw->writer.comm);
        req->origin = process_origin(req->pid); /* the pidfd is open: the writer's still */
        req->hold = HOLD_PROCESS;
        req->target_pid = t->pid;
        req->target_key = t->start_time;
        if (!req->exec || !req->origin || !(req->reason = strdup(reason)) || !(req->target = strdup(target)) ||
            request_set_cpus(req, &fw->cpu, 1) < 0)
                return request_free(req);
        return req;
}

/* A new request of the writer, bound to its process. */
static int adopt_new(Manager *m, ForeignWatch *w, const ForeignWrite *fw, int32_t value, const char *reason,
                     ChangeSet *changes) {
        char why[256];
        if (m->holds.n >= m->holds.max)
                return -EUSERS;
        /* The writer's pidfd as it came with the event; pidfd_open() of its
         * pid, after, where the kernel gives none (before 5.15). */
        int pidfd = fw->pidfd >= 0 ? fcntl(fw->pidfd, F_DUPFD_CLOEXEC, 3)
                                   : (int) syscall(SYS_pidfd_open, (pid_t) fw->writer.pid, 0);
        if (pidfd < 0)
                return -errno;
        Target t = {};
        int r = target_identify(pidfd, &t, why, sizeof(why));
        if (r >= 0 && (t.kind != TARGET_PROCESS || t.pid != (pid_t) fw->writer.pid))
                r = -ESRCH; /* not the event's writer */
        Hold *h = NULL;
        if (r >= 0 && (r = hold_new_process(&m->holds, pidfd, &h)) >= 0)
                pidfd = -1;
        if (pidfd >= 0)
                close(pidfd);
        if (r < 0) {
                target_done(&t);
                return r;
        }
        Request *req = adopted_request(m, fw, &t, value, reason);
        target_done(&t);
        if (!req) {
                hold_free(h);
                return -ENOMEM;
        }
        /* What pmqosd gives the file back when no request remains: what it held
         * before the writer, not the writer's value. */
        const CpuKnobs *k = &w->cpus[fw->cpu];
        if (!cpu_sink_constrains(&m->core.cpus, fw->cpu) && k->resume_baseline[0] &&
            cpu_sink_remember_text(&m->core.cpus, fw->cpu, k->resume_baseline) >= 0)
                m->core.originals_dirty = true;
        uint32_t cookie = req->cookie;
        r = core_add(&m->core, req, &h->owner, changes);
        if (r < 0) {
                hold_free(h);
                return r;
        }
        hold_store(h, cookie);
        return 1;
}

/* The file holds the writer's value: what pmqosd holds for that CPU now
 * (the aggregate, the writer's request in it) goes back over it. A commit
 * writes only what differs from what pmqosd wrote last, which the writer's
 * value is not. */
static int bring_back(Manager *m, ForeignWatch *w, const ForeignWrite *fw) {
        char value[FOREIGN_VALUE_MAX];
        int r = foreign_watch_restore(w, &m->core.cpus, fw, value, sizeof(value));
        return r < 0 ? r : 0;
}

int custody_adopt(Manager *m, ForeignWatch *w, const ForeignWrite *fw, int *ret_bring_back) {
        ChangeSet changes = {};
        char reason[64];
        int32_t value;
        int r = 0;

        *ret_bring_back = 0;
        if (fw->contested || parse_resume(fw->writer.value, &value) < 0 || fw->writer.pid == 0)
                return 0; /* contested, unknown or nothing a writer of a bound writes: reported only */
        snprintf(reason, sizeof(reason), "adopted write to cpu%" PRIu32, fw->cpu);
        Request *req = find_adopted(m, (pid_t) fw->writer.pid, fw->cpu, reason);
        if (req && value < 0)
                r = core_end(&m->core, req, AUDIT_END_CANCELLED, 0, &changes);
        else if (req)
                r = core_update(&m->core, req, value, 0, &changes);
        else if (value >= 0)
                r = adopt_new(m, w, fw, value, reason, &changes);
        *ret_bring_back = bring_back(m, w, fw);
        publish(&m->pub, &changes);
        return r < 0 ? r : r > 0;
}
