/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The OCI state and config.json through json-c: only the fields the hook
 * uses are looked at, each checked for its type; anything else is ignored. */

#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci-state.h"

int oci_error(char *err, size_t size, int errnum, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
        return errnum;
}

static json_object *parse_object(const char *text, size_t len, const char *what, char *err, size_t size) {
        if (len > OCI_JSON_MAX) {
                oci_error(err, size, -EINVAL, "%s is larger than %u bytes", what, OCI_JSON_MAX);
                return NULL;
        }
        if (memchr(text, 0, len)) {
                oci_error(err, size, -EINVAL, "%s holds a NUL byte", what);
                return NULL;
        }
        json_tokener *tok = json_tokener_new_ex(32);
        if (!tok) {
                oci_error(err, size, -EINVAL, "out of memory");
                return NULL;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        json_object *o = json_tokener_parse_ex(tok, text, (int) len);
        enum json_tokener_error e = json_tokener_get_error(tok);
        size_t used = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!o || e != json_tokener_success) {
                json_object_put(o);
                oci_error(err, size, -EINVAL, "%s is not valid JSON (%s)", what,
                          e == json_tokener_continue ? "cut short" : json_tokener_error_desc(e));
                return NULL;
        }
        while (used < len && strchr(" \t\r\n", text[used]))
                used++;
        if (used != len || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                oci_error(err, size, -EINVAL, "%s is not one JSON object", what);
                return NULL;
        }
        return o;
}

/* A string member: 0 (absent: *ret untouched), 1 (copied), or -EINVAL. */
static int get_string(json_object *o, const char *key, char **ret, char *err, size_t size) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return oci_error(err, size, -EINVAL, "\"%s\" is not a string", key);
        char *copy = strdup(json_object_get_string(v));
        if (!copy)
                return oci_error(err, size, -EINVAL, "out of memory");
        free(*ret);
        *ret = copy;
        return 1;
}

static json_object *get_path(json_object *o, const char *const *keys) {
        for (; o && *keys; keys++)
                if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, *keys, &o))
                        return NULL;
        return o;
}

static int read_annotations(json_object *root, OciState *s, bool only_missing, char *err, size_t size) {
        json_object *a;
        if (!json_object_object_get_ex(root, "annotations", &a) || json_object_is_type(a, json_type_null))
                return 0;
        if (!json_object_is_type(a, json_type_object))
                return oci_error(err, size, -EINVAL, "\"annotations\" is not an object");
        struct {
                const char *key;
                char **field;
        } map[] = {
                { OCI_ANN_LATENCY, &s->latency },
                { OCI_ANN_CPUS, &s->cpus },
                { OCI_ANN_REQUIRED, &s->required },
                { OCI_ANN_CRIO, &s->crio },
                { "io.kubernetes.pod.namespace", &s->pod_namespace },
                { "io.kubernetes.pod.name", &s->pod_name },
                { "io.kubernetes.container.name", &s->container_name },
                { "io.kubernetes.cri.sandbox-namespace", &s->cri_namespace },
                { "io.kubernetes.cri.sandbox-name", &s->cri_pod },
                { "io.kubernetes.cri.container-name", &s->cri_container },
                { OCI_ANN_CRI_TYPE, &s->cri_type },
                { OCI_ANN_CRIO_TYPE, &s->crio_type },
        };
        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
                if (only_missing && *map[i].field)
                        continue;
                int r = get_string(a, map[i].key, map[i].field, err, size);
                if (r < 0)
                        return r;
        }
        return 0;
}

static bool id_valid(const char *id) {
        size_t n = strlen(id);
        return n > 0 && n <= OCI_ID_MAX &&
               strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-") == n;
}

int oci_state_parse(const char *text, size_t len, OciState *ret, char *err, size_t size) {
        *ret = (OciState){ 0 };
        json_object *root = parse_object(text, len, "the OCI state", err, size);
        if (!root)
                return -EINVAL;
        int r = get_string(root, "id", &ret->id, err, size);
        if (r == 0)
                r = oci_error(err, size, -EINVAL, "the OCI state has no \"id\"");
        else if (r > 0 && !id_valid(ret->id))
                r = oci_error(err, size, -EINVAL, "the container id is not 1 to %u of [A-Za-z0-9_.+-]", OCI_ID_MAX);
        if (r >= 0)
                r = get_string(root, "bundle", &ret->bundle, err, size);
        if (r >= 0)
                r = get_string(root, "status", &ret->status, err, size);
        json_object *pid;
        if (r >= 0 && json_object_object_get_ex(root, "pid", &pid) && !json_object_is_type(pid, json_type_null)) {
                int64_t v = json_object_get_int64(pid);
                if (!json_object_is_type(pid, json_type_int) || v < 0 || v > (1 << 22))
                        r = oci_error(err, size, -EINVAL, "\"pid\" is not a process id");
                else
                        ret->pid = (int) v;
        }
        if (r >= 0)
                r = read_annotations(root, ret, false, err, size);
        json_object_put(root);
        if (r < 0)
                oci_state_done(ret);
        return r < 0 ? r : 0;
}

int oci_config_parse(const char *text, size_t len, OciState *s, char **ret_cpus, char *err, size_t size) {
        *ret_cpus = NULL;
        json_object *root = parse_object(text, len, "config.json", err, size);
        if (!root)
                return -EINVAL;
        int r = read_annotations(root, s, true, err, size);
        json_object *cpu = get_path(root, (const char *const[]){ "linux", "resources", "cpu", NULL });
        if (r >= 0 && cpu && json_object_is_type(cpu, json_type_object))
                r = get_string(cpu, "cpus", ret_cpus, err, size);
        json_object_put(root);
        if (r < 0) {
                free(*ret_cpus);
                *ret_cpus = NULL;
        }
        return r < 0 ? r : 0;
}

void oci_state_done(OciState *s) {
        char **all[] = { &s->id,
                         &s->status,
                         &s->bundle,
                         &s->latency,
                         &s->cpus,
                         &s->required,
                         &s->crio,
                         &s->pod_namespace,
                         &s->pod_name,
                         &s->container_name,
                         &s->cri_namespace,
                         &s->cri_pod,
                         &s->cri_container,
                         &s->cri_type,
                         &s->crio_type };
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
                free(*all[i]);
                *all[i] = NULL;
        }
}
