/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every Check unit test's main() ends with: run the suite, exit with
 * the verdict. */
#pragma once

#include <check.h>

/* Runs every test of s, each in a child unless $CK_FORK=no says otherwise
 * (CK_FORK_GETENV), or all in this process (CK_NOFORK: leak checkers see
 * everything); frees s; returns EXIT_SUCCESS or EXIT_FAILURE. */
int unit_run(Suite *s, enum fork_status fork);
