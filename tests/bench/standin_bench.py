# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bench row for pmqosctl run: an open, 4-byte write and close of the
stand-in /dev/cpu_dma_latency against a Request and Cancel through libpmqos,
both in one run on one private bus and pmqosd on the real device (target:
at most 3 times). The stand-in's time runs from the first open to the broker
having ended the last request (a close's release reaches pmqosd after
close() returned).

Usage: standin_bench.py [--quick] (--quick: fewer rounds, no target held)."""

import ctypes
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from contract import NATIVE_IFACE  # noqa: E402
from fixtures import PMQOSCTL, Daemon, Kernel, PrivateBus, skip_notice, wait_for  # noqa: E402

PROBE = os.environ.get("PMQOS_STANDIN_PROBE", "pmqos-standin-probe")
LIBRARY = os.environ.get("PMQOS_LIBRARY", "libpmqos.so.1")
TARGET = 3.0


def libpmqos_pairs(bus, n):
    lib = ctypes.CDLL(LIBRARY)
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
    client, cookie = ctypes.c_void_p(), ctypes.c_uint32()
    assert lib.pmqos_client_new(ctypes.byref(client)) == 0
    lib.pmqos_client_free.restype = ctypes.c_void_p
    try:
        for _ in range(10):  # warm-up
            assert lib.pmqos_request(client, 50, ctypes.byref(cookie)) == 0
            assert lib.pmqos_cancel(client, cookie) == 0
        start = time.monotonic()
        for _ in range(n):
            assert lib.pmqos_request(client, 50, ctypes.byref(cookie)) == 0
            assert lib.pmqos_cancel(client, cookie) == 0
        return (time.monotonic() - start) / n
    finally:
        lib.pmqos_client_free(client)


def standin_cycles(bus, n):
    watcher = bus.connect()
    probe = subprocess.Popen([PMQOSCTL, "run", "--", PROBE], env=bus.env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)

    def cycle(count):
        probe.stdin.write("cycle %d 50\n" % count)
        probe.stdin.flush()
        answer = probe.stdout.readline().split()
        assert answer and answer[0] == "ok", answer
        wait_for(lambda: not watcher.call("ListRequests", iface=NATIVE_IFACE)[0], timeout=30, interval=0.0005,
                 what="the stand-in's last request to end")

    try:
        cycle(10)  # warm-up
        start = time.monotonic()
        cycle(n)
        return (time.monotonic() - start) / n
    finally:
        probe.stdin.close()
        probe.wait(30)
        watcher.close()


def main():
    quick = "--quick" in sys.argv
    if os.geteuid() != 0:
        skip_notice("the stand-in bench row", "needs root: the real device and a mount namespace")
        return 77
    if "libasan" in subprocess.run(["ldd", LIBRARY], capture_output=True, text=True).stdout:
        # ASan must come first in a process; python's is not built with it.
        skip_notice("the stand-in bench row", "an ASan build's libpmqos cannot be loaded into python (ctypes)")
        return 77
    n = 100 if quick else 2000
    kernel = Kernel()
    bus = PrivateBus()
    daemon = Daemon(bus, kernel)
    try:
        pair = libpmqos_pairs(bus, n)
        standin = standin_cycles(bus, n)
    finally:
        daemon.stop()
        bus.stop()
    ratio = standin / pair
    print("stand-in open+write+close: %.0f µs; libpmqos Request+Cancel: %.0f µs; ratio %.2f (target ≤ %.1f)%s"
          % (standin * 1e6, pair * 1e6, ratio, TARGET, ", --quick: not held" if quick else ""))
    return 0 if quick or ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
