/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "util/dbus-wire.h"

static uint32_t read_u32(const uint8_t *p, bool big_endian) {
        return big_endian ? (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3]
                          : (uint32_t) p[3] << 24 | (uint32_t) p[2] << 16 | (uint32_t) p[1] << 8 | p[0];
}

/* Fixed header: byte order, type, flags, version, body length, serial,
 * then the header fields' array length; the fields end on 8 bytes. */
int64_t dbus_message_size(const uint8_t *p, size_t n) {
        if (n < 16)
                return 0;
        if ((p[0] != 'l' && p[0] != 'B') || p[3] != 1)
                return -EBADMSG;
        bool big = p[0] == 'B';
        uint64_t fields = read_u32(p + 12, big), body = read_u32(p + 4, big);
        uint64_t size = 16 + ((fields + 7) & ~UINT64_C(7)) + body;
        return size > DBUS_MESSAGE_MAX ? -EBADMSG : (int64_t) size;
}

static bool starts_with_word(const char *line, size_t len, const char *word) {
        size_t w = strlen(word);
        return len >= w && memcmp(line, word, w) == 0 && (len == w || line[w] == ' ');
}

bool dbus_auth_line_is_last(const char *line, size_t len) {
        return starts_with_word(line, len, "AGREE_UNIX_FD") || starts_with_word(line, len, "ERROR") ||
               starts_with_word(line, len, "REJECTED");
}

static int hex_digit(char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
}

/* value[0..len) unescaped into ret: 0, or -EINVAL. */
static int unescape(const char *value, size_t len, char *ret, size_t size) {
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                char c = value[i];
                if (c == '%') {
                        int hi = i + 2 < len ? hex_digit(value[i + 1]) : -1;
                        int lo = i + 2 < len ? hex_digit(value[i + 2]) : -1;
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char) (hi << 4 | lo);
                        i += 2;
                }
                if (c == '\0' || o + 1 >= size)
                        return -EINVAL;
                ret[o++] = c;
        }
        if (o == 0)
                return -EINVAL;
        ret[o] = '\0';
        return 0;
}

/* One "unix:k=v,k=v" entry, [s, end). */
static int unix_entry(const char *s, const char *end, char *ret, size_t size, bool *ret_abstract) {
        if ((size_t) (end - s) < 5 || memcmp(s, "unix:", 5) != 0)
                return -EINVAL;
        for (const char *k = s + 5; k < end;) {
                const char *comma = memchr(k, ',', (size_t) (end - k)), *stop = comma ? comma : end;
                const char *eq = memchr(k, '=', (size_t) (stop - k));
                if (eq) {
                        bool path = eq - k == 4 && memcmp(k, "path", 4) == 0;
                        bool abstract = eq - k == 8 && memcmp(k, "abstract", 8) == 0;
                        if ((path || abstract) && unescape(eq + 1, (size_t) (stop - eq - 1), ret, size) == 0) {
                                *ret_abstract = abstract;
                                return 0;
                        }
                }
                k = stop + 1;
        }
        return -EINVAL;
}

int dbus_address_unix_path(const char *address, char *ret, size_t size, bool *ret_abstract) {
        for (const char *s = address; s && *s;) {
                const char *semi = strchr(s, ';'), *end = semi ? semi : s + strlen(s);
                if (unix_entry(s, end, ret, size, ret_abstract) == 0)
                        return 0;
                s = semi ? semi + 1 : NULL;
        }
        return -EINVAL;
}

typedef struct Reader {
        const uint8_t *p;
        size_t pos, end;
        bool big;
} Reader;

static int align_of(char c) {
        return strchr("ygv", c) ? 1 : strchr("nq", c) ? 2 : strchr("xtd({", c) ? 8 : 4;
}

static bool reader_align(Reader *r, size_t a) {
        size_t to = (r->pos + a - 1) & ~(a - 1);
        if (to > r->end)
                return false;
        r->pos = to;
        return true;
}

static bool reader_skip(Reader *r, uint64_t n) {
        if (n > r->end - r->pos)
                return false;
        r->pos += (size_t) n;
        return true;
}

static bool reader_u32(Reader *r, uint32_t *ret) {
        if (!reader_align(r, 4) || r->end - r->pos < 4)
                return false;
        *ret = read_u32(r->p + r->pos, r->big);
        r->pos += 4;
        return true;
}

/* Past one complete type of the signature at *sig. */
static bool signature_skip(const char **sig, int depth) {
        char c = *(*sig)++;
        if (depth > 64 || c == '\0')
                return false;
        if (c == 'a')
                return signature_skip(sig, depth + 1);
        if (c == '(' || c == '{') {
                char close = c == '(' ? ')' : '}';
                while (**sig != close)
                        if (!signature_skip(sig, depth + 1))
                                return false;
                (*sig)++;
                return true;
        }
        return strchr("ybnqiuxtdhsogv", c) != NULL;
}

