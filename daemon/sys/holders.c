/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The external-holder scan and its helper process. The helper takes no input
 * but a byte that means "scan now", so the capabilities it keeps serve one
 * fixed question and nothing a client sends reaches them. */

#include "sys/holders.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/kcmp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"

int holder_target_init(HolderTarget *target, int fd, const char *path) {
        *target = (HolderTarget){};
        if (fstat(fd, &target->st) < 0)
                return -errno;
        const char *slash = strrchr(path, '/');
        snprintf(target->basename, sizeof(target->basename), "%s", slash ? slash + 1 : path);
        target->owner = getpid();
        target->owner_fd = fd;
        return 0;
}

/* Where descriptor name of the directory dir leads, as statx() says without
 * asking the file system (AT_STATX_DONT_SYNC): a FUSE or NFS file of the
 * same name, whose server could take forever to answer, costs nothing. */
static bool leads_to(int dir, const char *name, const struct stat *target) {
        struct statx stx;
        if (statx(dir, name, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) < 0)
                return false;
        if (S_ISCHR(stx.stx_mode) || S_ISCHR(target->st_mode))
                return S_ISCHR(stx.stx_mode) && S_ISCHR(target->st_mode) &&
                       makedev(stx.stx_rdev_major, stx.stx_rdev_minor) == target->st_rdev;
        return makedev(stx.stx_dev_major, stx.stx_dev_minor) == target->st_dev && stx.stx_ino == target->st_ino;
}

/* Whether the link text names a file called target->basename. */
static bool link_matches(const char *link, const HolderTarget *target) {
        const char *slash = strrchr(link, '/');
        return slash && strcmp(slash + 1, target->basename) == 0;
}

/* Whether descriptor fd of pid is the very open file pmqosd holds. */
static bool is_owners(const HolderTarget *target, unsigned long pid, const char *fd) {
        return target->owner > 0 &&
               syscall(SYS_kcmp, target->owner, (pid_t) pid, KCMP_FILE, target->owner_fd, atoi(fd)) == 0;
}

/* Whether descriptor fd of pid was opened for reading or writing: an O_PATH
 * one (anyone may open the device so, without permission) holds no request.
 * Unreadable fdinfo counts as a holder, as before the check. */
static bool opened_for_io(int proc_fd, const char *pid, const char *fd) {
        char path[600], buf[256];
        snprintf(path, sizeof(path), "%s/fdinfo/%s", pid, fd);
        int info = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        if (info < 0)
                return true;
        ssize_t n = read(info, buf, sizeof(buf) - 1);
        close(info);
        if (n <= 0)
                return true;
        buf[n] = 0;
        const char *flags = strstr(buf, "flags:");
        if (!flags)
                return true;
        unsigned long v = strtoul(flags + strlen("flags:"), NULL, 8);
        return !(v & O_PATH);
}

/* 1 if process pid holds target, 0 if not, -EACCES if its descriptors are
 * hidden from us, -E2BIG if *budget ran out before its last descriptor. Its
 * descriptor list costs one of *budget, each descriptor one more. */
static int scan_process(int proc_fd, const char *pid, const HolderTarget *target, uint32_t *budget) {
        char path[64];
        if (*budget == 0)
                return -E2BIG;
        (*budget)--;
        snprintf(path, sizeof(path), "%s/fd", pid);
        int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -EACCES; /* gone meanwhile, or not ours to see */
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return 0;
        }
        int found = 0;
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (*budget == 0) {
                        found = -E2BIG;
                        break;
                }
                (*budget)--;
                char link[512];
                ssize_t n = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
                if (n <= 0)
                        continue;
                link[n] = 0;
                if (link_matches(link, target) && leads_to(dirfd(d), de->d_name, &target->st) &&
                    opened_for_io(proc_fd, pid, de->d_name) && !is_owners(target, strtoul(pid, NULL, 10), de->d_name))
                        found = 1;
        }
        closedir(d);
        return found;
}

/* The uid a process is charged to and listed under, from its status file:
 * root only if its real and effective uids are both 0 (a set-uid program a
 * user runs stays the user's), else the real uid, or the effective one if
 * the real is 0. -ENOENT if it is gone, -EBADMSG if the file says no uid. */
