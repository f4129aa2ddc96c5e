/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* foreign-writes.h: the fanotify descriptor, its marks and its events. */

#include "sys/foreign-writes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <unistd.h>

#include "sys/cpu-sink.h"
#include "util/file-io.h"
#include "util/text.h"

#define CPU_DIR "/devices/system/cpu"

int foreign_knob_of_path(const char *path, KnobKind *ret_kind, uint32_t *ret_cpu, unsigned *ret_state) {
        const char *p = NULL;
        for (const char *q = strstr(path, CPU_DIR "/cpu"); q; q = strstr(q + 1, CPU_DIR "/cpu"))
                p = q + strlen(CPU_DIR "/cpu");
        if (!p || *p < '0' || *p > '9')
                return -EINVAL;
        char *end;
        unsigned long cpu = strtoul(p, &end, 10);
        if (cpu >= FOREIGN_CPUS_MAX)
                return -EINVAL;
        *ret_cpu = (uint32_t) cpu;
        *ret_state = 0;
        if (strcmp(end, "/power/pm_qos_resume_latency_us") == 0) {
                *ret_kind = KNOB_RESUME_LATENCY;
                return 0;
        }
        if (strcmp(end, "/online") == 0) {
                *ret_kind = KNOB_ONLINE;
                return 0;
        }
        unsigned state;
        int n = 0;
        if (sscanf(end, "/cpuidle/state%u/disable%n", &state, &n) == 1 && end[n] == '\0' &&
            state < CPUIDLE_STATES_MAX) {
                *ret_kind = KNOB_DISABLE;
                *ret_state = state;
                return 0;
        }
        return -EINVAL;
}

void foreign_unit_of_cgroup(const char *text, char *unit, size_t size) {
        unit[0] = '\0';
        const char *line;
        if (strncmp(text, "0::", 3) == 0)
                line = text + 3;
        else {
                line = strstr(text, "\n0::");
                if (!line)
                        return;
                line += 4;
        }
        size_t len = strcspn(line, "\n");
        const char *best = NULL;
        size_t best_len = 0;
        for (size_t i = 0; i < len;) {
                size_t n = strcspn(line + i, "/\n");
                if (n > len - i)
                        n = len - i;
                const char *c = line + i;
                if ((n > 8 && memcmp(c + n - 8, ".service", 8) == 0) ||
                    (n > 6 && memcmp(c + n - 6, ".scope", 6) == 0)) {
                        best = c;
                        best_len = n;
                }
                i += n + 1;
        }
        if (!best)
                return;
        char *clean = text_clean(best, best_len, size - 1);
        if (clean)
                snprintf(unit, size, "%s", clean);
        free(clean);
}

static CpuKnobs *knobs_of(ForeignWatch *w, uint32_t cpu) {
        if (cpu >= FOREIGN_CPUS_MAX)
                return NULL;
        if (cpu >= w->n_cpus) {
                uint32_t n = cpu + 1u;
                CpuKnobs *p = realloc(w->cpus, n * sizeof(CpuKnobs));
                if (!p)
                        return NULL;
                memset(p + w->n_cpus, 0, (n - w->n_cpus) * sizeof(CpuKnobs));
                w->cpus = p;
                w->n_cpus = n;
        }
        return &w->cpus[cpu];
}

/* Marks path for writes; its text, first time, into baseline. */
static int mark(ForeignWatch *w, const char *path, char *baseline, size_t size) {
        if (fanotify_mark(w->fd, FAN_MARK_ADD, FAN_MODIFY, AT_FDCWD, path) < 0)
                return -errno;
        if (baseline && baseline[0] == '\0' && sysfs_read_at(AT_FDCWD, path, baseline, size) < 0)
                baseline[0] = '\0';
        return 0;
}

