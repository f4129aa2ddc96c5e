/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A change asked for over the bus, carried through its stages: know the
 * caller → authorize → act and reply. Each stage may wait without blocking. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "auth.h"
#include "client.h"
#include "manager.h"

typedef enum OpKind {
        OP_REQUEST,
        OP_UPDATE,
        OP_CANCEL,
        OP_SET_FLOOR,
} OpKind;

typedef struct Op {
        Manager *manager;
        sd_bus_message *message;
        OpKind kind;
        Client *client;
        ClientWaiter waiter;
        AuthQuery *auth_query;
        bool charged_uid;       /* counted in the caller's UidPending */
        bool holds_interactive; /* the caller's one interactive check */

        /* Arguments, validated before the op starts. */
        QosType type;
        int32_t value;
        uint32_t cookie;
        bool persistent;
        char *reason;
        uint64_t timeout_usec; /* 0: none */
        uint32_t *cpus;
        size_t n_cpus;
} Op;

Op *op_new(Manager *m, sd_bus_message *message, OpKind kind);
Op *op_free(Op *op);

/* Takes ownership of op and sees it through; replies to the caller at the end.
 * Returns what a bus method handler returns. */
int op_start(Op *op);
