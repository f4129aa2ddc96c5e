/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The stand-in file system: a directory holding cpu_dma_latency and
 * cpu_wakeup_latency, served with the kernel devices' semantics, one broker
 * request per open. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "standin-backend.h"

#define STANDIN_MAX_OPENS 1024 /* opens served at once, of both files; more: EMFILE */

struct fuse;

typedef struct standin_open {
        uint32_t cookie;
        pid_t pid;             /* the process that opened it */
        standin_device device; /* which file: the request's type */
        uint64_t written;      /* bytes written: how far FUSE moved the file offset */
        bool used;
} standin_open;

typedef struct standin {
        standin_backend backend;
        uid_t uid; /* the only user whose opens are served */
        gid_t gid;
        struct fuse *fuse;
        standin_open opens[STANDIN_MAX_OPENS];
        unsigned n_opens;
        bool said_refused; /* the broker's first refusal was said on stderr */
        bool wakeup;       /* cpu_wakeup_latency served: the kernel has the device (and no --cpus) */
} standin;

/* A FUSE file system (not mounted yet) for s; fuse_opts are the "-o" mount
 * options. NULL on failure (libfuse said why). */
struct fuse *standin_fuse_new(standin *s, const char *fuse_opts);
