// SPDX-License-Identifier: LGPL-2.1-or-later
/* pmqosctl run: an unmodified program, with a stand-in /dev/cpu_dma_latency
 * (and /dev/cpu_wakeup_latency where the kernel has it) served by this
 * process through FUSE in the program's own mount namespace: each open of
 * it is a broker request of the device's type (standin/standin-fs.c).
 *
 * Root: pmqosctl makes a private mount namespace, mounts the stand-in on a
 * temporary directory there; the child binds its file over the device,
 * detaches the directory and runs COMMAND; pmqosctl then drops every
 * capability and serves. Another user: the mount is made by fusermount3 (the
 * file readable by that user only), and the child makes a user namespace
 * that maps only that user to itself (so that it may have a mount namespace)
 * and binds the file there. Either way the server has the invoking user's
 * credentials and serves that user's opens only: the broker authorizes,
 * limits and audits that user. */

#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "pmqosctl-cli.h"
#include "standin/standin-fs.h"
#include "util/cpu-list.h"

#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

static const char *const devices[] = { "cpu_dma_latency", "cpu_wakeup_latency" };

typedef struct run_setup {
        bool root;
        bool wakeup; /* bind the wakeup stand-in too */
        uid_t uid;
        gid_t gid;
        char dir[64]; /* where the stand-in is mounted */
} run_setup;

static void run_signals(sigset_t *mask) {
        sigemptyset(mask);
        sigaddset(mask, SIGINT);
        sigaddset(mask, SIGTERM);
        sigaddset(mask, SIGHUP);
        sigaddset(mask, SIGQUIT);
        sigaddset(mask, SIGCHLD);
}

static int write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = write(fd, text, strlen(text));
        close(fd);
        return n == (ssize_t) strlen(text) ? 0 : -1;
}

/* A user namespace mapping only our user and group to themselves. */
static int enter_user_namespace(uid_t uid, gid_t gid) {
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return -1;
        if (write_file("/proc/self/setgroups", "deny") < 0)
                return -1;
        snprintf(map, sizeof(map), "%u %u 1", (unsigned) uid, (unsigned) uid);
        if (write_file("/proc/self/uid_map", map) < 0)
                return -1;
        snprintf(map, sizeof(map), "%u %u 1", (unsigned) gid, (unsigned) gid);
        return write_file("/proc/self/gid_map", map);
}

static _Noreturn void child_fail(const char *what) {
        fprintf(stderr, "pmqosctl run: cannot set up the stand-in device: %s: %s\n", what, strerror(errno));
        _exit(EXIT_RUN_FAILED);
}

/* In the child: the stand-in over the devices, then COMMAND. */
static _Noreturn void run_child(const run_setup *setup, char **command, const sigset_t *old) {
        sigprocmask(SIG_SETMASK, old, NULL);
        if (!setup->root) {
                if (enter_user_namespace(setup->uid, setup->gid) < 0)
                        child_fail("cannot make a user and mount namespace");
                if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                        child_fail("cannot make the mount namespace private");
        }
        for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
                char dev[64], file[128];
                snprintf(dev, sizeof(dev), "/dev/%s", devices[i]);
                snprintf(file, sizeof(file), "%s/%s", setup->dir, devices[i]);
                if (access(dev, F_OK) < 0 || (i == 1 && !setup->wakeup)) {
                        if (i == 0)
                                child_fail("/dev/cpu_dma_latency");
                        continue; /* a kernel without it, or --cpus */
                }
                if (mount(file, dev, NULL, MS_BIND, NULL) < 0)
                        child_fail(dev);
        }
        if (setup->root)
                (void) umount2(setup->dir, MNT_DETACH); /* reachable through the devices only */
        execvp(command[0], command);
        int e = errno;
        fprintf(stderr, "pmqosctl run: cannot run %s: %s\n", command[0], strerror(e));
        _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
}

/* The server needs no capability once the child has its namespace: it
 * answers FUSE requests on a descriptor it has and talks to the bus. */
