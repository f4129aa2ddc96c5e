/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reference peers: what the bus charges for the signals of a change, and that plus the contract's work. */

#include "bench.h"

/* ---- the reference: what the bus charges for the signals of a change ---- */

static int reference_device = -1, reference_record = -1; /* the working reference's own */

static void reference_work(int32_t value, const char *what) {
        char line[256];
        int32_t v = value < 0 ? LATENCY_NONE_KERNEL : value;
        int n = snprintf(line, sizeof(line), "%s cookie=1 type=cpu_dma value=%d uid=0 pid=0 exec=bench reason=\n", what,
                         (int) value);
        if (reference_device < 0 || pwrite(reference_device, &v, sizeof(v), 0) != sizeof(v) ||
            write(reference_record, line, (size_t) n) != n)
                _exit(1);
}

static int reference_emit(sd_bus *bus, int32_t value) {
        static const char *const paths[] = { PATH, PMQOS_UPOWER_POLICY_PATH };
        sd_bus_message *m = NULL;
        int r = 0;

        for (size_t i = 0; i < 2 && r >= 0; i++) {
                r = sd_bus_emit_signal(bus, paths[i], QOS, "LatencyChanged", "si", "cpu_dma", value);
                if (r >= 0)
                        r = sd_bus_emit_signal(bus, paths[i], QOS, "RequestsChanged", NULL);
        }
        if (r >= 0)
                r = sd_bus_message_new_signal(bus, &m, PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged");
        if (r >= 0)
                r = sd_bus_message_append(m, "sa{sv}as", NATIVE, 2, "EffectiveLatency", "i", value, "RequestCount", "u",
                                          (uint32_t) (value >= 0), 0);
        if (r >= 0)
                r = sd_bus_send(bus, m, NULL);
        sd_bus_message_unref(m);
        return r;
}

/* Who holds "requests" at the reference, and how many: a departure of a
 * holder is answered as pmqosd answers it (hsearch(): one table, in the
 * reference's own process; data is the count). */
static unsigned reference_holders;

static ENTRY *reference_holder(const char *sender) {
        ENTRY e = { .key = (char *) sender }, *found = hsearch(e, FIND);
        if (found)
                return found;
        e.key = strdup(sender);
        return e.key ? hsearch(e, ENTER) : NULL;
}

static void reference_count(const char *sender, int delta) {
        ENTRY *h = reference_holder(sender);
        if (!h)
                return;
        intptr_t n = (intptr_t) h->data;
        if (n + delta < 0)
                return;
        if (n == 0 && delta > 0)
                reference_holders++;
        else if (n + delta == 0)
                reference_holders--;
        h->data = (void *) (n + delta);
}

/* RequestsChanged at both paths and PropertiesChanged (RequestCount) for
 * each departed holder, as the contract has pmqosd tell a departure; the
 * last one's also changes the effective value: LatencyChanged at both, and
 * EffectiveLatency in its PropertiesChanged. */
static int reference_departed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        static const char *const paths[] = { PATH, PMQOS_UPOWER_POLICY_PATH };
        const char *name, *old_owner, *new_owner;
        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || new_owner[0])
                return 0;
        ENTRY e = { .key = (char *) name }, *found = hsearch(e, FIND);
        if (!found || !found->data)
                return 0;
        found->data = NULL;
        sd_bus *bus = sd_bus_message_get_bus(m);
        if (--reference_holders == 0)
                return reference_emit(bus, -1);
        int r = 0;
        for (size_t i = 0; i < 2 && r >= 0; i++)
                r = sd_bus_emit_signal(bus, paths[i], QOS, "RequestsChanged", NULL);
        sd_bus_message *pc = NULL;
        if (r >= 0)
                r = sd_bus_message_new_signal(bus, &pc, PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged");
        if (r >= 0)
                r = sd_bus_message_append(pc, "sa{sv}as", NATIVE, 1, "RequestCount", "u", reference_holders, 0);
        if (r >= 0)
                r = sd_bus_send(bus, pc, NULL);
        sd_bus_message_unref(pc);
        return r;
}