int foreign_watch_mark_cpu(ForeignWatch *w, uint32_t cpu) {
        char path[PATH_MAX];
        CpuKnobs *k = knobs_of(w, cpu);
        if (!k)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%s" CPU_DIR "/cpu%u/power/pm_qos_resume_latency_us", w->sysfs_root, cpu);
        int r = mark(w, path, k->resume_baseline, sizeof(k->resume_baseline));
        if (r < 0 && r != -ENOENT)
                return r;
        snprintf(path, sizeof(path), "%s" CPU_DIR "/cpu%u/online", w->sysfs_root, cpu);
        (void) mark(w, path, NULL, 0); /* cpu0 often has none */
        unsigned n = 0;
        for (; n < CPUIDLE_STATES_MAX; n++) {
                snprintf(path, sizeof(path), "%s" CPU_DIR "/cpu%u/cpuidle/state%u/disable", w->sysfs_root, cpu, n);
                if (mark(w, path, k->baseline[n], sizeof(k->baseline[n])) < 0)
                        break; /* an offline CPU has none until it comes back */
        }
        if (n > k->n_states)
                k->n_states = n;
        k->marked = true;
        return 0;
}

static int mark_all(ForeignWatch *w) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s" CPU_DIR, w->sysfs_root);
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                unsigned cpu;
                int n = 0;
                if (sscanf(de->d_name, "cpu%u%n", &cpu, &n) == 1 && de->d_name[n] == '\0' && cpu < FOREIGN_CPUS_MAX)
                        r = foreign_watch_mark_cpu(w, cpu);
        }
        closedir(d);
        return r;
}

int foreign_watch_init(ForeignWatch *w, const char *sysfs_root) {
        *w = (ForeignWatch){ .fd = -1, .self = getpid() };
        w->sysfs_root = strdup(sysfs_root);
        if (!w->sysfs_root)
                return -ENOMEM;
        /* The writer's pidfd with each event where the kernel has it (5.15):
         * a pidfd_open() of the pid after reading the event may get another
         * process that reused it. */
        w->fd = fanotify_init(FAN_CLOEXEC | FAN_NONBLOCK | FAN_CLASS_NOTIF | FAN_REPORT_PIDFD, O_RDONLY | O_CLOEXEC);
        w->pidfds = w->fd >= 0;
        if (w->fd < 0 && errno == EINVAL)
                w->fd = fanotify_init(FAN_CLOEXEC | FAN_NONBLOCK | FAN_CLASS_NOTIF, O_RDONLY | O_CLOEXEC);
        if (w->fd < 0)
                return -errno;
        return mark_all(w);
}

void foreign_watch_done(ForeignWatch *w) {
        if (w->fd >= 0)
                close(w->fd);
        free(w->sysfs_root);
        free(w->cpus);
        *w = (ForeignWatch){ .fd = -1 };
}

/* A small file of /proc/PID into buf, NUL-terminated: its length or -errno. */
static ssize_t read_proc(uint32_t pid, const char *name, char *buf, size_t size) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%u/%s", pid, name);
        return read_small_at(AT_FDCWD, path, buf, size);
}

static void clean_into(char *dst, size_t size, const char *src, size_t len) {
        char *c = text_clean(src, len, size - 1);
        snprintf(dst, size, "%s", c ? c : "");
        free(c);
}

/* Who pid is, as far as /proc still says. */
static void describe_writer(ForeignWriter *wr, uint32_t pid) {
        char buf[4096];
        ssize_t n = read_proc(pid, "comm", buf, sizeof(buf));
        wr->pid = pid;
        wr->comm[0] = wr->unit[0] = '\0';
        wr->uid = (uint32_t) -1;
        if (n > 0)
                clean_into(wr->comm, sizeof(wr->comm), buf, strcspn(buf, "\n"));
        if (read_proc(pid, "cgroup", buf, sizeof(buf)) > 0)
                foreign_unit_of_cgroup(buf, wr->unit, sizeof(wr->unit));
        if (read_proc(pid, "status", buf, sizeof(buf)) > 0) {
                const char *u = strstr(buf, "\nUid:");
                unsigned uid;
                if (u && sscanf(u + 5, "%u", &uid) == 1)
                        wr->uid = uid;
        }
}

