/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /etc/pmqos/oci-hook.conf: what the administrator lets containers ask for.
 * Pure parsing, fuzzed (tests/fuzz/fuzz-oci-conf.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define OCI_CONF_PATH "/etc/pmqos/oci-hook.conf"
#define OCI_CONF_ENV "PMQOS_OCI_HOOK_CONF" /* another path, for tests */
#define OCI_CONF_MAX (64u * 1024u)

typedef struct OciConf {
        bool machine_wide; /* [Hook] MachineWide=allow; deny by default */
} OciConf;

/* Parses text[0..len) of path: "[Hook]" and "MachineWide=deny|allow", "#"
 * and ";" comments. *ret is set only on success. 0, or -EINVAL ("path:line:
 * …" in err), -ENOMEM. */
int oci_conf_parse(const char *path, const char *text, size_t len, OciConf *ret, char *err, size_t err_size);
