/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of the one emitter (publish.c) on a private dbus-daemon, a
 * listener counting what it sends, the core on a stand-in device: a real
 * transaction's ChangeSet sent as LatencyChanged and RequestsChanged from
 * both object paths and one PropertiesChanged with the values; nothing
 * before the bus is attached; a burst (input waiting in the bus socket)
 * told once in PropertiesChanged when it is over; the deadline timer armed
 * at the earliest deadline, its expiry ending the request and telling it;
 * STATUS= at once, then at most once a second, saying what holds then. */

#include "bus-fixture.h"

#include <sys/socket.h>
#include <sys/un.h>

#include "bus/publish.h"
#include "dbus/contract.h"
#include "util/clock.h"

static TestBus tb;
static sd_event *event;
static sd_bus *daemon_bus, *listener;
static Clients clients;
static Core core;
static Publisher pub;
static char dir[64];

typedef struct Seen {
        unsigned latency[2], requests[2], properties; /* [0] /org/freedesktop/PMQoS, [1] UPower's path */
        int32_t last_latency;
        int32_t effective;
        uint32_t count;
        bool has_effective, has_count;
} Seen;
static Seen seen;

static int path_index(sd_bus_message *m) {
        return strcmp(sd_bus_message_get_path(m), PMQOS_OBJECT_PATH) == 0 ? 0 : 1;
}

static int on_latency(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        const char *type;
        ck_assert_int_ge(sd_bus_message_read(m, "si", &type, &seen.last_latency), 0);
        ck_assert_str_eq(type, "cpu_dma");
        seen.latency[path_index(m)]++;
        return 0;
}

static int on_requests(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        seen.requests[path_index(m)]++;
        return 0;
}

static int on_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        const char *iface, *name;
        ck_assert_str_eq(sd_bus_message_get_path(m), PMQOS_OBJECT_PATH);
        ck_assert_int_ge(sd_bus_message_read(m, "s", &iface), 0);
        ck_assert_str_eq(iface, PMQOS_NATIVE_INTERFACE);
        ck_assert_int_ge(sd_bus_message_enter_container(m, 'a', "{sv}"), 0);
        while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
                ck_assert_int_ge(sd_bus_message_read(m, "s", &name), 0);
                if (strcmp(name, "EffectiveLatency") == 0) {
                        ck_assert_int_ge(sd_bus_message_read(m, "v", "i", &seen.effective), 0);
                        seen.has_effective = true;
                } else if (strcmp(name, "RequestCount") == 0) {
                        ck_assert_int_ge(sd_bus_message_read(m, "v", "u", &seen.count), 0);
                        seen.has_count = true;
                } else
                        ck_assert_int_ge(sd_bus_message_skip(m, "v"), 0);
                ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
        }
        seen.properties++;
        return 0;
}