static ForeignWriter *writer_slot(ForeignWatch *w, KnobKind kind, uint32_t cpu, unsigned state) {
        CpuKnobs *k = knobs_of(w, cpu);
        if (!k)
                return NULL;
        return kind == KNOB_RESUME_LATENCY ? &k->resume : &k->states[state];
}

/* One event's file and writer into *out: 1 if it is a write to report, 0 if not. */
static int decode(ForeignWatch *w, const struct fanotify_event_metadata *m, int64_t now, int64_t mono,
                  ForeignWrite *out) {
        char link[64], path[PATH_MAX], value[FOREIGN_VALUE_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", m->fd);
        ssize_t n = readlink(link, path, sizeof(path) - 1);
        if (n < 0)
                return 0;
        path[n] = '\0';
        *out = (ForeignWrite){ .own = (pid_t) m->pid == w->self, .pidfd = -1 };
        if (foreign_knob_of_path(path, &out->kind, &out->cpu, &out->state) < 0)
                return 0;
        if (out->kind == KNOB_ONLINE) {
                (void) foreign_watch_mark_cpu(w, out->cpu);
                return 0;
        }
        ForeignWriter *slot = writer_slot(w, out->kind, out->cpu, out->state);
        if (!slot)
                return 0;
        if (out->own) {
                w->n_own++;
                *slot = (ForeignWriter){ .burst = slot->burst, .contest_logged = slot->contest_logged };
                return 1;
        }
        n = pread(m->fd, value, sizeof(value) - 1, 0);
        if (n < 0)
                n = 0;
        value[n] = '\0';
        describe_writer(slot, (uint32_t) m->pid);
        clean_into(slot->value, sizeof(slot->value), value, strcspn(value, "\n"));
        slot->when = now;
        /* Keyed on the file, not the writer: one source for every foreign writer. */
        slot->contested = burst_note(&slot->burst, 0, mono, FOREIGN_CONTEST_WINDOW_USEC);
        out->contested = slot->contested;
        if (slot->contested &&
            (slot->contest_logged == 0 || mono - slot->contest_logged >= FOREIGN_CONTEST_WINDOW_USEC)) {
                out->contest_news = true;
                slot->contest_logged = mono;
        }
        out->writer = *slot;
        w->n_foreign++;
        return 1;
}

static bool same_file(const ForeignWrite *a, const ForeignWrite *b) {
        return a->kind == b->kind && a->cpu == b->cpu && a->state == b->state;
}

/* A write followed in the batch by another event for its file: what was read
 * is the later one's value (one writer 50, another 500 0.5 ms later: both
 * read 500), so its own is unknown. */
static void unknown_but_last(ForeignWrite *out, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (out[i].own)
                        continue;
                for (size_t j = i + 1; j < n; j++)
                        if (same_file(&out[i], &out[j])) {
                                snprintf(out[i].writer.value, sizeof(out[i].writer.value), FOREIGN_VALUE_UNKNOWN);
                                break;
                        }
        }
}

/* The pidfd an event comes with (close-on-exec now: the kernel makes it
 * without), or -1. */
static int event_pidfd(const struct fanotify_event_metadata *m) {
        const char *p = (const char *) m + m->metadata_len, *end = (const char *) m + m->event_len;
        while (p + sizeof(struct fanotify_event_info_pidfd) <= end) {
                const struct fanotify_event_info_pidfd *info = (const void *) p;
                if (info->hdr.len == 0)
                        break;
                if (info->hdr.info_type == FAN_EVENT_INFO_TYPE_PIDFD && info->pidfd >= 0) {
                        (void) fcntl(info->pidfd, F_SETFD, FD_CLOEXEC);
                        return info->pidfd;
                }
                p += info->hdr.len;
        }
        return -1;
}