static int process_uid(int proc_fd, const char *pid, uint32_t *ret) {
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "%s/status", pid);
        int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return n < 0 ? -errno : -EBADMSG;
        buf[n] = 0;
        const char *p = strstr(buf, "\nUid:");
        unsigned long uids[2];
        if (!p)
                return -EBADMSG;
        p += strlen("\nUid:");
        for (size_t i = 0; i < 2; i++) {
                char *end;
                while (*p == '\t' || *p == ' ')
                        p++;
                if (*p < '0' || *p > '9')
                        return -EBADMSG;
                errno = 0;
                uids[i] = strtoul(p, &end, 10);
                if (errno || uids[i] > UINT32_MAX || (*end != '\t' && *end != ' ' && *end != '\n'))
                        return -EBADMSG;
                p = end;
        }
        unsigned long real = uids[0], effective = uids[1];
        *ret = (uint32_t) (real != 0 ? real : effective);
        return 0;
}

/* ---- what a scan has cost each uid: a hash table, open addressing ---- */

typedef struct UidCost {
        uint32_t uid;
        uint32_t used;      /* entries looked at for its processes */
        uint32_t unscanned; /* its processes not looked at to their end */
        bool taken;
} UidCost;

typedef struct UidCosts {
        UidCost *slots;
        size_t n, cap; /* cap a power of two, at most half full */
        uint32_t others_used;
} UidCosts;

static UidCost *probe(UidCost *slots, size_t cap, uint32_t uid) {
        size_t i = (uid * 2654435761u) & (cap - 1);
        while (slots[i].taken && slots[i].uid != uid)
                i = (i + 1) & (cap - 1);
        return &slots[i];
}

/* uid's entry, added if new; NULL without memory. */
static UidCost *uid_cost(UidCosts *t, uint32_t uid) {
        if ((t->n + 1) * 2 > t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 64;
                UidCost *slots = calloc(cap, sizeof(UidCost));
                if (!slots)
                        return NULL;
                for (size_t i = 0; i < t->cap; i++)
                        if (t->slots[i].taken)
                                *probe(slots, cap, t->slots[i].uid) = t->slots[i];
                free(t->slots);
                t->slots = slots;
                t->cap = cap;
        }
        UidCost *c = probe(t->slots, t->cap, uid);
        if (!c->taken) {
                *c = (UidCost){ .uid = uid, .taken = true };
                t->n++;
        }
        return c;
}

/* The uids with the most processes not looked at, most first. */
static void report_unscanned(const UidCosts *t, HolderScan *ret) {
        for (ret->n_unscanned = 0; ret->n_unscanned < HOLDERS_UNSCANNED_MAX; ret->n_unscanned++) {
                const UidCost *best = NULL;
                for (size_t i = 0; i < t->cap; i++) {
                        const UidCost *c = &t->slots[i];
                        bool listed = false;
                        for (uint32_t k = 0; k < ret->n_unscanned; k++)
                                listed |= ret->unscanned[k].uid == c->uid;
                        if (c->taken && c->unscanned > 0 && !listed &&
                            (!best || c->unscanned > best->unscanned ||
                             (c->unscanned == best->unscanned && c->uid < best->uid)))
                                best = c;
                }
                if (!best)
                        break;
                ret->unscanned[ret->n_unscanned] = (HolderUnscanned){ .uid = best->uid, .processes = best->unscanned };
        }
}

/* ---- the scan ---- */

/* Lists a holder. When the list is full, one more is left out — unless it is
 * root's and a user's is listed: the last user's listed gives way. */
static void add_holder(HolderScan *ret, uint32_t pid, uint32_t uid) {
        if (ret->n < HOLDERS_MAX) {
                ret->pids[ret->n] = pid;
                ret->uids[ret->n++] = uid;
                return;
        }
        ret->left_out++;
        for (uint32_t i = ret->n; uid == 0 && i-- > 0;)
                if (ret->uids[i] != 0) {
                        memmove(ret->pids + i, ret->pids + i + 1, (ret->n - i - 1) * sizeof(uint32_t));
                        memmove(ret->uids + i, ret->uids + i + 1, (ret->n - i - 1) * sizeof(uint32_t));
                        ret->pids[ret->n - 1] = pid;
                        ret->uids[ret->n - 1] = uid;
                        return;
                }
}