static bool value_skip(Reader *r, const char **sig, int depth);

/* A signature value ("g", the variant's): its text into sig (NUL-ended). */
static bool reader_signature(Reader *r, char sig[static 256]) {
        if (r->pos >= r->end)
                return false;
        size_t len = r->p[r->pos++];
        if (len + 1 > r->end - r->pos || r->p[r->pos + len] != '\0')
                return false;
        memcpy(sig, r->p + r->pos, len + 1);
        r->pos += len + 1;
        return strlen(sig) == len;
}

static bool container_skip(Reader *r, const char **sig, char c, int depth) {
        if (c == 'a') {
                uint32_t len;
                const char *element = *sig;
                return reader_u32(r, &len) && signature_skip(sig, depth + 1) &&
                       reader_align(r, (size_t) align_of(*element)) && reader_skip(r, len);
        }
        if (c == 'v') {
                char inner[256];
                const char *s = inner;
                return reader_signature(r, inner) && value_skip(r, &s, depth + 1) && *s == '\0';
        }
        char close = c == '(' ? ')' : '}';
        if (!reader_align(r, 8))
                return false;
        while (**sig != close)
                if (!value_skip(r, sig, depth + 1))
                        return false;
        (*sig)++;
        return true;
}

/* Past one value of the complete type at *sig, and past that type. */
static bool value_skip(Reader *r, const char **sig, int depth) {
        char c = *(*sig)++;
        uint32_t len;
        if (depth > 64)
                return false;
        switch (c) {
        case 'y':
                return reader_skip(r, 1);
        case 'n':
        case 'q':
                return reader_align(r, 2) && reader_skip(r, 2);
        case 'b':
        case 'i':
        case 'u':
        case 'h':
                return reader_align(r, 4) && reader_skip(r, 4);
        case 'x':
        case 't':
        case 'd':
                return reader_align(r, 8) && reader_skip(r, 8);
        case 's':
        case 'o':
                return reader_u32(r, &len) && reader_skip(r, (uint64_t) len + 1);
        case 'g': {
                char s[256];
                return reader_signature(r, s);
        }
        case 'a':
        case 'v':
        case '(':
        case '{':
                return container_skip(r, sig, c, depth);
        default:
                return false;
        }
}

/* The header field code of type sig: 1 with *r at its value, 0 while the
 * header is not all there or when there is none (*ret_found false), or
 * -EBADMSG. */
static int find_field(const uint8_t *p, size_t n, uint8_t code, const char *sig, Reader *r, bool *ret_found) {
        int64_t size = dbus_message_size(p, n);
        *ret_found = false;
        if (size <= 0)
                return (int) size;
        *r = (Reader){ .p = p, .pos = 16, .big = p[0] == 'B' };
        uint64_t end = 16 + (uint64_t) read_u32(p + 12, r->big);
        if (end > n)
                return 0;
        r->end = (size_t) end;
        while (r->pos < r->end) {
                char field_sig[256];
                const char *s = field_sig;
                if (!reader_align(r, 8) || r->pos >= r->end)
                        break;
                uint8_t c = p[r->pos++];
                if (!reader_signature(r, field_sig))
                        return -EBADMSG;
                if (c == code && strcmp(field_sig, sig) == 0) {
                        *ret_found = true;
                        return 1;
                }
                if (!value_skip(r, &s, 0) || *s != '\0')
                        return -EBADMSG;
        }
        return 1;
}

int dbus_message_unix_fds(const uint8_t *p, size_t n, uint32_t *ret) {
        Reader r;
        bool found;
        int k = find_field(p, n, 9, "u", &r, &found);
        *ret = 0;
        if (k <= 0 || !found)
                return k;
        return reader_u32(&r, ret) ? 1 : -EBADMSG;
}

int dbus_message_sender(const uint8_t *p, size_t n, char *ret, size_t size) {
        Reader r;
        bool found;
        uint32_t len;
        int k = find_field(p, n, 7, "s", &r, &found);
        if (k <= 0)
                return k;
        if (!found)
                return -ENOENT;
        /* In 64 bits: a length of 2^32 - 1 plus its NUL must not wrap to 0. */
        if (!reader_u32(&r, &len) || (uint64_t) len + 1 > r.end - r.pos || (uint64_t) len + 1 > size ||
            p[r.pos + len] != '\0' || memchr(p + r.pos, '\0', len))
                return -EBADMSG;
        memcpy(ret, p + r.pos, len + 1);
        return 1;
}
