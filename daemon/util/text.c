/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One pass, no locale: the rules are those of RFC 3629, applied to bytes. */

#include "util/text.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if the
 * bytes there are not one. */
static size_t utf8_sequence(const unsigned char *s, size_t n, uint32_t *ret_cp) {
        uint32_t cp;
        size_t len;

        if (s[0] < 0x80)
                len = 1, cp = s[0];
        else if (s[0] >= 0xc2 && s[0] <= 0xdf)
                len = 2, cp = s[0] & 0x1f;
        else if (s[0] >= 0xe0 && s[0] <= 0xef)
                len = 3, cp = s[0] & 0x0f;
        else if (s[0] >= 0xf0 && s[0] <= 0xf4)
                len = 4, cp = s[0] & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        /* Overlong forms, surrogates, beyond Unicode. */
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return 0;
        *ret_cp = cp;
        return len;
}

/* The first len bytes of s, less a last character that is not whole. */
size_t utf8_fit(const char *s, size_t len) {
        size_t start = len;
        while (start > 0 && ((unsigned char) s[start - 1] & 0xc0) == 0x80)
                start--; /* back over the continuation bytes at the end */
        if (start > 0) {
                unsigned char lead = (unsigned char) s[start - 1];
                size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
                if (start - 1 + need > len)
                        return start - 1;
        }
        return len;
}

bool utf8_is_valid(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *) s;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t k = utf8_sequence(p + i, len - i, &cp);
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

static bool is_control(uint32_t cp) {
        return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

char *text_clean(const char *s, size_t len, size_t max) {
        assert(s || len == 0);
        static const char ellipsis[] = "\xe2\x80\xa6"; /* … */
        const size_t ell = sizeof(ellipsis) - 1;
        const unsigned char *p = (const unsigned char *) s;
        size_t j = 0, cut = SIZE_MAX;

        if (max < 8)
                max = 8;
        /* Every input byte becomes at most 4 ("\xNN"). */
        if (len > (SIZE_MAX - 1) / 4)
                return NULL;
        char *out = malloc((4 * len > max ? 4 * len : max) + 1);
        if (!out)
                return NULL;

        for (size_t i = 0; i < len;) {
                char piece[16];
                size_t n = 0;
                uint32_t cp;
                size_t k = utf8_sequence(p + i, len - i, &cp);

                if (k == 0 || is_control(cp)) {
                        /* A byte of no valid sequence, or every byte of a control character. */
                        if (k == 0)
                                k = 1;
                        for (size_t b = 0; b < k; b++)
                                n += (size_t) snprintf(piece + n, sizeof(piece) - n, "\\x%02x", p[i + b]);
                } else {
                        memcpy(piece, p + i, k);
                        n = k;
                }
                /* Where the text ends, with the ellipsis, if it turns out too long:
                 * between two pieces, so no character or escape is cut in half. */
                if (cut == SIZE_MAX && j + n > max - ell)
                        cut = j;
                memcpy(out + j, piece, n);
                j += n;
                i += k;
        }
        if (j > max) {
                memcpy(out + cut, ellipsis, ell);
                j = cut + ell;
        }
        out[j] = 0;
        return out;
}