/* Root's holders first, each part in the order found. */
static void root_first(HolderScan *ret) {
        uint32_t pids[HOLDERS_MAX] = {}, uids[HOLDERS_MAX] = {}, k = 0;
        for (int root = 1; root >= 0; root--)
                for (uint32_t i = 0; i < ret->n; i++)
                        if ((ret->uids[i] == 0) == (bool) root) {
                                pids[k] = ret->pids[i];
                                uids[k++] = ret->uids[i];
                        }
        memcpy(ret->pids, pids, k * sizeof(uint32_t));
        memcpy(ret->uids, uids, k * sizeof(uint32_t));
}

/* Looks at one process within its uid's share; false without memory. */
static bool scan_one(int proc_fd, const char *pid, const HolderTarget *target, const HolderBounds *bounds,
                     UidCosts *costs, HolderScan *ret) {
        uint32_t uid = UINT32_MAX;
        int r = process_uid(proc_fd, pid, &uid);
        if (r < 0) {
                ret->complete &= r == -ENOENT; /* gone meanwhile, or hidden */
                return true;
        }
        UidCost *c = uid_cost(costs, uid);
        if (!c)
                return false;
        bool trusted = uid == 0 || uid == (uint32_t) bounds->own;
        uint32_t max = trusted ? bounds->trusted : bounds->per_uid;
        uint32_t budget = c->used < max ? max - c->used : 0;
        if (!trusted && bounds->others - costs->others_used < budget)
                budget = bounds->others - costs->others_used;
        uint32_t before = budget;
        r = scan_process(proc_fd, pid, target, &budget);
        c->used += before - budget;
        if (!trusted)
                costs->others_used += before - budget;
        if (r == -E2BIG)
                c->unscanned++;
        if (r < 0)
                ret->complete = false;
        else if (r > 0)
                add_holder(ret, (uint32_t) strtoul(pid, NULL, 10), uid);
        return true;
}

void holders_scan(int proc_fd, const HolderTarget *target, const pid_t *skip, size_t n_skip, const HolderBounds *bounds,
                  HolderScan *ret) {
        *ret = (HolderScan){ .complete = true };
        int fd = openat(proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                ret->complete = false;
                return;
        }
        UidCosts costs = {};
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                unsigned long pid = strtoul(de->d_name, &end, 10);
                if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end || pid > INT32_MAX)
                        continue;
                bool skipped = false;
                for (size_t i = 0; i < n_skip; i++)
                        skipped |= (unsigned long) skip[i] == pid;
                if (!skipped && !scan_one(proc_fd, de->d_name, target, bounds, &costs, ret)) {
                        ret->complete = false;
                        break;
                }
        }
        closedir(d);
        root_first(ret);
        report_unscanned(&costs, ret);
        free(costs.slots);
        ret->complete &= ret->left_out == 0 && ret->n_unscanned == 0;
}

size_t holders_encode(const HolderScan *scan, uint8_t buf[HOLDERS_WIRE_MAX]) {
        uint32_t head[4] = { scan->n, scan->complete, scan->left_out, scan->n_unscanned };
        size_t len = sizeof(head);
        memcpy(buf, head, sizeof(head));
        for (uint32_t i = 0; i < scan->n; i++) {
                uint32_t pair[2] = { scan->pids[i], scan->uids[i] };
                memcpy(buf + len, pair, sizeof(pair));
                len += sizeof(pair);
        }
        for (uint32_t i = 0; i < scan->n_unscanned; i++) {
                uint32_t pair[2] = { scan->unscanned[i].uid, scan->unscanned[i].processes };
                memcpy(buf + len, pair, sizeof(pair));
                len += sizeof(pair);
        }
        return len;
}

