# SPDX-License-Identifier: LGPL-2.1-or-later
"""Unit rules (pmqosd(8), UNIT RULES): while a rule's unit is active,
reloading or activating, pmqosd holds its request; otherwise not. Against a
stand-in systemd on the test bus (fake_systemd.py; the container tier runs
the real one): every state, systemd arriving and leaving, invalidated
properties, UnitNew, forged signals, clients refused, a bad rule refused
with file:line, SIGHUP all or nothing. The kernel is read back."""

import json
import os
import shutil
import signal
import subprocess

from contract import ACCESS_DENIED, BUS_NAME, NATIVE_IFACE, PROPS, QOS_IFACE
from fixtures import BrokerTestCase, NOBODY, PMQOSCTL, PMQOSD, forge_signal, main, owner_of
from fake_sysfs import CSTATE_LATENCY, CSTATE_NAMES, make_cstate_sysfs

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEMD_POLICY = """<policy user="root">
  <allow own="org.freedesktop.systemd1"/>
  <allow send_destination="org.freedesktop.systemd1"/>
</policy>"""
DB_PATH = "/org/freedesktop/systemd1/unit/db_2eservice"


class FakeSystemd:
    def __init__(self, bus, states=()):
        self.proc = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "fake_systemd.py")], env=bus.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        if self.proc.stdout.readline().strip() != "ready":
            raise AssertionError("the stand-in systemd did not start")
        for unit, state in states:
            self.say("state %s %s" % (unit, state))

    def say(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise AssertionError("the stand-in systemd did not answer")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
            self.proc.stdout.close()


class RulesTestCase(BrokerTestCase):
    bus_extra_config = SYSTEMD_POLICY
    rules = {"db.conf": "[Rule]\nUnit=db.service\nLatency=40\nReason=database\n"}
    systemd_states = (("db.service", "inactive"),)
    with_systemd = True
    daemon_extra = ()  # more options for pmqosd

    def setUp(self):
        super().setUp()
        self.rules_dir = os.path.join(self.bus.dir, "rules.d")
        os.makedirs(self.rules_dir)
        for name, text in self.rules.items():
            self.write_rule(name, text)
        self.systemd = None
        if self.with_systemd:
            self.start_systemd(self.systemd_states)
        self.start_daemon(("--rules-dir", self.rules_dir, *self.daemon_extra))
        self.c = self.client()

    def start_systemd(self, states=()):
        self.systemd = FakeSystemd(self.bus, states)
        self.addCleanup(self.systemd.stop)

    def write_rule(self, name, text):
        with open(os.path.join(self.rules_dir, name), "w") as f:
            f.write(text)

    def rule_requests(self):
        return [r for r in self.c.call("ListRequests", None, iface=NATIVE_IFACE)[0] if r["exec"].startswith("rule ")]

    def explain(self):
        return self.c.call("Explain", None, iface=NATIVE_IFACE)[0]

    def status(self, *args):
        return subprocess.run([PMQOSCTL, "status", *args], env=self.bus.env, stdout=subprocess.PIPE, text=True,
                              check=True).stdout

    def held(self, n=1):
        return self.assert_eventually(lambda: len(self.rule_requests()) == n and self.rule_requests(),
                                      what="%d rule request(s)" % n)

    def released(self):
        self.assert_eventually(lambda: self.rule_requests() == [], what="no rule request")

    def reload(self):
        before = self.daemon.output().count("unit rule")
        self.daemon.proc.send_signal(signal.SIGHUP)
        self.assert_eventually(lambda: self.daemon.output().count("unit rule") > before, what="the reload")


class TestUnitStates(RulesTestCase):
    def test_active_states_hold_the_bound(self):
        self.assertEqual(self.rule_requests(), [])
        self.systemd.say("state db.service active")
        (r,) = self.held()
        self.assertEqual((r["exec"], r["uid"], r["pid"], r["reason"], r["sender"], r["value"], r["persistent"]),
                         ("rule %s/db.conf" % self.rules_dir, 0, 0, "database", "", 40, False))
        self.assertKernelAtMost(40)
        for state in ("reloading", "active", "activating"):
            self.systemd.say("state db.service %s" % state)
            self.assert_persists(lambda: [q["cookie"] for q in self.rule_requests()] == [r["cookie"]], 0.2,
                                 what="the same one request while %s" % state)
        self.systemd.say("state db.service deactivating")
        self.released()
        self.assertKernelReleased()
        self.systemd.say("state db.service active")
        self.held()
        self.systemd.say("state db.service failed")
        self.released()

    def test_explain_and_status_show_the_rule(self):
        self.systemd.say("state db.service active")
        self.held()
        e = self.explain()
        self.assertTrue(e["rules_followed"])
        self.assertEqual(e["rules"], [{"file": "%s/db.conf" % self.rules_dir, "unit": "db.service", "latency": 40,
                                       "state": "active", "holds": True, "cpus": []}])
        if e["kernel"] == 40:
            self.assertEqual(e["binding"]["exec"], "rule %s/db.conf" % self.rules_dir)
        out = self.status()
        self.assertIn("Rules:    1, 1 holding\n  %s/db.conf: 40 µs while db.service is active (active), holding\n"
                      % self.rules_dir, out)
        as_json = json.loads(self.status("--json"))
        self.assertEqual((as_json["rules"], as_json["rules_followed"]), (e["rules"], True))

    def test_clients_cannot_end_it(self):
        self.systemd.say("state db.service active")
        (r,) = self.held()
        for method, sig, args in (("CancelRequest", "u", (r["cookie"],)), ("Update", "ui", (r["cookie"], 5))):
            name, message = self.c.call_error(method, sig, *args,
                                              iface=NATIVE_IFACE if method == "Update" else QOS_IFACE)
            self.assertEqual(name, ACCESS_DENIED)
            self.assertIn("%s/db.conf" % self.rules_dir, message)
            self.assertIn("db.service", message)
        self.assertEqual(len(self.rule_requests()), 1)

    def test_invalidated_and_unit_new_are_asked_again(self):
        self.systemd.say("state db.service active")
        self.held()
        # A change not announced, then an invalidation: pmqosd asks and sees it.
        self.systemd.say("quiet db.service inactive")
        self.assert_persists(lambda: len(self.rule_requests()) == 1, 0.2, what="nothing announced yet")
        self.systemd.say("invalidate db.service")
        self.released()
        # The unit loaded anew (UnitNew): pmqosd asks again.
        self.systemd.say("quiet db.service active")
        self.systemd.say("new db.service")
        self.held()

    def test_forged_signals_change_nothing(self):
        self.systemd.say("state db.service active")
        self.held()
        forge_signal(self.bus, NOBODY, owner_of(self.c, BUS_NAME), DB_PATH,
                     PROPS, "PropertiesChanged", "sa{sv}as",
                     "('org.freedesktop.systemd1.Unit', {'ActiveState': <'inactive'>}, @as [])")
        self.assert_persists(lambda: len(self.rule_requests()) == 1, 0.3, what="the rule request")


class TestSystemdComingAndGoing(RulesTestCase):
    with_systemd = False

    def test_without_systemd_then_with_it(self):
        e = self.explain()
        self.assertFalse(e["rules_followed"])
        self.assertEqual([(r["unit"], r["holds"], r["state"]) for r in e["rules"]], [("db.service", False, "")])
        self.assertEqual(self.rule_requests(), [])
        self.assertIn("Rules:    1, inactive: systemd is not on the bus", self.status())
        self.start_systemd((("db.service", "active"),))
        self.held()  # pmqosd saw it arrive and asked
        self.assertTrue(self.explain()["rules_followed"])
        self.systemd.stop()
        self.released()  # systemd left: nothing of its word holds
        self.assertFalse(self.explain()["rules_followed"])
        self.start_systemd((("db.service", "active"),))
        self.held()


class TestRuleFiles(RulesTestCase):
    rules = {"db.conf": "[Rule]\nUnit=db.service\nLatency=40\n",
             "web.conf": "# the web server\n[Rule]\nUnit=web.service\nLatency=70\nReason=web\n"}
    systemd_states = (("db.service", "active"), ("web.service", "active"))

    def test_reload_all_or_nothing(self):
        held = {r["exec"]: r for r in self.held(2)}
        web = "rule %s/web.conf" % self.rules_dir
        db = "rule %s/db.conf" % self.rules_dir
        # One good change and one bad file: nothing changes.
        self.write_rule("web.conf", "[Rule]\nUnit=web.service\nLatency=60\n")
        self.write_rule("zz.conf", "[Rule]\nUnit=x.service\nLatency=-5\n")
        self.reload()
        self.assertIn("Bad unit rule: %s/zz.conf:3: Latency: expected microseconds" % self.rules_dir,
                      self.daemon.output())
        self.assertEqual({r["exec"]: r["value"] for r in self.rule_requests()}, {db: 40, web: 70})
        # Fixed: the changed rule takes its new value, the other keeps its very request.
        os.unlink(os.path.join(self.rules_dir, "zz.conf"))
        self.reload()
        now = {r["exec"]: r for r in self.assert_eventually(
            lambda: (lambda rs: rs if {r["exec"]: r["value"] for r in rs} == {db: 40, web: 60} else None)(
                self.rule_requests()), what="the new value")}
        self.assertEqual(now[db]["cookie"], held[db]["cookie"])
        os.unlink(os.path.join(self.rules_dir, "web.conf"))
        self.reload()
        self.assertEqual([r["exec"] for r in self.held(1)], [db])

    def test_bad_rule_refused_at_start(self):
        self.write_rule("bad.conf", "[Rule]\nUnit=db.service\nCPUs=3-1\nLatency=5\n")
        proc = subprocess.run([PMQOSD, "--device", self.kernel.path, "--rules-dir", self.rules_dir,
                               "--state-dir", os.path.join(self.bus.dir, "s2"), "--runtime-dir", ""],
                              env=self.bus.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("%s/bad.conf:3: CPUs: expected a CPU list such as 0-3,8" % self.rules_dir, proc.stdout)


class TestCStateRule(RulesTestCase):
    """Latency=C1E: the largest exit latency of C1E on an online CPU of this
    machine (a fake cpuidle tree), looked up when the rules are read; a
    reload naming no state of this machine keeps the previous rules."""
    rules = {"db.conf": "[Rule]\nUnit=db.service\nLatency=C1E\nReason=database\n"}
    systemd_states = (("db.service", "active"),)

    def setUp(self):
        sysfs = make_cstate_sysfs()
        self.addCleanup(shutil.rmtree, sysfs, True)
        self.daemon_extra = ("--sysfs-root", sysfs)
        super().setUp()

    def test_rule_named_by_a_cstate(self):
        (r,) = self.held()
        self.assertEqual((r["value"], r["reason"]), (CSTATE_LATENCY["C1E"], "database"))
        self.assertEqual([rule["latency"] for rule in self.explain()["rules"]], [CSTATE_LATENCY["C1E"]])

        self.write_rule("db.conf", "[Rule]\nUnit=db.service\nLatency=poll\n")
        self.reload()
        self.assert_eventually(lambda: [q["value"] for q in self.rule_requests()] == [CSTATE_LATENCY["POLL"]],
                               what="the rule's new value")

        self.write_rule("db.conf", "[Rule]\nUnit=db.service\nLatency=C1E\n")
        self.write_rule("zz.conf", "[Rule]\nUnit=zz.service\nLatency=C3\n")
        self.reload()
        self.assert_eventually(lambda: "Keeping the previous unit rules." in self.daemon.output(), what="the refusal")
        self.assertIn('Bad unit rule: %s/zz.conf:3: Latency: invalid value "C3", expected a C-state this machine has '
                      '(%s)' % (self.rules_dir, CSTATE_NAMES), self.daemon.output())
        self.assertEqual([q["value"] for q in self.rule_requests()], [CSTATE_LATENCY["POLL"]])
        self.assertEqual([rule["latency"] for rule in self.explain()["rules"]], [CSTATE_LATENCY["POLL"]])


if __name__ == "__main__":
    main()
