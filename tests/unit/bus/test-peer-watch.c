/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit test of peer-watch (a service followed on the bus, as pmqosd follows
 * UPower and systemd) on a private dbus-daemon: its name's owner followed
 * through the driver's NameOwnerChanged; a NameOwnerChanged that another
 * peer sends pmqosd directly — which sd-bus lets through a match on the
 * driver's name, as the test shows — changes nothing; a PropertiesChanged
 * counts only from the connection that answered for the name, never from
 * another peer, nor before anyone answered, nor once the owner left. */

#include "bus-fixture.h"

#include "bus/peer-watch.h"

#define NAME "org.freedesktop.PMQoS.TestService"
#define IFACE "org.freedesktop.PMQoS.TestService"

static TestBus tb;
static sd_bus *daemon_bus, *service, *impostor;
static sd_bus *all[4];
static PeerWatch watch;

typedef struct Seen {
        unsigned owner_events, arrived, forged_through_match, props;
        int from_impostor, from_service; /* peer_watch_read_property()'s result, -1: none yet */
        int value;
        sd_bus_message *reply;
} Seen;
static Seen seen;

static void on_owner(PeerWatch *w, bool arrived, void *userdata) {
        Seen *s = userdata;
        ck_assert_ptr_eq(w, &watch);
        ck_assert_ptr_null(w->owner); /* forgotten either way */
        s->owner_events++;
        s->arrived += arrived;
}

/* The match peer-watch installs, as anyone would write it: what it lets through. */
static int on_probe(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        if (strcmp(sd_bus_message_get_sender(m), unique_name(impostor)) == 0)
                seen.forged_through_match++;
        return 0;
}

static int on_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        int value = -1;
        int r = peer_watch_read_property(&watch, m, IFACE, "OnBattery", "b", &value);
        const char *sender = sd_bus_message_get_sender(m);
        if (strcmp(sender, unique_name(impostor)) == 0)
                seen.from_impostor = r;
        else if (strcmp(sender, unique_name(service)) == 0) {
                seen.from_service = r;
                seen.value = value;
        }
        seen.props++;
        return 0;
}

static void setup(void) {
        test_bus_start(&tb);
        daemon_bus = test_bus_connect(&tb);
        service = test_bus_connect(&tb);
        impostor = test_bus_connect(&tb);
        all[0] = daemon_bus, all[1] = service, all[2] = impostor, all[3] = NULL;
        seen = (Seen){ .from_impostor = -1, .from_service = -1 };
        peer_watch_init(&watch, NAME, on_owner, &seen);
        ck_assert_int_ge(peer_watch_start(&watch, daemon_bus, true), 0);
        ck_assert_int_ge(sd_bus_add_match(daemon_bus, NULL,
                                          "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                          "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='" NAME "'",
                                          on_probe, NULL),
                         0);
        ck_assert_int_ge(sd_bus_match_signal(daemon_bus, NULL, NULL, NULL, "org.freedesktop.DBus.Properties",
                                             "PropertiesChanged", on_properties, NULL),
                         0);
}

static void teardown(void) {
        peer_watch_done(&watch);
        sd_bus_message_unref(seen.reply);
        sd_bus_flush_close_unref(daemon_bus);
        sd_bus_flush_close_unref(service);
        sd_bus_flush_close_unref(impostor);
        test_bus_stop(&tb);
}

static void take_name(void) {
        unsigned before = seen.owner_events;
        ck_assert_int_ge(sd_bus_request_name(service, NAME, 0), 0);
        test_bus_run_until_count(all, &seen.owner_events, before + 1);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        (void) userdata, (void) error;
        ck_assert(!sd_bus_message_is_method_error(m, NULL));
        seen.reply = sd_bus_message_ref(m);
        return 0;
}

static bool have_reply(void *userdata) {
        (void) userdata;
        return seen.reply != NULL;
}

/* The daemon calls the name (Peer.Ping, which sd-bus answers) and notes who answered. */
static void ask_name(void) {
        ck_assert_int_ge(sd_bus_call_method_async(daemon_bus, NULL, NAME, "/", "org.freedesktop.DBus.Peer", "Ping",
                                                  on_reply, NULL, ""),
                         0);
        test_bus_run_until(all, have_reply, NULL);
        peer_watch_answered(&watch, seen.reply);
        ck_assert_str_eq(watch.owner, unique_name(service));
        ck_assert(peer_watch_from_owner(&watch, seen.reply));
}

