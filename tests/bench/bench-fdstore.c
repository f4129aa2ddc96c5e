/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The service manager's descriptor store as the bench plays it for held
 * requests (FDSTORE=1 with FDNAME=hXXXXXXXX/pXXXXXXXX/cXXXXXXXX, FDSTOREREMOVE=1,
 * given back at the next start as LISTEN_FDS and LISTEN_FDNAMES, as systemd
 * does), and the restart of 10,000 descriptor-bound requests through it. */

#include "bench.h"

/* Open addressing by name, linear probing; removed slots stay as
 * tombstones until the table is rebuilt. */
enum { SLOTS = 1 << 16 };
enum { EMPTY, LIVE, REMOVED };

typedef struct Slot {
        char name[16];
        int fd;
        unsigned char state;
} Slot;

static Slot slots[SLOTS];
static int n_live, n_used; /* live; live and removed */

static unsigned slot_of(const char *name) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (const unsigned char *p = (const unsigned char *) name; *p; p++)
                h = (h ^ *p) * 16777619u;
        return h & (SLOTS - 1);
}

/* The live slot of name, or -1; *ret_free (if not NULL) where it would go. */
static int find(const char *name, int *ret_free) {
        int free_slot = -1;
        unsigned i = slot_of(name);
        for (int k = 0; k < SLOTS; k++, i = (i + 1) & (SLOTS - 1)) {
                if (slots[i].state != LIVE && free_slot < 0)
                        free_slot = (int) i;
                if (slots[i].state == EMPTY)
                        break;
                if (slots[i].state == LIVE && strcmp(slots[i].name, name) == 0)
                        return (int) i;
        }
        if (ret_free)
                *ret_free = free_slot;
        return -1;
}

static void rebuild(void) {
        Slot *live = malloc(sizeof(Slot) * (size_t) (n_live ? n_live : 1));
        int n = 0;
        if (!live)
                die("rebuild the store", ENOMEM);
        for (int i = 0; i < SLOTS; i++)
                if (slots[i].state == LIVE)
                        live[n++] = slots[i];
        memset(slots, 0, sizeof(slots));
        n_live = n_used = 0;
        for (int i = 0; i < n; i++)
                fdstore_keep(live[i].name, live[i].fd);
        free(live);
}

void fdstore_keep(const char *name, int fd) {
        int at;
        if (strlen(name) >= sizeof(slots[0].name)) {
                close(fd);
                return;
        }
        if (n_used >= SLOTS / 4 * 3)
                rebuild();
        int i = find(name, &at);
        if (i >= 0) { /* the same name again: the new descriptor replaces the old */
                close(slots[i].fd);
                slots[i].fd = fd;
                return;
        }
        if (at < 0)
                die("the bench's descriptor store is full", ENOSPC);
        n_used += slots[at].state == EMPTY;
        slots[at].state = LIVE;
        slots[at].fd = fd;
        strcpy(slots[at].name, name);
        n_live++;
}

void fdstore_remove(const char *name) {
        int i = find(name, NULL);
        if (i < 0)
                return;
        close(slots[i].fd);
        slots[i].state = REMOVED;
        n_live--;
}

int fdstore_count(void) {
        return n_live;
}

/* A stop (not a restart) empties the store, as systemd's. */
void fdstore_clear(void) {
        for (int i = 0; i < SLOTS; i++)
                if (slots[i].state == LIVE)
                        close(slots[i].fd);
        memset(slots, 0, sizeof(slots));
        n_live = n_used = 0;
}

/* Every stored descriptor, and their names joined with ':'. */
static int fdstore_list(int **ret_fds, char **ret_names) {
        int *fds = calloc((size_t) n_live + 1, sizeof(int)), n = 0;
        char *names = malloc((size_t) n_live * sizeof(slots[0].name) + 1), *p = names;
        if (!fds || !names)
                die("list the store", ENOMEM);
        *p = 0;
        for (int i = 0; i < SLOTS; i++)
                if (slots[i].state == LIVE) {
                        p += sprintf(p, "%s%s", n ? ":" : "", slots[i].name);
                        fds[n++] = slots[i].fd;
                }
        *ret_fds = fds;
        *ret_names = names;
        return n;
}

