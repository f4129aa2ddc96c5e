/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* custody.h: the watch's events, named and handled one by one. */

#include "bus/custody.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bus/custody-adopt.h"
#include "bus/manager.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/macro.h"

/* Whether a line may go out now; says first how many were left out before. */
static bool may_log(Custody *c, int64_t now) {
        if (c->n_logged == 0 || now - c->log_window_start >= CUSTODY_LOG_WINDOW_USEC) {
                if (c->n_left_out > 0)
                        log_info("Left out %" PRIu64 " lines about foreign writes in the last %lld s.", c->n_left_out,
                                 (long long) ((now - c->log_window_start) / 1000000));
                c->log_window_start = now;
                c->n_logged = 0;
                c->n_left_out = 0;
        }
        if (c->n_logged >= CUSTODY_LOG_BURST) {
                c->n_left_out++;
                return false;
        }
        c->n_logged++;
        return true;
}

static void file_name(const ForeignWrite *fw, char *buf, size_t size) {
        if (fw->kind == KNOB_RESUME_LATENCY)
                snprintf(buf, size, "cpu%" PRIu32 "/power/pm_qos_resume_latency_us", fw->cpu);
        else
                snprintf(buf, size, "cpu%" PRIu32 "/cpuidle/state%u/disable", fw->cpu, fw->state);
}

/* The contest, logged once per file and window outside may_log(): it says why
 * pmqosd stopped acting on that file. */
static void log_contest(const ForeignWrite *fw, const char *file) {
        if (fw->contest_news)
                log_warning("Contested: %s was written by other processes more than %u times in %lld s (last pid "
                            "%" PRIu32 " (%s)); leaving it its value %s.",
                            file, BURST_LIMIT, (long long) (FOREIGN_CONTEST_WINDOW_USEC / 1000000), fw->writer.pid,
                            fw->writer.comm[0] ? fw->writer.comm : "gone", fw->writer.value);
}

static void restore(Custody *c, const ForeignWrite *fw, const char *file, int64_t mono) {
        char value[FOREIGN_VALUE_MAX];
        if (fw->contested) {
                log_contest(fw, file);
                return;
        }
        if (strcmp(fw->writer.value, FOREIGN_VALUE_UNKNOWN) == 0)
                return; /* another event for this file follows in the batch: restored once, then */
        int r = foreign_watch_restore(&c->watch, &c->manager->core.cpus, fw, value, sizeof(value));
        if (r > 0)
                c->n_restored++;
        if (r < 0 && may_log(c, mono))
                log_warning_errno(r, "Cannot restore %s to %s: %m", file, value);
        else if (r > 0 && may_log(c, mono))
                log_info("Restored %s to %s.", file, value);
}

static void adopt(Custody *c, const ForeignWrite *fw, const char *file, int64_t mono) {
        int back;
        if (fw->contested)
                log_contest(fw, file);
        int r = custody_adopt(c->manager, &c->watch, fw, &back);
        if (r > 0)
                c->n_adopted++;
        if (r < 0 && may_log(c, mono))
                log_warning_errno(r, "Cannot adopt the write of pid %" PRIu32 " (%s) to %s: %m", fw->writer.pid,
                                  fw->writer.comm[0] ? fw->writer.comm : "gone", file);
        if (back < 0 && may_log(c, mono))
                log_warning_errno(back, "Cannot write %s back over pid %" PRIu32 "'s write: %m", file, fw->writer.pid);
}

static void handle(Custody *c, const ForeignWrite *fw, int64_t mono) {
        char file[96];
        file_name(fw, file, sizeof(file));
        if (may_log(c, mono))
                log_info("Foreign write to %s by pid %" PRIu32 " (%s, unit %s): %s", file, fw->writer.pid,
                         fw->writer.comm[0] ? fw->writer.comm : "gone", fw->writer.unit[0] ? fw->writer.unit : "none",
                         fw->writer.value);
        if (c->policy == FOREIGN_RESTORE)
                restore(c, fw, file, mono);
        else if (c->policy == FOREIGN_ADOPT && fw->kind == KNOB_RESUME_LATENCY)
                adopt(c, fw, file, mono);
}

static int on_watch(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Custody *c = userdata;
        ForeignWrite writes[FOREIGN_BATCH];
        (void) s, (void) fd, (void) revents;

        uint64_t overflows = c->watch.n_overflows;
        int64_t mono = now_monotonic_usec();
        int n = foreign_watch_read(&c->watch, now_realtime_usec(), mono, writes, ELEMENTSOF(writes));
        if (n < 0) {
                log_warning_errno(n, "Cannot read the watch of the per-CPU files: %m");
                return 0;
        }
        if (c->watch.n_overflows > overflows && may_log(c, mono))
                log_warning("The kernel dropped events of the per-CPU files' watch (too many writes at once): "
                            "some writers go unnamed.");
        for (int i = 0; i < n; i++)
                if (!writes[i].own)
                        handle(c, &writes[i], mono);
        foreign_writes_close(writes, (size_t) n);
        return 0;
}

int custody_start(Custody *c, Manager *m, const char *sysfs_root, ForeignPolicy policy) {
        *c = (Custody){ .manager = m, .policy = policy };
        int r = foreign_watch_init(&c->watch, sysfs_root);
        if (r == -EPERM) {
                log_info("Not watching the per-CPU idle knobs for foreign writers: that needs CAP_SYS_ADMIN.");
                foreign_watch_done(&c->watch);
                return 0;
        }
        if (r < 0) {
                log_warning_errno(r, "Cannot watch the per-CPU idle knobs for foreign writers: %m");
                foreign_watch_done(&c->watch);
                return 0;
        }
        r = sd_event_add_io(m->event, &c->source, c->watch.fd, EPOLLIN, on_watch, c);
        if (r < 0) {
                foreign_watch_done(&c->watch);
                return log_error_errno(r, "Cannot put the per-CPU files' watch on the event loop: %m");
        }
        m->core.foreign = &c->watch;
        log_info("Watching the per-CPU idle knobs of %" PRIu32 " CPUs for foreign writers (ForeignWrites=%s).",
                 c->watch.n_cpus, foreign_policy_to_string(policy));
        return 0;
}

void custody_stop(Custody *c) {
        if (!c->manager)
                return; /* never started, or stopped */
        if (c->manager->core.foreign == &c->watch)
                c->manager->core.foreign = NULL;
        c->source = sd_event_source_disable_unref(c->source);
        foreign_watch_done(&c->watch);
        c->manager = NULL;
}
