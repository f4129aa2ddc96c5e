/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Linked with one layer's library whole and only the layers below it
 * (daemon/meson.build): it builds only if no layer calls up. */

int main(void) {
        return 0;
}
