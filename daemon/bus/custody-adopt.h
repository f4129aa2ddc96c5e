/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ForeignWrites=adopt: a value another process writes to a CPU's
 * pm_qos_resume_latency_us becomes that process's request on that CPU,
 * bound to it (a pidfd hold: it ends when the process exits), so it is
 * floored, listed, audited and aggregated like any other. */
#pragma once

#include "sys/foreign-writes.h"

typedef struct Manager Manager;

/* Adopts fw (a resume latency write): a new request of the writer, or its
 * adopted request on that CPU updated, or ended when it wrote "0" (no
 * constraint); then the file gets pmqosd's aggregate for that CPU back
 * (*ret_bring_back: 0 or a negative errno). A contested write, or one whose
 * value is unknown (FOREIGN_VALUE_UNKNOWN), is reported only: no request
 * changes and the file is left alone (no write loop with another daemon,
 * and a flood costs at most BURST_LIMIT changes per file and window). w is
 * the watch that saw it (for what the file held before). Returns 1 when a
 * new request was made, 0 otherwise, or a negative errno (the caller logs). */
int custody_adopt(Manager *m, ForeignWatch *w, const ForeignWrite *fw, int *ret_bring_back);