static void drop_capabilities(int keep) {
        for (int cap = 0; cap <= 63; cap++)
                if (cap != keep)
                        (void) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        if (keep >= 0)
                d[0].effective = d[0].permitted = 1U << keep;
        (void) syscall(SYS_capset, &h, d);
        (void) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* As root the child detached the mount (or it ends with our namespace), and
 * the capability to unmount is gone: libfuse's unmount would only say it
 * failed. It still closes the connection and frees what it holds. */
static void unmount_quietly(struct fuse *f) {
        int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (saved >= 0 && null >= 0)
                dup2(null, STDERR_FILENO);
        fuse_unmount(f);
        if (saved >= 0) {
                dup2(saved, STDERR_FILENO);
                close(saved);
        }
        if (null >= 0)
                close(null);
}

/* The stand-in mounted on setup->dir (and, as root, our own mount
 * namespace). 0, or an exit status after saying why. */
static int mount_standin(run_setup *setup, struct fuse *f) {
        if (access("/dev/fuse", F_OK) < 0)
                return setup_fail("no FUSE on this system (/dev/fuse)", strerror(errno));
        if (setup->root) {
                if (unshare(CLONE_NEWNS) < 0)
                        return setup_fail("cannot make a mount namespace", strerror(errno));
                if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                        return setup_fail("cannot make the mount namespace private", strerror(errno));
        }
        snprintf(setup->dir, sizeof(setup->dir), "/tmp/pmqos-run-XXXXXX");
        if (!mkdtemp(setup->dir))
                return setup_fail("cannot make a directory in /tmp", strerror(errno));
        if (fuse_mount(f, setup->dir) < 0) {
                rmdir(setup->dir);
                return setup_fail("cannot mount the FUSE file system",
                                  setup->root ? "the kernel refused it"
                                              : "fusermount3 could not mount it for this user (it must be "
                                                "installed set-user-ID root, and /dev/fuse open to all users, "
                                                "mode 0666)");
        }
        return 0;
}

/* One FUSE request, if one is there. false once the file system is gone. */
static bool serve_one(struct fuse_session *se, struct fuse_buf *buf) {
        int r = fuse_session_receive_buf(se, buf);
        if (r == -EINTR || r == -EAGAIN)
                return true;
        if (r <= 0)
                return false;
        fuse_session_process_buf(se, buf);
        return true;
}

/* What is still queued once COMMAND ended: its closes. */
static void drain(struct fuse_session *se, struct fuse_buf *buf) {
        struct pollfd p = { .fd = fuse_session_fd(se), .events = POLLIN };
        while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN) && serve_one(se, buf))
                ;
}

static int child_status(int status) {
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Serves the stand-in and the broker connection until the child ends;
 * returns its exit status. */
static int run_loop(standin *s, pid_t child, int sfd, int ready, const run_setup *setup) {
        struct fuse_session *se = fuse_get_session(s->fuse);
        struct fuse_buf buf = {};
        bool serving = true;
        for (;;) {
                (void) pmqos_client_process(s->backend.client); /* a lost bus fails the next open: EIO */
                struct pollfd p[4] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = pmqos_client_get_fd(s->backend.client),
                          .events = (short) pmqos_client_get_events(s->backend.client) },
                        { .fd = serving ? fuse_session_fd(se) : -1, .events = POLLIN },
                        { .fd = ready, .events = POLLIN },
                };
                if (poll(p, 4, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        fprintf(stderr, "pmqosctl run: poll: %s\n", strerror(errno));
                        break;
                }
                if (p[2].revents & (POLLIN | POLLERR | POLLHUP))
                        serving = serve_one(se, &buf);
                if (p[3].revents) { /* the child ran COMMAND (or failed): the directory is done with */
                        close(ready);
                        ready = -1;
                        if (setup && setup->root)
                                (void) rmdir(setup->dir);
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) != sizeof(si))
                        continue;
                if (si.ssi_signo != SIGCHLD && child <= 0)
                        break; /* serving for services (--serve): stopped */
                if (si.ssi_signo != SIGCHLD) {
                        if (si.ssi_signo != SIGINT) /* the terminal sent that one to the whole group */
                                kill(child, (int) si.ssi_signo);
                        continue;
                }
                int status;
                if (waitpid(child, &status, WNOHANG) != child)
                        continue;
                if (serving)
                        drain(se, &buf);
                free(buf.mem);
                if (ready >= 0)
                        close(ready);
                return child_status(status);
        }
        free(buf.mem);
        if (ready >= 0)
                close(ready);
        if (child <= 0)
                return 0;
        kill(child, SIGTERM);
        return EXIT_RUN_FAILED;
}