void foreign_writes_close(ForeignWrite *fw, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fw[i].pidfd >= 0) {
                        close(fw[i].pidfd);
                        fw[i].pidfd = -1;
                }
}

int foreign_watch_read(ForeignWatch *w, int64_t now_realtime, int64_t now_monotonic, ForeignWrite *out, size_t max) {
        /* One event is its metadata and, with pidfds, one pidfd record: max
         * of them fill the read, never more than out has room for. */
        const size_t event_size =
                sizeof(struct fanotify_event_metadata) + (w->pidfds ? sizeof(struct fanotify_event_info_pidfd) : 0);
        struct fanotify_event_metadata buf[FOREIGN_BATCH * 2];
        if (max > FOREIGN_BATCH)
                max = FOREIGN_BATCH;
        ssize_t len = read(w->fd, buf, max * event_size);
        if (len < 0)
                return errno == EAGAIN ? 0 : -errno;
        size_t k = 0;
        const struct fanotify_event_metadata *m = buf;
        for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
                if (m->vers != FANOTIFY_METADATA_VERSION) {
                        foreign_writes_close(out, k);
                        return -EPROTO;
                }
                w->n_events++;
                if (m->mask & FAN_Q_OVERFLOW)
                        w->n_overflows++;
                int pidfd = event_pidfd(m);
                if (m->fd >= 0) {
                        if (k < max && decode(w, m, now_realtime, now_monotonic, &out[k]) > 0) {
                                if (!out[k].own) {
                                        out[k].pidfd = pidfd;
                                        pidfd = -1;
                                }
                                k++;
                        }
                        close(m->fd);
                }
                if (pidfd >= 0)
                        close(pidfd);
        }
        unknown_but_last(out, k);
        return (int) k;
}

const ForeignWriter *foreign_watch_writer(const ForeignWatch *w, uint32_t cpu, int state) {
        if (!w || cpu >= w->n_cpus || state >= (int) CPUIDLE_STATES_MAX)
                return NULL;
        const ForeignWriter *wr = state < 0 ? &w->cpus[cpu].resume : &w->cpus[cpu].states[state];
        return wr->pid != 0 ? wr : NULL;
}

/* cpuidle checks CAP_SYS_ADMIN at each write (store_state_disable()): a
 * descriptor opened while root would not help after the drop. */
static int write_disable(const ForeignWatch *w, uint32_t cpu, unsigned state, const char *text) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s" CPU_DIR "/cpu%u/cpuidle/state%u/disable", w->sysfs_root, cpu, state);
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        ssize_t n = pwrite(fd, text, len, 0);
        int r = n < 0 ? -errno : (size_t) n == len ? 0 : -EIO;
        close(fd);
        return r;
}

int foreign_watch_restore(ForeignWatch *w, CpuSink *s, const ForeignWrite *fw, char *ret, size_t size) {
        CpuKnobs *k = knobs_of(w, fw->cpu);
        if (!k)
                return -ENOMEM;
        if (fw->kind == KNOB_RESUME_LATENCY) {
                int32_t v = cpu_sink_written(s, fw->cpu);
                if (v == 0)
                        snprintf(ret, size, "n/a");
                else if (v > 0)
                        snprintf(ret, size, "%" PRIi32, v);
                else
                        snprintf(ret, size, "%s", k->resume_baseline[0] ? k->resume_baseline : "0");
        } else
                snprintf(ret, size, "%s", k->baseline[fw->state][0] ? k->baseline[fw->state] : "0");
        if (strcmp(ret, fw->writer.value) == 0)
                return 0;
        int r = fw->kind == KNOB_RESUME_LATENCY ? cpu_sink_write_text(s, fw->cpu, ret)
                                                : write_disable(w, fw->cpu, fw->state, ret);
        return r < 0 ? r : 1;
}