int holders_decode(const uint8_t *buf, size_t len, HolderScan *ret) {
        uint32_t head[4];
        *ret = (HolderScan){};
        if (len < sizeof(head))
                return -EBADMSG;
        memcpy(head, buf, sizeof(head));
        if (head[0] > HOLDERS_MAX || head[1] > 1 || head[3] > HOLDERS_UNSCANNED_MAX ||
            len != sizeof(head) + (head[0] + head[3]) * 2 * sizeof(uint32_t) || (head[1] && (head[2] || head[3])))
                return -EBADMSG;
        *ret = (HolderScan){ .n = head[0], .complete = head[1], .left_out = head[2], .n_unscanned = head[3] };
        const uint8_t *p = buf + sizeof(head);
        for (uint32_t i = 0; i < ret->n; i++, p += 8) {
                memcpy(&ret->pids[i], p, 4);
                memcpy(&ret->uids[i], p + 4, 4);
                if (ret->pids[i] == 0 || ret->pids[i] > INT32_MAX || (i > 0 && ret->uids[i] == 0 && ret->uids[i - 1]))
                        return -EBADMSG; /* not a pid, or root's after a user's */
        }
        for (uint32_t i = 0; i < ret->n_unscanned; i++, p += 8) {
                memcpy(&ret->unscanned[i].uid, p, 4);
                memcpy(&ret->unscanned[i].processes, p + 4, 4);
                if (ret->unscanned[i].processes == 0)
                        return -EBADMSG;
        }
        return 0;
}

/* Keeps CAP_SYS_PTRACE (to read where another user's descriptor leads) and
 * CAP_DAC_READ_SEARCH (to open another user's /proc/PID/fd), nothing else,
 * and becomes uid. Without root, the calls fail and the helper scans with
 * what it has: its reports then say "incomplete". */
static void helper_drop_privileges(uid_t uid, gid_t gid) {
        const unsigned long keep = (1ul << CAP_SYS_PTRACE) | (1ul << CAP_DAC_READ_SEARCH);
        if (geteuid() != 0)
                return;
        for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
                if (!(keep & (1ul << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
                        break;
        if (uid != (uid_t) -1) {
                if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
                    setresuid(uid, uid, uid) < 0) {
                        log_error_errno(errno, "The holder scan helper cannot switch users: %m; it ends.");
                        _exit(1);
                }
        }
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = { { .effective = (uint32_t) keep, .permitted = (uint32_t) keep } };
        if (syscall(SYS_capset, &header, data) < 0)
                log_warning_errno(
                        errno,
                        "The holder scan helper cannot keep its capabilities (%m); it sees only what user %u may.",
                        (unsigned) getuid());
        (void) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static _Noreturn void helper_run(int sock, const HolderTarget *target, pid_t parent, uid_t uid, gid_t gid) {
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != parent)
                _exit(0);
        (void) prctl(PR_SET_NAME, "pmqosd-holders", 0, 0, 0);
        if (dup2(sock, 3) < 0)
                _exit(1);
        if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
                for (int fd = 4; fd < 1024; fd++)
                        close(fd);
        helper_drop_privileges(uid, gid);

        int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const pid_t skip[] = { parent, getpid() };
        const HolderBounds bounds = { .per_uid = HOLDERS_SCAN_PER_UID,
                                      .others = HOLDERS_SCAN_FDS_MAX,
                                      .trusted = HOLDERS_SCAN_FDS_MAX,
                                      .own = getuid() };
        for (;;) {
                char byte;
                ssize_t n = recv(3, &byte, 1, 0);
                if (n == 0 || (n < 0 && errno != EINTR))
                        _exit(0); /* pmqosd closed its end: it is going */
                if (n < 0)
                        continue;
                HolderScan scan = { .complete = false };
                if (proc_fd >= 0)
                        holders_scan(proc_fd, target, skip, 2, &bounds, &scan);
                uint8_t buf[HOLDERS_WIRE_MAX];
                size_t len = holders_encode(&scan, buf);
                if (send(3, buf, len, MSG_NOSIGNAL) < 0)
                        _exit(0);
        }
}

int holders_helper_start(const HolderTarget *target, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_fd) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0) {
                close(sv[0]);
                helper_run(sv[1], target, parent, uid, gid);
        }
        close(sv[1]);
        *ret_pid = pid;
        *ret_fd = sv[0];
        return 0;
}