/* --serve DIR: the stand-in on DIR in the host's mount namespace, for
 * services that bind DIR/cpu_dma_latency over the device; until SIGTERM.
 * Under systemd it says READY=1 once mounted and connected to the broker.
 * Only root's opens are served (mode 0600, and checked): a service of
 * another user cannot make requests as root through it. The server keeps
 * CAP_SYS_ADMIN alone, to unmount DIR when it stops. */
static int run_serve(standin *s, const char *dir, int sfd) {
        if (geteuid() != 0)
                return setup_fail(dir, "serving the stand-in for services needs root");
        int dfd = open_serve_dir(dir);
        if (dfd < 0)
                return EXIT_RUN_FAILED;
        char at[64]; /* mounted through the descriptor: whatever is renamed onto DIR now */
        snprintf(at, sizeof(at), "/proc/self/fd/%d", dfd);
        s->fuse = standin_fuse_new(s, "fsname=pmqos-standin,subtype=pmqos,allow_other,default_permissions");
        if (!s->fuse) {
                close(dfd);
                return setup_fail("cannot make the FUSE file system", "see above");
        }
        if (fuse_mount(s->fuse, at) < 0) {
                fuse_destroy(s->fuse);
                close(dfd);
                return setup_fail(dir, "cannot mount the FUSE file system");
        }
        int r = connect_broker(&s->backend.client);
        if (r == 0) {
                (void) pmqos_client_get_fd(s->backend.client);
                drop_capabilities(CAP_SYS_ADMIN);
                /* Type=notify: units ordered after this one find DIR/cpu_dma_latency to bind. */
                (void) sd_notify(0, "READY=1");
                r = run_loop(s, 0, sfd, -1, NULL);
        } else
                r = EXIT_RUN_FAILED;
        standin_backend_done(&s->backend);
        /* Detached here, where /proc/self/fd/N is dfd: libfuse's unmount may
         * run umount(8) (Debian 13's libfuse does), in whose process N is not
         * ours; the stale mount then refused the next start. */
        (void) umount2(at, MNT_DETACH);
        unmount_quietly(s->fuse); /* the connection closed; the mount is gone already */
        fuse_destroy(s->fuse);
        close(dfd);
        return r;
}

static int run_help(void) {
        printf("Usage: pmqosctl run [--reason TEXT] [--cpus LIST] [--clamp USEC] -- COMMAND [ARG…]\n"
               "       pmqosctl run [--reason TEXT] [--cpus LIST] [--clamp USEC] --serve DIR\n"
               "Run COMMAND with a stand-in /dev/cpu_dma_latency (and /dev/cpu_wakeup_latency\n"
               "where the kernel has it): each open of it is a request of the opening process\n"
               "to pmqosd (floored, limited and listed like any other), a 4-byte write sets\n"
               "its value (other writes are hexadecimal text, as the kernel takes them), a\n"
               "read gives the machine's value, the last close ends it.\n"
               "Exit status is COMMAND's; 125 when the stand-in cannot be set up, 126 when\n"
               "COMMAND cannot be run, 127 when it is not found.\n"
               "--cpus LIST: the requests bind these CPUs only (no wakeup stand-in then: it\n"
               "has no per-CPU form). --clamp USEC: a write stricter than USEC is raised to it.\n"
               "--serve DIR (root): serve DIR/cpu_dma_latency (and DIR/cpu_wakeup_latency) for\n"
               "services, which bind it over the device (BindPaths=); root's opens only.\n"
               "Until stopped.\n");
        return 0;
}

static const char *arg_serve;
static uint32_t *arg_cpus;
static size_t arg_n_cpus;
static int32_t arg_clamp;