/* ---- the next start ---- */

/* In the child: the device's descriptor and the held ones at 3, 4, … as
 * LISTEN_FDS. Those in the places others go to are moved above them first;
 * each is closed where it was once in place (never two copies of all: the
 * descriptor limit may be under twice their number). */
/* Puts src[i] at 3 + i for every i, inheritable, in place: a descriptor in
 * the way is moved to its own slot first, chain after chain, with one spare
 * above 3 + n per chain (moving every low one above 3 + n first needs n
 * free numbers there: 10,000 held descriptors do not fit under a hard limit
 * of 20,000). */
static void place_fds(int *src, int n) {
        int *owner = malloc(sizeof(int) * (size_t) n); /* owner[s]: the i with src[i] == 3 + s, or -1 */
        if (!owner)
                _exit(127);
        for (int s = 0; s < n; s++)
                owner[s] = -1;
        for (int i = 0; i < n; i++)
                if (src[i] >= 3 && src[i] < 3 + n)
                        owner[src[i] - 3] = i;
        for (int i = 0; i < n; i++) {
                if (src[i] == 3 + i)
                        continue;
                /* Free slot 3 + i: whoever sits there goes to a spare first
                 * (it is placed when its own turn comes). */
                int j = owner[i];
                if (j >= 0) {
                        int spare = fcntl(src[j], F_DUPFD_CLOEXEC, 3 + n);
                        if (spare < 0 || close(src[j]) < 0)
                                _exit(127);
                        src[j] = spare;
                        owner[i] = -1;
                }
                if (dup2(src[i], 3 + i) < 0)
                        _exit(127);
                if (src[i] >= 3 && src[i] < 3 + n)
                        owner[src[i] - 3] = -1;
                close(src[i]);
                src[i] = 3 + i;
                owner[i] = i;
        }
        for (int i = 0; i < n; i++)
                if (fcntl(3 + i, F_SETFD, 0) < 0)
                        _exit(127);
        free(owner);
}

void pass_listen_fds(const DaemonOptions *o) {
        int n = (o->listen_fd >= 0) + o->n_held, k = 0;
        if (n == 0)
                return;
        int *src = calloc((size_t) n, sizeof(int));
        char *names = malloc(strlen(o->held_names ?: "") + 32);
        char count[32], spid[32];
        if (!src || !names)
                _exit(127);
        strcpy(names, o->listen_fd >= 0 ? "cpu_dma_latency" : "");
        if (o->listen_fd >= 0)
                src[k++] = o->listen_fd;
        for (int i = 0; i < o->n_held; i++)
                src[k++] = o->held_fds[i];
        if (o->n_held > 0)
                strcat(strcat(names, names[0] ? ":" : ""), o->held_names);
        place_fds(src, n);
        snprintf(spid, sizeof(spid), "%d", (int) getpid());
        snprintf(count, sizeof(count), "%d", n);
        setenv("LISTEN_PID", spid, 1);
        setenv("LISTEN_FDS", count, 1);
        setenv("LISTEN_FDNAMES", names, 1);
}

/* ---- the restart ---- */

/* execve(2) refuses one argument or environment string over MAX_ARG_STRLEN
 * (32 pages): LISTEN_FDNAMES= with every name, "cpu_dma_latency" first,
 * must fit; systemd joins all the names into it the same way. */
enum { MAX_ARG_STRLEN_ = 32 * 4096 };

/* Until the store holds n: pmqosd hands over (or takes out) descriptors. */
static void wait_store(int n) {
        for (uint64_t t0 = now_ns(); fdstore_count() != n; drain_notifications()) {
                struct pollfd p = { .fd = notify_fd, .events = POLLIN };
                if (now_ns() - t0 > 30000000000u)
                        die("pmqosd did not hand every held descriptor to the store", ETIMEDOUT);
                (void) poll(&p, 1, 100);
        }
}

/* How many of the n listed names fit into LISTEN_FDNAMES=: those that do
 * not are cut from names and taken out of the store (closed, as by a store
 * that lost them). *ret_len: the variable's length with all of them. */
