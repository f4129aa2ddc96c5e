# SPDX-License-Identifier: LGPL-2.1-or-later
"""The host side of the authorization tests: polkit's users, the project's
policy and rules, a test rule, and the user pmqosd drops to (root only) —
installed into a private copy of the host, never the host itself: as root,
each suite runs in a mount namespace of its own where /etc and
/usr/share/polkit-1 are overlays on a tmpfs (enter_private_host), so the
users, groups, policy and rules it adds are gone with its process and the
installed ones are never written, nor deleted."""

import atexit
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import unittest

from contract import ACTION_REQUEST, ACTION_REQUEST_PERSISTENT, ACTION_SET_MINIMUM, POLICY_FILE, RULES_FILE

SOURCE_ROOT = os.environ.get(
    "PMQOS_SOURCE_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
)
IS_ROOT = os.geteuid() == 0

# ---- a private host: what the suite writes as root, in overlays of its own ----

# Everything the suite writes outside its temp dirs: users and groups (/etc),
# polkit's rules (/etc/polkit-1/rules.d) and actions (/usr/share/polkit-1).
OVERLAID = ("/etc", "/usr/share/polkit-1")
PRIVATE_VAR = "PMQOS_TEST_PRIVATE_HOST"  # "pending" across the re-exec, then the namespace's id
private_host_error = "not root" if not IS_ROOT else "not entered (enter_private_host)"


def _mount_namespace():
    return os.readlink("/proc/self/ns/mnt")


def enter_private_host():
    """As root, re-executes this test program in a mount namespace of its own
    (unshare --mount: same process, same pid) and mounts an overlay on a tmpfs
    over each of OVERLAID there; every process the tests start inherits it.
    Returns None, or why the host could not be made private: the tests that
    would write it then skip (require_private_host), never write the host."""
    global private_host_error
    if not IS_ROOT:
        return private_host_error
    state = os.environ.get(PRIVATE_VAR)
    if state == _mount_namespace():
        private_host_error = None  # a child of a suite already inside
        return None
    if state != "pending":
        probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            private_host_error = "no mount namespace of its own: " + probe.stderr.strip()
            return private_host_error
        os.environ[PRIVATE_VAR] = "pending"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "--", sys.executable,
                              os.path.abspath(sys.argv[0]), *sys.argv[1:]])
    top = tempfile.mkdtemp(prefix="pmqos-host-")
    mounts = []

    def unmount():
        for m in reversed(mounts):
            subprocess.run(["umount", "-l", m], check=False)
        os.rmdir(top)

    atexit.register(unmount)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", top], capture_output=True, text=True)
    if r.returncode != 0:
        private_host_error = "cannot mount a tmpfs: " + r.stderr.strip()
        return private_host_error
    mounts.append(top)
    for d in OVERLAID:
        if not os.path.isdir(d):
            continue
        layer = os.path.join(top, d.strip("/").replace("/", "-"))
        os.makedirs(layer + "/upper")
        os.makedirs(layer + "/work")
        r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s/upper,workdir=%s/work"
                            % (d, layer, layer), d], capture_output=True, text=True)
        if r.returncode != 0:
            private_host_error = "cannot overlay %s: %s" % (d, r.stderr.strip())
            return private_host_error
        mounts.append(d)
    os.environ[PRIVATE_VAR] = _mount_namespace()
    private_host_error = None
    return None


def require_private_host(what):
    """Raises SkipTest (said on a SKIP: line) unless writes to OVERLAID go to
    this suite's overlays: the host is never written."""
    if private_host_error:
        raise unittest.SkipTest("%s: would write the host (%s)" % (what, private_host_error))


# ---- polkit's users and files, for the modules that test authorization ----

ACTIONS_DIR = "/usr/share/polkit-1/actions"
RULES_DIR = "/etc/polkit-1/rules.d"
POLICY_DEST = os.path.join(ACTIONS_DIR, POLICY_FILE)
RULES_DEST = os.path.join(RULES_DIR, "50-pmqos-under-test.rules")
TEST_RULES_DEST = os.path.join(RULES_DIR, "10-pmqos-test.rules")

