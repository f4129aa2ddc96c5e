/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one Check runner of the unit tests (see unit.h). */

#include "unit.h"

#include <stdlib.h>

int unit_run(Suite *s, enum fork_status fork) {
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, fork);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
