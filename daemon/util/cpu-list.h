/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parses CPU lists as the kernel prints them: "0-3,8,10-11". */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define CPU_LIST_MAX_CPU 8191u
#define CPU_LIST_MAX_ENTRIES 1024u

/* Returns 0 with a sorted, de-duplicated array in *ret (free() it), or -EINVAL
 * (bad syntax, reversed range, CPU above CPU_LIST_MAX_CPU, too many) or -ENOMEM. */
int cpu_list_parse(const char *s, uint32_t **ret, size_t *ret_n);
