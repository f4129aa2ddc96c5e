/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who binds each CPU, for the ledger (sys/ledger.h): the bound the kernel
 * applies there is the lower of the device's value read back and the CPU's
 * pm_qos_resume_latency_us, and its holder is the request, floor, battery
 * floor or unit rule pmqosd gave it, or "external" when the kernel's value
 * is stricter than pmqosd's (another process holds the device) or the
 * CPU's file holds what pmqosd did not write. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "model/store.h"
#include "sys/cpu-sink.h"
#include "sys/ledger.h"
#include "sys/sink.h"

/* What the holders are told from: the core's parts (core/core.h). */
typedef struct LedgerFacts {
        const Store *store;
        const CpuSink *cpus;
        Sink *sink;         /* the device, read back */
        int32_t effective;  /* what the device was last given */
        int32_t floor;      /* the floor in force (core_floor()) */
        bool battery_floor; /* that floor is the battery floor */
} LedgerFacts;

/* Each CPU's holder and bound handed to the ledger, which reads counters
 * only where either changed what it charges. read_files: the per-CPU files
 * are read (someone asks); else pmqosd's own values stand for them (after
 * a commit). */
void ledger_holders_settle(Ledger *l, const LedgerFacts *f, bool read_files);