GROUP = "pmqos"
POLKIT_USERS = {
    "plain": "pmqos-t-plain",    # no session, no group
    "member": "pmqos-t-member",  # in group pmqos
    "member2": "pmqos-t-member2",
    "floor": "pmqos-t-floor",    # a test rule grants it the floor
    "slow": "pmqos-t-slow",      # a test rule answers AUTH_ADMIN for it
    "once": "pmqos-t-once",      # a test rule grants it the floor once, slowly
    "stale": "pmqos-t-stale",    # a test rule grants it request-latency in 2 s, never the persistent one
}
TEST_RULES = """// Installed by pmqos's test suite for one run, removed after.
var pmqosOnceChecks = 0;
polkit.addRule(function(action, subject) {
    if (subject.user == "%(floor)s" && action.id == "%(set_minimum)s")
        return polkit.Result.YES;
    // Yes to its first check only, which takes a second: identical calls
    // asked meanwhile get that answer only if pmqosd shares it.
    if (subject.user == "%(once)s" && action.id == "%(set_minimum)s") {
        if (pmqosOnceChecks++ > 0)
            return polkit.Result.NO;
        polkit.spawn(["/bin/sleep", "1"]);
        return polkit.Result.YES;
    }
    if (subject.user == "%(slow)s" && action.id == "%(request)s")
        return polkit.Result.AUTH_ADMIN;
    // Time for the daemon's configuration to change while polkit decides.
    if (subject.user == "%(stale)s" && action.id == "%(request)s") {
        polkit.spawn(["/bin/sleep", "2"]);
        return polkit.Result.YES;
    }
    if (subject.user == "%(stale)s" && action.id == "%(request_persistent)s")
        return polkit.Result.NO;
});
""" % dict(POLKIT_USERS, set_minimum=ACTION_SET_MINIMUM, request=ACTION_REQUEST,
           request_persistent=ACTION_REQUEST_PERSISTENT)

created_group = False
created_users = list(POLKIT_USERS.values())
installed = []
POLKITD = "/usr/lib/polkit-1/polkitd"
POLKITD_PRESENT = os.path.exists(POLKITD)


def polkit_install():
    """Users pmqos-t-* (members of group pmqos, or not), the project's policy
    and rules and a test rule, for a module's run (root only), into the
    private host (enter_private_host): the installed ones stay as they are."""
    global created_group
    if not IS_ROOT or not POLKITD_PRESENT:
        return
    require_private_host("polkit's users, policy and rules")
    if not os.path.isdir(RULES_DIR):
        os.makedirs(RULES_DIR)
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", GROUP], check=True)
        created_group = True
    for key, user in POLKIT_USERS.items():
        # These names are the suite's own: start from a known state.
        # (--force: a run outside this private host may have processes of that name.)
        subprocess.run(["userdel", "--force", user], check=False, stderr=subprocess.DEVNULL)
        cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group"]
        if key.startswith("member"):
            cmd += ["--groups", GROUP]
        subprocess.run(cmd + [user], check=True)
    shutil.copy(os.path.join(SOURCE_ROOT, "policy", POLICY_FILE), POLICY_DEST)
    installed.append(POLICY_DEST)
    shutil.copy(os.path.join(SOURCE_ROOT, "policy", RULES_FILE), RULES_DEST)
    installed.append(RULES_DEST)
    with open(TEST_RULES_DEST, "w") as f:
        f.write(TEST_RULES)
    installed.append(TEST_RULES_DEST)


def polkit_uninstall():
    for path in installed:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    for user in created_users:
        subprocess.run(["userdel", user], check=False)
    if created_group:
        subprocess.run(["groupdel", GROUP], check=False)


def polkit_uid(key):
    return pwd.getpwnam(POLKIT_USERS[key]).pw_uid


created_pmqos_user = False


def pmqos_user_install():
    """The user the shipped unit runs pmqosd as. Call it before any bus
    starts: dbus-daemon resolves the policy's user="pmqos" when it reads it."""
    global created_pmqos_user
    if not IS_ROOT:
        return
    require_private_host("the user pmqos")
    try:
        pwd.getpwnam("pmqos")
    except KeyError:
        group = ["-g", "pmqos"] if "pmqos" in [g.gr_name for g in grp.getgrall()] else ["--user-group"]
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", *group, "pmqos"],
                       check=True)
        created_pmqos_user = True


def pmqos_user_uninstall():
    global created_pmqos_user
    if created_pmqos_user:
        subprocess.run(["userdel", "pmqos"], check=False)
        created_pmqos_user = False


