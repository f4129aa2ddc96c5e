/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whatever bytes the bus socket holds, the gate's reading of them stays in
 * bounds: a message's size is 0 (more needed), an error, or at least its
 * fixed header and at most DBUS_MESSAGE_MAX; UNIX_FDS is read only from a
 * header that is all there. The same bytes as a bus address or a SASL line. */

#include <stdlib.h>
#include <string.h>

#include "util/dbus-wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int64_t n = dbus_message_size(data, size);
        if (n > 0 && (n < 16 || n > DBUS_MESSAGE_MAX))
                abort();
        if (size < 16 && n != 0)
                abort();
        uint32_t fds = 0;
        int r = dbus_message_unix_fds(data, size, &fds);
        if (r > 0 && n <= 0)
                abort();
        char sender[64];
        if (dbus_message_sender(data, size, sender, sizeof(sender)) > 0 && (n <= 0 || strlen(sender) >= sizeof(sender)))
                abort();

        char *text = malloc(size + 1), path[108];
        bool abstract;
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        if (dbus_address_unix_path(text, path, sizeof(path), &abstract) == 0 && strlen(path) >= sizeof(path))
                abort();
        (void) dbus_auth_line_is_last(text, size);
        free(text);
        return 0;
}