/* PropertiesChanged(IFACE, {OnBattery: value}, []) from bus, to destination or to all. */
static void send_properties(sd_bus *bus, const char *destination, int value) {
        sd_bus_message *m = NULL;
        ck_assert_int_ge(sd_bus_message_new_signal(bus, &m, "/org/freedesktop/PMQoS/Test",
                                                   "org.freedesktop.DBus.Properties", "PropertiesChanged"),
                         0);
        if (destination)
                ck_assert_int_ge(sd_bus_message_set_destination(m, destination), 0);
        ck_assert_int_ge(sd_bus_message_append(m, "sa{sv}as", IFACE, 1, "OnBattery", "b", value, 0), 0);
        ck_assert_int_ge(sd_bus_send(bus, m, NULL), 0);
        sd_bus_message_unref(m);
}

START_TEST(test_owner_followed) {
        take_name();
        ck_assert_uint_eq(seen.owner_events, 1);
        ck_assert_uint_eq(seen.arrived, 1);
        ask_name();
        ck_assert_int_ge(sd_bus_release_name(service, NAME), 0);
        test_bus_run_until_count(all, &seen.owner_events, 2);
        ck_assert_uint_eq(seen.arrived, 1); /* it left */
        ck_assert_ptr_null(watch.owner);
        ck_assert(!peer_watch_from_owner(&watch, seen.reply));
}
END_TEST

/* Another peer says, straight to the daemon, that the service left: sd-bus
 * passes it through a match on the driver's name, peer-watch does not
 * believe it. */
START_TEST(test_forged_owner_change_ignored) {
        take_name();
        ask_name();
        sd_bus_message *m = NULL;
        ck_assert_int_ge(sd_bus_message_new_signal(impostor, &m, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                   "NameOwnerChanged"),
                         0);
        ck_assert_int_ge(sd_bus_message_set_destination(m, unique_name(daemon_bus)), 0);
        ck_assert_int_ge(sd_bus_message_append(m, "sss", NAME, unique_name(service), ""), 0);
        ck_assert_int_ge(sd_bus_send(impostor, m, NULL), 0);
        sd_bus_message_unref(m);
        test_bus_run_until_count(all, &seen.forged_through_match, 1);
        ck_assert_uint_eq(seen.owner_events, 1); /* the real arrival only */
        ck_assert_str_eq(watch.owner, unique_name(service));
}
END_TEST

START_TEST(test_properties_only_from_owner) {
        take_name();
        /* Nobody answered yet: not even the owner's signal counts. */
        send_properties(service, NULL, 1);
        test_bus_run_until_count(all, &seen.props, 1);
        ck_assert_int_eq(seen.from_service, PROPERTY_ABSENT);

        ask_name();
        send_properties(impostor, unique_name(daemon_bus), 1);
        send_properties(service, NULL, 0);
        test_bus_run_until_count(all, &seen.props, 3);
        ck_assert_int_eq(seen.from_impostor, PROPERTY_ABSENT);
        ck_assert_int_eq(seen.from_service, PROPERTY_CHANGED);
        ck_assert_int_eq(seen.value, 0);

        /* Gone from the name: its word no longer holds. */
        ck_assert_int_ge(sd_bus_release_name(service, NAME), 0);
        test_bus_run_until_count(all, &seen.owner_events, 2);
        send_properties(service, NULL, 1);
        test_bus_run_until_count(all, &seen.props, 4);
        ck_assert_int_eq(seen.from_service, PROPERTY_ABSENT);
}
END_TEST

int main(void) {
        Suite *s = suite_create("peer-watch");
        TCase *tc = tcase_create("peer-watch");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_owner_followed);
        tcase_add_test(tc, test_forged_owner_change_ignored);
        tcase_add_test(tc, test_properties_only_from_owner);
        suite_add_tcase(s, tc);
        return unit_run(s, CK_FORK_GETENV);
}