static int reference_request(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *type;
        int32_t value;
        int persistent;
        int r = sd_bus_message_read(m, "sib", &type, &value, &persistent);
        if (r < 0)
                return r;
        reference_count(sd_bus_message_get_sender(m), +1);
        if (reference_record >= 0)
                reference_work(value, "add");
        r = sd_bus_reply_method_return(m, "u", (uint32_t) 1);
        if (r < 0)
                return r;
        return reference_emit(sd_bus_message_get_bus(m), value);
}

static int reference_get_latency(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *type;
        int r = sd_bus_message_read(m, "s", &type);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, "i", (int32_t) -1);
}

static int reference_cancel(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        uint32_t cookie;
        int r = sd_bus_message_read(m, "u", &cookie);
        if (r < 0)
                return r;
        reference_count(sd_bus_message_get_sender(m), -1);
        if (reference_record >= 0)
                reference_work(-1, "remove");
        r = sd_bus_reply_method_return(m, NULL);
        if (r < 0)
                return r;
        return reference_emit(sd_bus_message_get_bus(m), -1);
}

/* The native Update (throughput's workers use it): the change of a request's
 * value, told like any change. */
static int reference_update(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        uint32_t cookie;
        int32_t value;
        int r = sd_bus_message_read(m, "ui", &cookie, &value);
        if (r < 0)
                return r;
        if (reference_record >= 0)
                reference_work(value, "value");
        r = sd_bus_reply_method_return(m, NULL);
        if (r < 0)
                return r;
        return reference_emit(sd_bus_message_get_bus(m), value);
}

static const sd_bus_vtable reference_native_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Update", "ui", "", reference_update, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

static const sd_bus_vtable reference_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("RequestLatency", "sib", "u", reference_request, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("CancelRequest", "u", "", reference_cancel, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetLatency", "s", "i", reference_get_latency, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

/* The reference peer under name; with work (the device and a record file),
 * the working one. Returns its pid once it answers. */
static pid_t start_reference_as(const char *name, const char *device) {
        pid_t pid = fork();
        if (pid < 0)
                die("fork", errno);
        if (pid == 0) {
                sd_bus *bus = NULL;
                if (device) {
                        char path[400];
                        snprintf(path, sizeof(path), "%s/reference-record", runtime_dir);
                        reference_device = open(device, O_RDWR | O_CLOEXEC);
                        reference_record = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                        if (reference_device < 0 || reference_record < 0)
                                _exit(1);
                }
                if (!hcreate(1u << 17) || sd_bus_open_system(&bus) < 0 ||
                    sd_bus_add_object_vtable(bus, NULL, PATH, QOS, reference_vtable, NULL) < 0 ||
                    sd_bus_add_object_vtable(bus, NULL, PATH, NATIVE, reference_native_vtable, NULL) < 0 ||
                    sd_bus_add_match(bus, NULL,
                                     "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                     "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''",
                                     reference_departed, NULL) < 0 ||
                    sd_bus_request_name(bus, name, 0) < 0)
                        _exit(1);
                for (;;) {
                        int r = sd_bus_process(bus, NULL);
                        if (r < 0)
                                _exit(1);
                        if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
                                _exit(1);
                }
        }
        sd_bus *bus = connect_bus();
        for (int i = 0; i < 1000; i++) {
                if (sd_bus_call_method(bus, name, PATH, "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, "") >= 0) {
                        sd_bus_flush_close_unref(bus);
                        return pid;
                }
                usleep(10000);
        }
        die("the reference peer did not come up", ETIMEDOUT);
        return -1;
}

void start_reference(const Config *c) {
        reference_pid = start_reference_as(REFERENCE_NAME, NULL);
        reference_work_pid = start_reference_as(REFERENCE_WORK_NAME, c->device);
}