static int run_parse(int argc, char *argv[], const char **ret_reason, char ***ret_command) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },        { "reason", required_argument, NULL, 'r' },
                { "serve", required_argument, NULL, 's' }, { "cpus", required_argument, NULL, 'c' },
                { "clamp", required_argument, NULL, 'C' }, {},
        };
        const char *cstate;
        int c;
        optind = 0;
        /* "+": options end at COMMAND, whose own options are its own. */
        while ((c = getopt_long(argc, argv, "+hr:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        return run_help() - 1;
                case 's':
                        if (optarg[0] != '/' || strlen(optarg) > 40)
                                return usage_error("run", "--serve takes an absolute path of at most 40 bytes");
                        arg_serve = optarg;
                        break;
                case 'c':
                        free(arg_cpus);
                        if (cpu_list_parse(optarg, &arg_cpus, &arg_n_cpus) < 0)
                                return usage_error("run", "invalid CPU list \"%s\"; give one like 0-3,8", optarg);
                        break;
                case 'C':
                        if (parse_usec_or_cstate("run", optarg, &arg_clamp, &cstate) != 0)
                                return EXIT_USAGE;
                        break;
                case 'r':
                        if (strlen(optarg) > 200)
                                return usage_error("run", "the reason is longer than 200 bytes");
                        *ret_reason = optarg;
                        break;
                default:
                        return bad_option("run", argc, argv);
                }
        if (arg_serve && optind < argc)
                return usage_error("run", "--serve runs no COMMAND");
        if (arg_serve)
                return 0;
        if (optind >= argc)
                return usage_error("run", "missing COMMAND (pmqosctl run [--reason TEXT] -- COMMAND [ARG…])");
        *ret_command = argv + optind;
        return 0;
}

int verb_run(int argc, char *argv[]) {
        static standin s; /* one per process: large, and FUSE's callbacks find it */
        const char *reason = NULL;
        char **command = NULL;
        int r = run_parse(argc, argv, &reason, &command);
        if (r || (!command && !arg_serve))
                return r < 0 ? 0 : EXIT_USAGE;

        sigset_t mask, old;
        run_signals(&mask);
        sigprocmask(SIG_BLOCK, &mask, &old); /* before the child exists: no SIGCHLD lost */
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0)
                return setup_fail("cannot watch signals", strerror(errno));

        run_setup setup = { .root = geteuid() == 0,
                            .wakeup = arg_n_cpus == 0 && access("/dev/cpu_wakeup_latency", F_OK) == 0,
                            .uid = geteuid(),
                            .gid = getegid() };
        s.uid = setup.uid;
        s.gid = setup.gid;
        s.wakeup = setup.wakeup; /* --serve too: only what the kernel has */
        s.backend.reason = reason;
        s.backend.cpus = arg_cpus;
        s.backend.n_cpus = arg_n_cpus;
        s.backend.clamp = arg_clamp;
        if (arg_serve) {
                r = run_serve(&s, arg_serve, sfd);
                close(sfd);
                return r;
        }
        const char *opts = setup.root ? "fsname=pmqos-standin,subtype=pmqos,allow_other,default_permissions"
                                      : "fsname=pmqos-standin,subtype=pmqos,default_permissions,auto_unmount";
        s.fuse = standin_fuse_new(&s, opts);
        if (!s.fuse)
                return setup_fail("cannot make the FUSE file system", "see above");
        /* The mount namespace first: unshare() wants a single thread. */
        r = mount_standin(&setup, s.fuse);
        if (r) {
                fuse_destroy(s.fuse);
                return r;
        }
        r = connect_broker(&s.backend.client);
        if (r == 0)
                (void) pmqos_client_get_fd(s.backend.client); /* served by run_loop(), no helper thread */

        /* Closed when the child runs COMMAND: then the directory can go. */
        int ready[2] = { -1, -1 };
        if (r == 0 && pipe2(ready, O_CLOEXEC) < 0)
                r = setup_fail("cannot make a pipe", strerror(errno));
        pid_t child = r ? -1 : fork();
        if (child == 0) {
                close(ready[0]);
                run_child(&setup, command, &old);
        }
        close(ready[1]);
        if (child < 0) {
                if (r == 0)
                        fprintf(stderr, "pmqosctl run: cannot start %s: %s\n", command[0], strerror(errno));
                close(ready[0]);
                if (setup.root)
                        (void) umount2(setup.dir, MNT_DETACH);
                r = EXIT_RUN_FAILED;
        } else {
                if (setup.root)
                        drop_capabilities(-1);
                r = run_loop(&s, child, sfd, ready[0], &setup);
        }
        close(sfd);
        standin_backend_done(&s.backend); /* requests of processes still alive go on until they end */
        if (setup.root)
                unmount_quietly(s.fuse);
        else
                fuse_unmount(s.fuse);
        fuse_destroy(s.fuse);
        rmdir(setup.dir);
        return r;
}
