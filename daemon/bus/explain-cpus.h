/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-CPU part of an explanation: Explain()'s "cpus", one entry per
 * online CPU, or ExplainFolded()'s "cpu_groups", one per set of identical CPUs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "core/core.h"
#include "sys/cpu-tables.h"
#include "sys/foreign-writes.h"

/* Opens "{sv}" with key and a variant of signature inside; close with explain_close_entry(). */
int explain_open_entry(sd_bus_message *reply, const char *key, const char *signature);
int explain_close_entry(sd_bus_message *reply);
/* Appends key: w's pid, comm, unit, value and when as a{sv}, empty for NULL. */
int explain_append_writer(sd_bus_message *reply, const char *key, const ForeignWriter *w);

/* Appends the "cpus" entry: every present CPU of tables (n of them, by CPU
 * number) under kernel, the device's global value. */
int explain_append_cpus(sd_bus_message *reply, const Core *c, int32_t kernel, const CpuTable *tables, uint32_t n);
/* Appends the "cpu_groups" entry: CPUs with equal bound, resume_latency,
 * foreign and C-state lists (name, latency, allowed, disabled) in one entry
 * each, the groups by their first CPU, usage and time summed. O(n log n). */
int explain_append_cpu_groups(sd_bus_message *reply, const Core *c, int32_t kernel, const CpuTable *tables, uint32_t n);