static int fit_names(char *names, int n, size_t *ret_len) {
        size_t len = strlen("LISTEN_FDNAMES=cpu_dma_latency") + 1;
        char *p = names, *cut = NULL;
        int fit = 0;
        for (int i = 0; i < n; i++) {
                size_t k = strcspn(p, ":");
                len += 1 + k;
                if (len > MAX_ARG_STRLEN_ && !cut)
                        cut = p;
                if (cut) {
                        char name[sizeof(slots[0].name)] = "";
                        if (k < sizeof(name))
                                memcpy(name, p, k), name[k] = 0;
                        fdstore_remove(name);
                } else
                        fit++;
                p += k + (p[k] == ':');
        }
        if (cut)
                *(cut > names ? cut - 1 : cut) = 0;
        *ret_len = len;
        return fit;
}

typedef struct HeldRestart {
        int n, fit, back;
        size_t names_len;
        uint64_t ready;
        long off;
        bool ended; /* every one ended at its descriptor's close after */
} HeldRestart;

/* n Hold()s by one process (their connection gone); SIGTERM and a new
 * pmqosd given the store's descriptors, the device sampled all along; then
 * the holder killed: all of them end. */
static void held_restart(const Config *c, int n, HeldRestart *hr) {
        int *stored;
        char *names;
        restart_with(c, &(DaemonOptions){ .notify = true, .listen_fd = -1 });
        pid_t holder = spawn_crowd(BUS_NAME, 1, 1, n, true);
        wait_store(n);
        usleep(200000);
        drain_notifications();
        int m = fdstore_list(&stored, &names);
        *hr = (HeldRestart){ .n = n };
        hr->fit = fit_names(names, m, &hr->names_len); /* fdstore_list()'s order: the first fit */
        restart_and_watch(c,
                          &(DaemonOptions){ .notify = true,
                                            .listen_fd = stored_fd,
                                            .held_fds = stored,
                                            .n_held = hr->fit,
                                            .held_names = names },
                          20000, &hr->ready, &hr->off);
        hr->back = (int) request_count();
        int dev = open(c->device, O_RDONLY | O_CLOEXEC);
        if (dev < 0)
                die("open device", errno);
        uint64_t t0 = now_ns();
        kill(holder, SIGKILL);
        hr->ended = wait_released(dev, t0) != 0 && request_count() == 0;
        waitpid(holder, NULL, 0);
        close(dev);
        free(stored);
        free(names);
}

/* On a stand-in file, pmqosd's stop writes what the kernel would do at its
 * close (sink.c), and every copy of a file's descriptor shares its content:
 * a stored one cannot keep a bound, so the samples are not judged there. */
void measure_held_restart(const Config *c) {
        HeldRestart hr;
        struct stat st;
        held_restart(c, c->quick ? 1000 : 10000, &hr);
        bool standin = stat(c->device, &st) == 0 && S_ISREG(st.st_mode);
        char cut[160] = "", off[96];
        if (hr.fit < hr.n)
                snprintf(cut, sizeof(cut),
                         "only %d of %d: LISTEN_FDNAMES= for all is %zu B > %d (E2BIG, also under "
                         "systemd); ",
                         hr.fit, hr.n, hr.names_len, MAX_ARG_STRLEN_);
        if (standin)
                snprintf(off, sizeof(off), "samples off the bound not measurable on a stand-in file");
        else
                snprintf(off, sizeof(off), "%ld samples off the bound", hr.off);
        Row *r = add_row("held restart");
        snprintf(r->value, sizeof(r->value), "%s%d held by descriptors: %d back, READY=1 %.1f ms; %s; %s at the close",
                 cut, hr.fit, hr.back, (double) hr.ready / 1e6, off, hr.ended ? "all ended" : "NOT ALL ENDED");
        snprintf(r->target, sizeof(r->target), "≤ 100 ms, all %d back%s", hr.n, standin ? "" : ", 0 off");
        r->number = (double) hr.ready / 1e6;
        r->has_target = true;
        r->miscount = hr.back != hr.fit || !hr.ended;
        r->pass = !r->miscount && hr.fit == hr.n && (standin || hr.off == 0) && r->number <= 100;
}
