/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state file: persistent requests, the floor and the per-CPU originals,
 * loaded at start and saved after each change through durable-file.c. */

#include "record/state-file.h"

#include <errno.h>
#include <stdlib.h>

#include "record/durable-file.h"

#define STATE_NAME "state"

int state_hand_over(const char *dir, uid_t uid, gid_t gid) {
        return durable_file_hand_over(dir, STATE_NAME, uid, gid);
}

int state_load(const char *dir, StateData *ret) {
        char err[256];
        char *buf = NULL;
        size_t len = 0;

        *ret = (StateData){ .floor = PMQOS_LATENCY_NONE };
        int r = durable_file_read(dir, STATE_NAME, STATE_FILE_MAX, &buf, &len);
        if (r == -ENOENT || r == -EBADMSG)
                return 0; /* nothing, or moved aside and said so */

        r = state_parse(buf, len, ret, err, sizeof(err));
        free(buf);
        if (r == -EBADMSG) {
                durable_file_move_aside(dir, STATE_NAME, err);
                return 0;
        }
        return r;
}

int state_save(const char *dir, const char *data, size_t len, bool durable) {
        return durable_file_write(dir, STATE_NAME, data, len, true, durable);
}
