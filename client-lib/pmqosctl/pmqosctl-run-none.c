// SPDX-License-Identifier: LGPL-2.1-or-later
/* pmqosctl run, in a build without libfuse3: says so. */

#include <stdio.h>

#include "pmqosctl-cli.h"

int verb_run(int argc, char *argv[]) {
        (void) argc, (void) argv;
        fprintf(stderr, "pmqosctl run: cannot set up the stand-in device: pmqosctl was built without libfuse3\n");
        return 125;
}
