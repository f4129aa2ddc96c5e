/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* systemd's grammar of a unit name, for pmqosctl route: its own small
 * library so that the fuzz target links it alone. */
#pragma once

#include <stdbool.h>

#define UNIT_NAME_MAX 255 /* systemd's, without the NUL */

/* Whether name is a unit name as systemd's unit_name_is_valid() takes one
 * (plain, instance or template): ASCII letters, digits and ":-_.\" with at
 * most one "@", neither first nor after the last dot; a known type after
 * the last dot, something before it; at most UNIT_NAME_MAX bytes. No "/",
 * so no path can be made of it. */
bool unit_name_valid(const char *name);
/* Whether name ends in a known unit type (".service", ".socket", …). */
bool unit_name_has_type(const char *name);
