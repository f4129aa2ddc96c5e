/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: pmqos-oci-hook's /etc/pmqos/oci-hook.conf. A refusal
 * says where, on one line, and leaves the setting as it was; an acceptance
 * allows the whole machine only where the text says MachineWide=allow. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oci-conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        OciConf c = { .machine_wide = false };
        char err[320] = "";
        int r = oci_conf_parse("fuzz.conf", (const char *) data, size, &c, err, sizeof(err));
        if (r == -EINVAL && (strncmp(err, "fuzz.conf", 9) != 0 || strchr(err, '\n')))
                abort();
        if (r < 0 && c.machine_wide)
                abort(); /* untouched on failure */
        if (r == 0 && c.machine_wide && !memmem(data, size, "allow", 5))
                abort();
        return 0;
}