static void start_core(void) {
        char device[128], state[128], sysfs[128];
        snprintf(dir, sizeof(dir), "%s", unit_make_dir("publish"));
        snprintf(device, sizeof(device), "%s/device", dir);
        snprintf(state, sizeof(state), "%s/state", dir);
        snprintf(sysfs, sizeof(sysfs), "%s/sys", dir);
        unit_write_file(dir, "device", "");
        unit_write_file(dir, "sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "0\n");
        CoreConfig config = { .device = device,
                              .state_dir = state,
                              .sysfs_root = sysfs,
                              .state_owner = geteuid(),
                              .default_floor = PMQOS_LATENCY_NONE,
                              .battery_floor = PMQOS_LATENCY_NONE,
                              .seed = 42 };
        ChangeSet changes;
        int64_t now = now_realtime_usec();
        ck_assert_int_eq(core_init(&core, &config), 0);
        ck_assert_int_eq(core_load(&core, now), 0);
        ck_assert_int_eq(core_start(&core, NULL, NULL, now, &changes), 0);
}

static void setup(void) {
        unsetenv("NOTIFY_SOCKET");
        test_bus_start(&tb);
        ck_assert_int_ge(sd_event_new(&event), 0);
        daemon_bus = test_bus_connect(&tb);
        listener = test_bus_connect(&tb);
        ck_assert_int_ge(sd_bus_attach_event(daemon_bus, event, 0), 0);
        ck_assert_int_ge(sd_bus_attach_event(listener, event, 0), 0);
        ck_assert_int_ge(sd_bus_match_signal(listener, NULL, NULL, NULL, PMQOS_QOS_INTERFACE, "LatencyChanged",
                                             on_latency, NULL),
                         0);
        ck_assert_int_ge(sd_bus_match_signal(listener, NULL, NULL, NULL, PMQOS_QOS_INTERFACE, "RequestsChanged",
                                             on_requests, NULL),
                         0);
        ck_assert_int_ge(sd_bus_match_signal(listener, NULL, NULL, NULL, "org.freedesktop.DBus.Properties",
                                             "PropertiesChanged", on_properties, NULL),
                         0);
        start_core();
        clients_init(&clients, 100, NULL, NULL);
        seen = (Seen){ 0 };
}

static void teardown(void) {
        publisher_done(&pub);
        clients_done(&clients);
        core_done(&core);
        sd_bus_flush_close_unref(listener);
        sd_bus_flush_close_unref(daemon_bus);
        event = sd_event_unref(event);
        test_bus_stop(&tb);
        unit_remove_dir(dir);
}

static void init_publisher(void) {
        ck_assert_int_ge(publisher_init(&pub, event, &core, &clients), 0);
        publisher_attach_bus(&pub, daemon_bus);
}

/* A real transaction: a request of value (deadline expires, or 0), owned by nobody. */
static Request *add_request(int32_t value, int64_t expires, ChangeSet *changes) {
        Request *r = request_new(&core.store);
        ck_assert_ptr_nonnull(r);
        r->value = value;
        r->created_usec = now_realtime_usec();
        r->expires_usec = expires;
        ck_assert_int_eq(core_add(&core, r, NULL, changes), 0);
        return r;
}

START_TEST(test_change_told_from_both_paths) {
        init_publisher();
        ChangeSet changes;
        add_request(20, 0, &changes);
        ck_assert(changes.latency && changes.requests && changes.count);
        publish(&pub, &changes);
        test_event_run_until_count(event, &seen.properties, 1);
        test_event_run_until_count(event, &seen.requests[1], 1);
        ck_assert_uint_eq(seen.latency[0], 1);
        ck_assert_uint_eq(seen.latency[1], 1);
        ck_assert_int_eq(seen.last_latency, 20);
        ck_assert_uint_eq(seen.requests[0], 1);
        ck_assert(seen.has_effective && seen.has_count);
        ck_assert_int_eq(seen.effective, 20);
        ck_assert_uint_eq(seen.count, 1);
        ck_assert_int_eq(unit_read_device(core.sink.path), 20); /* told after the kernel has it */
}
END_TEST

/* Before the bus is attached, nothing goes out (what changed is told by the first Get). */
START_TEST(test_nothing_before_the_bus) {
        ck_assert_int_ge(publisher_init(&pub, event, &core, &clients), 0);
        ChangeSet changes;
        add_request(30, 0, &changes);
        publish(&pub, &changes);
        publisher_attach_bus(&pub, daemon_bus);
        add_request(10, 0, &changes);
        publish(&pub, &changes);
        test_event_run_until_count(event, &seen.properties, 1);
        ck_assert_uint_eq(seen.latency[0], 1); /* the second change only */
        ck_assert_int_eq(seen.last_latency, 10);
        ck_assert_uint_eq(seen.count, 2);
}
END_TEST

/* Input waits in the daemon's bus socket: the changes are a burst, and
 * PropertiesChanged says once, when it is over, what holds then. */
START_TEST(test_burst_told_once) {
        init_publisher();
        sd_bus_message *m = NULL;
        ck_assert_int_ge(sd_bus_message_new_signal(listener, &m, "/", "org.freedesktop.PMQoS.Test", "Poke"), 0);
        ck_assert_int_ge(sd_bus_message_set_destination(m, unique_name(daemon_bus)), 0);
        ck_assert_int_ge(sd_bus_send(listener, m, NULL), 0);
        sd_bus_message_unref(m);
        ck_assert_int_ge(sd_bus_flush(listener), 0);
        struct pollfd pfd = { .fd = sd_bus_get_fd(daemon_bus), .events = POLLIN };
        ck_assert_int_eq(poll(&pfd, 1, 10 * 1000), 1); /* in the socket, not read */
        ChangeSet changes;
        add_request(50, 0, &changes);
        publish(&pub, &changes);
        add_request(40, 0, &changes);
        publish(&pub, &changes);
        test_event_run_until_count(event, &seen.properties, 1);
        test_event_run_until_count(event, &seen.latency[1], 2);
        ck_assert_uint_eq(seen.latency[0], 2); /* one per change */
        ck_assert_uint_eq(seen.properties, 1);
        ck_assert_int_eq(seen.effective, 40);
        ck_assert_uint_eq(seen.count, 2);
}
END_TEST

/* The deadline timer follows the earliest deadline; at it the request ends
 * and that is told like any change. */
START_TEST(test_expiry_ends_and_tells) {
        init_publisher();
        ChangeSet changes;
        int64_t now = now_realtime_usec();
        add_request(15, now + 3600 * 1000000LL, &changes);
        publish(&pub, &changes);
        uint64_t armed = 0;
        ck_assert_int_ge(sd_event_source_get_time(pub.expiry_source, &armed), 0);
        ck_assert_uint_eq(armed, (uint64_t) (now + 3600 * 1000000LL));
        add_request(25, now + 1, &changes); /* due already */
        publish(&pub, &changes);
        ck_assert_int_ge(sd_event_source_get_time(pub.expiry_source, &armed), 0);
        ck_assert_uint_eq(armed, (uint64_t) (now + 1));
        test_event_run_until_count(event, &seen.requests[0], 3);
        ck_assert_uint_eq(store_size(&core.store), 1); /* the due one ended */
        ck_assert_int_ge(sd_event_source_get_time(pub.expiry_source, &armed), 0);
        ck_assert_uint_eq(armed, (uint64_t) (now + 3600 * 1000000LL));
}
END_TEST

static int status_fd = -1;

static bool have_status(void *userdata) {
        char *buf = userdata;
        ssize_t n = recv(status_fd, buf, 255, MSG_DONTWAIT);
        if (n < 0)
                return false;
        buf[n] = 0;
        return true;
}

/* STATUS= at once for the first change, then at most once a second: the
 * next is sent by a timer, saying what holds when it fires. */
START_TEST(test_status_at_most_once_a_second) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
        status_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(status_fd, 0);
        ck_assert_int_eq(bind(status_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        setenv("NOTIFY_SOCKET", sa.sun_path, 1);
        init_publisher();
        ck_assert(pub.notify);
        ck_assert_int_ge(sd_event_run(event, 0), 0); /* the loop's "now", the same for both changes */
        char buf[256];
        ChangeSet changes;
        add_request(60, 0, &changes);
        publish(&pub, &changes);
        ck_assert(have_status(buf));
        ck_assert_str_eq(buf, "STATUS=effective 60 µs, 1 request(s)");
        add_request(35, 0, &changes);
        publish(&pub, &changes);
        ck_assert(!have_status(buf)); /* not yet: a timer is due */
        int enabled = SD_EVENT_OFF;
        ck_assert_int_ge(sd_event_source_get_enabled(pub.status_source, &enabled), 0);
        ck_assert_int_eq(enabled, SD_EVENT_ONESHOT);
        uint64_t due = 0;
        ck_assert_int_ge(sd_event_source_get_time(pub.status_source, &due), 0);
        ck_assert_uint_eq(due, pub.status_sent_usec + 1000000);
        test_event_run_until(event, have_status, buf);
        ck_assert_str_eq(buf, "STATUS=effective 35 µs, 2 request(s)");
        unsetenv("NOTIFY_SOCKET");
        close(status_fd);
}
END_TEST

int main(void) {
        Suite *s = suite_create("publish");
        TCase *tc = tcase_create("publish");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_change_told_from_both_paths);
        tcase_add_test(tc, test_nothing_before_the_bus);
        tcase_add_test(tc, test_burst_told_once);
        tcase_add_test(tc, test_expiry_ends_and_tells);
        tcase_add_test(tc, test_status_at_most_once_a_second);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
