#!/usr/bin/env python3
"""The Python client (clients/python) against a real `fleetd --demo`.

Each run starts one fleetd --demo (the emulated Polatis switch, the Gen1 inventory, an
emulated agent per host) on ports chosen at run time, in a fresh state directory, and stops
it at the end. The demo serves mutual TLS: the client dials with the certificates and the
fleetctl contexts it writes (job/team-a for the job, the operator for inventory reads). Run
by ctest (tests/python/CMakeLists.txt) as

    python3 client_test.py --group client [unittest arguments]

with PYTHONPATH holding the built package (build/clients/python) and FLEET_BIN_DIR the built
binaries. Exit 77 (ctest: skipped) only when python3-grpcio or python3-protobuf is absent;
the reason is printed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from typing import Callable, List, Optional

SKIP = 77
GPUS = [f"gpu{i}" for i in range(1, 9)]
TENANT = "team-a"
JOB_CONTEXT = "demo-job"  # The demo's contexts: demo (operator), demo-job, demo-viewer.
WAIT = 60.0  # Seconds a topology may take to become READY on a loaded machine.


def require_client() -> None:
    """Exit 77 when the Python gRPC packages are absent; exit 1 when the package is not built
    (every build makes it: clients/python/CMakeLists.txt)."""
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
    except ImportError as e:
        print(f"SKIP: the Python client needs python3-grpcio and python3-protobuf ({e}); "
              "install them with deploy/quickstart/install-deps.sh --python")
        sys.exit(SKIP)
    try:
        import fleet.v1.topology_pb2  # noqa: F401
    except ImportError as e:
        print(f"FAIL: the fleet Python package is not built ({e}); PYTHONPATH='"
              f"{os.environ.get('PYTHONPATH', '')}'. Build the fleet_python target.")
        sys.exit(1)


def eventually(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Polls `condition` until it holds or `timeout` passes."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def fleetctl() -> str:
    return os.path.join(os.environ.get("FLEET_BIN_DIR", ""), "fleetctl")


class Demo:
    """`fleetd --demo` on ports chosen at run time, with the addresses it printed."""

    def __init__(self) -> None:
        bin_dir = os.environ.get("FLEET_BIN_DIR", "")
        self.fleetd = os.path.join(bin_dir, "fleetd")
        if not os.access(self.fleetd, os.X_OK):
            raise RuntimeError(f"{self.fleetd} is not built (set FLEET_BIN_DIR)")
        self.dir = tempfile.mkdtemp(prefix="fleet-python-")
        self.state = os.path.join(self.dir, "state")
        self.stderr_path = os.path.join(self.dir, "fleetd.stderr")
        self._lines: List[str] = []
        self._cv = threading.Condition()
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                # No switch monitor: its reads would take the refusal injected for a request.
                [self.fleetd, "--demo", "--grpc-port", "0", "--metrics-port", "0",
                 "--state-dir", self.state, "--agent-heartbeat-ms", "100",
                 "--monitor-interval-ms", "0"],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, text=True)
        # Drained for as long as fleetd runs, so it never blocks on a full pipe.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.grpc = self.wait_for_line("grpc: ")
        self.rest = self.wait_for_line("rest: ")
        self.config = self.wait_for_line("fleetctl-config: ")
        self.pki = os.path.join(self.state, "pki")

    def channel(self, context: str = "demo"):
        """A channel with the credentials of one of the demo's fleetctl contexts."""
        from fleet import credentials
        return credentials.resolve(self.grpc, config=self.config, context=context,
                                   environ={}).channel()

    def issue_job(self, tenant: str) -> dict:
        """A job certificate spiffe://demo.fleet/job/TENANT from the demo's CA, made with
        `fleetctl certs issue`; the Client arguments that dial with it."""
        prefix = os.path.join(self.dir, f"job-{tenant}")
        run = subprocess.run([fleetctl(), "certs", "issue", "--ca-dir", self.pki, "--identity",
                              f"spiffe://demo.fleet/job/{tenant}", "--out", prefix, "--force"],
                             capture_output=True, text=True, timeout=60)
        if run.returncode != 0:
            raise RuntimeError(f"fleetctl certs issue failed: {run.stdout}{run.stderr}")
        return {"ca": os.path.join(self.pki, "ca.pem"), "cert": prefix + ".pem",
                "key": prefix + ".key"}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cv:
                self._lines.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._lines.append("")  # EOF marker
            self._cv.notify_all()

    def wait_for_line(self, prefix: str, timeout: float = 60.0) -> str:
        """The rest of the first stdout line starting with `prefix`."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for line in self._lines:
                    if line.startswith(prefix):
                        return line[len(prefix):].strip()
                if self._lines and self._lines[-1] == "" and self.proc.poll() is not None:
                    raise RuntimeError(f"fleetd exited ({self.proc.returncode}) before printing "
                                       f"{prefix!r}:\n{self.stderr_tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"fleetd printed no {prefix!r} line in {timeout}s:\n"
                                       f"{self.stderr_tail()}")
                self._cv.wait(left)

    def wait_for_agents(self, count: int = 7) -> None:
        """Until `count` agents are connected, so links train at the first try."""
        from fleet.v1 import inventory_pb2, inventory_pb2_grpc
        with self.channel() as channel:
            stub = inventory_pb2_grpc.InventoryServiceStub(channel)

            def connected() -> bool:
                agents = stub.ListAgents(inventory_pb2.ListAgentsRequest(), timeout=10).agents
                return sum(a.connected for a in agents) >= count

            if not eventually(connected, 60):
                raise RuntimeError(f"fewer than {count} agents connected:\n{self.stderr_tail()}")

    def switch_fault(self, faults: Optional[dict], path: str = "faults") -> None:
        """Sets (or with None clears every one of) the emulated switch's faults through
        /sim/v1: `path` "faults" for the switch's, "ports/P" for port P's."""
        method, body = ("PUT", json.dumps(faults).encode()) if faults else ("DELETE", None)
        if faults is None:
            path = "faults"
        request = urllib.request.Request(f"http://{self.rest}/sim/v1/{path}", data=body,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stderr_tail(self, lines: int = 60) -> str:
        try:
            with open(self.stderr_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


_demo: Optional[Demo] = None
_demo_error: Optional[BaseException] = None


def demo() -> Demo:
    """The run's fleetd, started on first use; a start that failed fails every test at once."""
    global _demo, _demo_error
    if _demo_error is not None:
        raise RuntimeError(f"fleetd --demo did not start: {_demo_error}")
    if _demo is None:
        try:
            _demo = Demo()
            _demo.wait_for_agents()
        except BaseException as e:
            _demo_error = e
            raise
    return _demo


class FleetTestCase(unittest.TestCase):
    def setUp(self) -> None:
        import fleet
        self.fleet = fleet
        self.demo = demo()
        self.client = fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                   context=JOB_CONTEXT)
        self.addCleanup(self.client.close)

    def assertAllActive(self, allocation, phase: Optional[str] = None) -> None:
        circuits = [c for c in allocation.circuits if phase is None or c.phase == phase]
        self.assertTrue(circuits)
        for c in circuits:
            self.assertEqual(c.state, "ACTIVE", c)
            self.assertTrue(c.cross_connects, c)


class ClientTest(FleetTestCase):
    """Request, wait, lease, release, errors and tenancy (python.client)."""

    def test_ring_becomes_ready_with_its_circuits(self) -> None:
        with self.client.topology(ring=GPUS, lease=60, name="ring") as topo:
            a = topo.wait_ready(timeout=WAIT)
            self.assertEqual(a.state, "READY")
            self.assertEqual(topo.state, "READY")
            self.assertEqual(a.tenant, TENANT)
            self.assertEqual(a.name, "ring")
            self.assertEqual(list(a.members), GPUS)
            # Bidirectional: a duplex link, two circuits, between each neighbouring pair.
            self.assertEqual(len(a.circuits), 16)
            self.assertAllActive(a)
            pairs = {(c.source.onic, c.destination.onic) for c in a.circuits}
            self.assertIn(("gpu8-n0", "gpu1-n0"), pairs)
            self.assertIn(("gpu1-n0", "gpu8-n0"), pairs)

    def test_raw_request_and_spec_are_accepted(self) -> None:
        from fleet.v1 import topology_pb2
        request = topology_pb2.RequestTopologyRequest(
            tenant=TENANT, name="raw",
            topology=topology_pb2.TopologySpec(template=topology_pb2.TemplateSpec(
                kind=topology_pb2.TEMPLATE_KIND_RING_UNIDIRECTIONAL,
                members=topology_pb2.MemberSet(devices=GPUS[:4]))))
        with self.client.topology(request, lease=60) as topo:
            a = topo.wait_ready(timeout=WAIT)
            self.assertEqual(a.name, "raw")
            self.assertEqual(len(a.circuits), 4)  # gpu1→gpu2→gpu3→gpu4→gpu1
            self.assertEqual(a.request.lease.seconds, 60)
            self.assertAllActive(a)
        spec = self.fleet.ring(GPUS[4:], bidirectional=False)
        with self.client.topology(spec, lease=60) as topo:
            a = topo.wait_ready(timeout=WAIT)
            self.assertEqual(list(a.members), GPUS[4:])
            self.assertEqual(len(a.circuits), 4)

    def test_explicit_links(self) -> None:
        links = [("gpu1", "gpu2"), ("gpu3", "gpu4"), self.fleet.Link("gpu5-n0/1", "gpu6-n0/2")]
        with self.client.topology(links=links, duplex=True, lease=60) as topo:
            a = topo.wait_ready(timeout=WAIT)
            # Two duplex links (two circuits each) and one directed link on named ports.
            self.assertEqual(len(a.circuits), 5)
            self.assertAllActive(a)
            directed = [c for c in a.circuits if c.source.onic == "gpu5-n0"]
            self.assertEqual(len(directed), 1)
            self.assertEqual((directed[0].source.port, directed[0].destination.onic,
                              directed[0].destination.port), (1, "gpu6-n0", 2))

    def test_an_attached_gpu_detaches_and_the_others_stay(self) -> None:
        from fleet.v1 import topology_pb2
        spec = topology_pb2.TopologySpec(attach=topology_pb2.AttachSpec(
            host="server2", devices=topology_pb2.MemberSet(devices=["gpu7", "gpu8"])))
        with self.client.topology(spec, lease=60) as topo:
            a = topo.wait_ready(timeout=WAIT)
            self.assertEqual(len(a.circuits), 4)
            kept = sorted(c.id for c in a.circuits if "gpu8-n0" in (c.source.onic,
                                                                       c.destination.onic))
            after = topo.detach("gpu7", timeout=WAIT)
            self.assertNotIn("gpu7", after.members)
            self.assertIn("gpu8", after.members)
            self.assertEqual(sorted(c.id for c in after.circuits), kept)
            self.assertAllActive(after)
            with self.assertRaises(self.fleet.InvalidArgument):
                topo.detach("gpu8", timeout=WAIT)  # The last one: that is a release.

    def test_lease_is_kept_alive(self) -> None:
        # Two allocations with a 2 s lease: one renewed in the background, one not.
        kept = self.client.topology(ring=GPUS[:4], bidirectional=False, lease=2)
        self.addCleanup(kept.release)
        left = self.client.topology(ring=GPUS[4:], bidirectional=False, lease=2, keepalive=False)
        self.addCleanup(left.release)
        kept.wait_ready(timeout=WAIT)
        first_expiry = kept.lease_expires
        assert first_expiry is not None
        # The one wait on a timer: past the 2 s lease and fleetd's once-a-second lease check.
        time.sleep(3.5)
        a = kept.refresh()
        self.assertEqual(kept.state, "READY", a.reason)
        self.assertIsNone(kept.keepalive_error)
        self.assertGreater(kept.lease_expires, first_expiry)
        # The other ran out: fleetd released it.
        with self.assertRaises(self.fleet.Released) as ended:
            left.wait_ready(timeout=WAIT)
        self.assertIn("lease expired", ended.exception.reason)

    def keepalive_running(self, topo) -> bool:
        return any(t.name == f"fleet-keepalive-{topo.id}" and t.is_alive()
                   for t in threading.enumerate())

    def release_quietly(self, allocation_id: str) -> None:
        try:
            self.client.release(allocation_id)
        except self.fleet.FleetError:
            pass  # Already released (its lease ran out).

    def test_close_stops_lease_renewals(self) -> None:
        client = self.fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                   context=JOB_CONTEXT)
        topo = client.topology(ring=GPUS[:4], bidirectional=False, lease=2)
        self.addCleanup(self.release_quietly, topo.id)
        topo.wait_ready(timeout=WAIT)
        self.assertTrue(self.keepalive_running(topo))
        # close() stops the renewals before it closes the channel it opened: none is left to
        # run into the closed channel.
        client.close()
        self.assertFalse(self.keepalive_running(topo))
        self.assertIsNone(topo.keepalive_error)

    def test_renewals_stop_on_a_channel_closed_under_them(self) -> None:
        channel = self.demo.channel(JOB_CONTEXT)
        client = self.fleet.Client(channel=channel, tenant=TENANT)
        topo = client.topology(ring=GPUS[4:], bidirectional=False, lease=2)
        self.addCleanup(self.release_quietly, topo.id)
        topo.wait_ready(timeout=WAIT)
        channel.close()  # The caller's own channel, closed without client.close().
        self.assertTrue(eventually(lambda: not self.keepalive_running(topo), WAIT))
        self.assertIsInstance(topo.keepalive_error, self.fleet.Cancelled)
        self.assertIn("lease renewal stopped: its channel is closed", str(topo.keepalive_error))

    def test_allocation_states_are_names_everywhere(self) -> None:
        """Every allocation the client returns has its state as a name, as topo.state does,
        and its circuits' states too; the fleet.v1 message underneath keeps fleetd's numbers."""
        from fleet.v1 import topology_pb2
        with self.client.topology(ring=GPUS[:4], bidirectional=False, lease=60) as topo:
            self.assertIn(topo.allocation.state, ("PENDING", "PROGRAMMING", "TRAINING", "READY"))
            changes = topo.changes(timeout=WAIT)
            first = next(changes)  # How it is now.
            changes.close()
            self.assertIn(first.state, ("PENDING", "PROGRAMMING", "TRAINING", "READY"))
            ready = topo.wait_ready(timeout=WAIT)
            self.assertIsInstance(ready, self.fleet.Allocation)
            for a in (ready, topo.allocation, topo.refresh(), self.client.allocation(topo.id),
                      *[a for a in self.client.allocations() if a.id == topo.id]):
                self.assertEqual(a.state, "READY", a)
                self.assertEqual([c.state for c in a.circuits], ["ACTIVE"] * 4, a)
                self.assertEqual(a.message.state, topology_pb2.ALLOCATION_STATE_READY)
            self.assertEqual([c.state for c in topo.circuits], ["ACTIVE"] * 4)
            changes = topo.changes(timeout=WAIT)
            self.assertEqual(next(changes).state, "READY")
            changes.close()
            self.assertEqual(topo.release().state, "RELEASED")
        self.assertEqual([a.state for a in topo.changes(timeout=WAIT)], ["RELEASED"])
        other = self.client.topology(ring=GPUS[4:], bidirectional=False, lease=60)
        self.addCleanup(self.release_quietly, other.id)
        other.wait_ready(timeout=WAIT)
        self.assertEqual(self.client.release(other.id).state, "RELEASED")

    def test_an_allocation_reads_as_its_message_with_state_names(self) -> None:
        from fleet.v1 import topology_pb2 as pb
        message = pb.Allocation(id="a7", state=pb.ALLOCATION_STATE_DEGRADED, reason="why",
                                members=["gpu1", "gpu2"])
        message.circuits.add(id="c1", state=pb.CIRCUIT_STATE_DEGRADED, phase="dp")
        a = self.fleet.Allocation(message)
        self.assertEqual((a.id, a.state, a.reason, list(a.members)),
                         ("a7", "DEGRADED", "why", ["gpu1", "gpu2"]))
        self.assertFalse(a.HasField("lease_expires"))
        self.assertEqual([(c.id, c.state, c.phase) for c in a.circuits], [("c1", "DEGRADED", "dp")])
        self.assertIs(a.message, message)
        self.assertEqual(repr(a), "<fleet.Allocation a7 DEGRADED>")
        # A number this client does not know stays readable.
        self.assertEqual(self.fleet.Allocation(pb.Allocation(state=42)).state, "42")
        # state_name takes the names it gives back, so older code calling it still works.
        self.assertEqual(self.fleet.state_name(a.state), "DEGRADED")
        self.assertEqual(self.fleet.state_name(pb.ALLOCATION_STATE_READY), "READY")
        self.assertEqual(self.fleet.Allocation(a), a)
        self.assertEqual(copy.deepcopy(a), a)
        self.assertIsNot(copy.deepcopy(a).message, message)
        self.assertEqual(pickle.loads(pickle.dumps(a)), a)
        self.assertNotEqual(a, self.fleet.Allocation(pb.Allocation(id="a7")))
        with self.assertRaises(AttributeError) as caught:
            a.state = "READY"  # type: ignore[misc]
        self.assertIn("change a copy of its .message (a fleet.v1.Allocation)",
                      str(caught.exception))
        with self.assertRaises(TypeError):
            self.fleet.Allocation(pb.Circuit())

    def test_release_on_exit(self) -> None:
        with self.client.topology(ring=GPUS, lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            allocation_id = topo.id
        a = self.client.allocation(allocation_id)
        self.assertEqual(a.state, "RELEASED")
        self.assertEqual(len(a.circuits), 0)
        # Its ports are free again: the same ring is admitted and becomes READY.
        with self.client.topology(ring=GPUS, lease=60) as again:
            again.wait_ready(timeout=WAIT)

    def test_release_on_exception(self) -> None:
        class Boom(Exception):
            pass

        allocation_id = ""
        with self.assertRaises(Boom):
            with self.client.topology(ring=GPUS, lease=60) as topo:
                allocation_id = topo.id
                topo.wait_ready(timeout=WAIT)
                raise Boom()
        a = self.client.allocation(allocation_id)
        self.assertEqual(a.state, "RELEASED")

    def test_unknown_device_raises_not_found_with_the_servers_message(self) -> None:
        before = [a.id for a in self.client.allocations(include_released=True)]
        with self.assertRaises(self.fleet.NotFound) as caught:
            self.client.topology(ring=["gpu1", "gpu2", "gpu-nope"], lease=60)
        e = caught.exception
        self.assertIsInstance(e, self.fleet.FleetError)
        self.assertEqual(e.code.name, "NOT_FOUND")
        self.assertIn("gpu-nope", e.message)
        self.assertTrue(str(e).startswith("NOT_FOUND: "), str(e))
        # Nothing was admitted.
        self.assertEqual([a.id for a in self.client.allocations(include_released=True)], before)

    def test_lease_too_long_raises_invalid_argument(self) -> None:
        with self.assertRaises(self.fleet.InvalidArgument) as caught:
            self.client.topology(ring=GPUS, lease=8 * 24 * 3600)
        self.assertIn("lease", caught.exception.message)

    def test_unknown_allocation_raises_not_found(self) -> None:
        with self.assertRaises(self.fleet.NotFound):
            self.client.allocation("no-such-allocation")

    def test_switch_failure_raises_allocation_failed_with_the_reason(self) -> None:
        self.addCleanup(self.demo.switch_fault, None)
        self.demo.switch_fault({"deny_next": 1})
        with self.client.topology(ring=GPUS, lease=60) as topo:
            with self.assertRaises(self.fleet.AllocationFailed) as caught:
                topo.wait_ready(timeout=WAIT)
        self.assertIn("Injected fault", caught.exception.reason)
        self.assertIn(caught.exception.reason, str(caught.exception))
        self.assertEqual(caught.exception.allocation.state, "FAILED")

    def test_weak_light_raises_degraded_then_recovers(self) -> None:
        from fleet.v1 import inventory_pb2, inventory_pb2_grpc
        with self.demo.channel() as channel:
            onic = inventory_pb2_grpc.InventoryServiceStub(channel).GetOnic(
                inventory_pb2.GetOnicRequest(id="gpu8-n0"), timeout=10)
        egress = next(p.rx.port for p in onic.ports if p.index == 1)
        self.addCleanup(self.demo.switch_fault, None)
        self.demo.switch_fault({"power_drop_db": 30.0}, f"ports/{egress}")
        with self.client.topology(links=[self.fleet.Link("gpu7-n0/1", "gpu8-n0/1")],
                                  lease=60) as topo:
            with self.assertRaises(self.fleet.Degraded) as caught:
                topo.wait_ready(timeout=WAIT, raise_on_degraded=True)
            self.assertIn("gpu8-n0", caught.exception.reason)
            # fleetd retries the link; with the light back it trains and the wait ends READY.
            self.demo.switch_fault(None)
            a = topo.wait_ready(timeout=WAIT)
            self.assertAllActive(a)

    def test_a_ready_link_losing_its_light_degrades_at_once_and_heals(self) -> None:
        from fleet.v1 import inventory_pb2, inventory_pb2_grpc
        with self.demo.channel() as channel:
            onic = inventory_pb2_grpc.InventoryServiceStub(channel).GetOnic(
                inventory_pb2.GetOnicRequest(id="gpu6-n0"), timeout=10)
        egress = next(p.rx.port for p in onic.ports if p.index == 1)
        with self.client.topology(links=[self.fleet.Link("gpu5-n0/1", "gpu6-n0/1")],
                                  lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            self.addCleanup(self.demo.switch_fault, None)
            # The light fades under the running job: the agent's monitor sees the port go down
            # and fleetd degrades the allocation without being asked.
            self.demo.switch_fault({"power_drop_db": 30.0}, f"ports/{egress}")
            self.assertTrue(eventually(
                lambda: topo.refresh().state == "DEGRADED", WAIT),
                topo.refresh())
            a = topo.refresh()
            self.assertIn("reports gpu6-n0/1 down", a.reason)
            # The light comes back: a retry finds the link up again, READY.
            self.demo.switch_fault(None)
            self.assertAllActive(topo.wait_ready(timeout=WAIT))

    def test_the_job_replaces_a_member_itself(self) -> None:
        with self.client.topology(ring=GPUS[:4], lease=60) as topo:
            before = topo.wait_ready(timeout=WAIT)
            self.assertEqual(list(before.members), GPUS[:4])
            a = topo.replace("gpu2", timeout=WAIT)
            self.assertEqual(a.state, "READY")
            self.assertNotIn("gpu2", a.members)
            spare = a.members[1]  # In gpu2's place, so the ring order holds.
            self.assertNotIn(spare, GPUS[:4])
            self.assertEqual(topo.members, list(a.members))
            self.assertAllActive(a)
            with self.assertRaises(self.fleet.NotFound) as caught:
                topo.replace("gpu2")
            self.assertIn("gpu2", caught.exception.message)

    def test_a_failed_member_is_healed_and_the_job_is_told(self) -> None:
        from fleet.v1 import admin_pb2, admin_pb2_grpc, common_pb2, topology_pb2
        operator = self.demo.channel()  # The demo's operator context: SetDeviceHealth is theirs.
        self.addCleanup(operator.close)
        admin = admin_pb2_grpc.AdminServiceStub(operator)

        def set_health(device: str, health: int, reason: str = "") -> None:
            admin.SetDeviceHealth(admin_pb2.SetDeviceHealthRequest(
                device=device, health=health, reason=reason), timeout=10)

        members = GPUS[:4]
        policy = {"replace": True, "within": "2s", "max_replacements": 2,
                  "spares": "same-switch"}
        replaced = []
        told = threading.Event()

        def remap(replacement) -> None:
            replaced.append(replacement)
            told.set()

        with self.client.topology(ring=members, lease=60, name="healed",
                                  on_failure=policy) as topo:
            before = topo.wait_ready(timeout=WAIT)
            self.assertEqual(list(before.members), members)
            # The policy went to fleetd as written.
            on_failure = before.request.on_failure
            self.assertTrue(on_failure.replace)
            self.assertEqual((on_failure.within.seconds, on_failure.max_replacements,
                              on_failure.spares), (2, 2, topology_pb2.SPARE_SCOPE_SAME_SWITCH))
            self.assertEqual(topo.replacements, [])
            self.assertIs(topo.on_member_replaced(remap), remap)

            # An operator marks gpu2 failed under the running ring: fleetd heals it at once.
            self.addCleanup(set_health, "gpu2", common_pb2.DEVICE_HEALTH_HEALTHY)
            set_health("gpu2", common_pb2.DEVICE_HEALTH_FAILED, "python client test")
            if not told.wait(WAIT):
                a = topo.refresh()
                self.fail(f"no replacement within {WAIT}s: allocation {a.id} "
                          f"{a.state}, reason {a.reason!r}")
            a = topo.wait_ready(timeout=WAIT)
            self.assertAllActive(a)
            self.assertEqual(topo.state, "READY")

            r = replaced[0]
            self.assertIsInstance(r, self.fleet.MemberReplacement)
            self.assertEqual((r.failed, r.position, r.by, r.index), ("gpu2", 1, "fleetd", 0))
            self.assertIn("gpu2", r.reason)
            self.assertNotIn(r.spare, members)
            self.assertIsNotNone(r.degraded_for)
            self.assertGreaterEqual(r.degraded_for, 0)
            self.assertIsNotNone(r.time)
            # The spare holds gpu2's rank; the other members keep theirs.
            self.assertEqual(list(r.members), ["gpu1", r.spare, "gpu3", "gpu4"])
            self.assertEqual(list(a.members), list(r.members))
            self.assertEqual(topo.members, list(r.members))
            self.assertEqual([x.spare for x in topo.replacements], [r.spare])
            # As stored right after the heal: the spare not yet retrained, or READY already.
            self.assertIn(r.allocation.state, ("DEGRADED", "PROGRAMMING", "TRAINING", "READY"))
            allocation_id = topo.id
        # Released: the follower is gone, and the callback was called once, for gpu2.
        self.assertEqual(len(replaced), 1, replaced)
        self.assertFalse([t for t in threading.enumerate()
                          if t.name == f"fleet-follow-{allocation_id}"])
        stored = self.client.allocation(allocation_id)
        self.assertEqual([(x.failed, x.spare, x.position) for x in stored.replacements],
                         [("gpu2", r.spare, 1)])

    def test_a_bad_failure_policy_is_refused_before_any_request(self) -> None:
        from fleet.v1 import topology_pb2
        before = [a.id for a in self.client.allocations(include_released=True)]
        cases = {
            "on_failure.spares 'nearby' is not one of: same-switch, any": {"spares": "nearby"},
            "on_failure.within: '25h' is not a duration from 1ms to 24h": {"within": "25h"},
            "on_failure.within: 'soon' is not a duration": {"replace": True, "within": "soon"},
            "on_failure.max_replacements -1 must be a non-negative integer":
                {"max_replacements": -1},
            "on_failure.replace 'yes' must be true or false": {"replace": "yes"},
            "on_failure: unknown key 'retries'; expected replace, within, max_replacements, "
            "spares": {"replace": True, "retries": 3},
        }
        for message, policy in cases.items():
            with self.subTest(policy=policy):
                with self.assertRaises(ValueError) as caught:
                    self.client.topology(ring=GPUS[:4], lease=60, on_failure=policy)
                self.assertIn(message, str(caught.exception))
        # A raw request's policy keeps the same rules.
        request = topology_pb2.RequestTopologyRequest(topology=self.fleet.ring(GPUS[:4]))
        request.on_failure.replace = True
        request.on_failure.within.FromSeconds(25 * 3600)
        with self.assertRaises(ValueError) as caught:
            self.client.topology(request, lease=60)
        self.assertIn("on_failure.within: '90000s' is not a duration from 1ms to 24h",
                      str(caught.exception))
        with self.assertRaises(TypeError) as caught:
            self.client.topology(ring=GPUS[:4], lease=60, on_failure="replace")
        self.assertIn("on_failure", str(caught.exception))
        # Nothing reached fleetd.
        self.assertEqual([a.id for a in self.client.allocations(include_released=True)], before)

    def test_another_tenant_cannot_see_it(self) -> None:
        # team-b's own certificate: fleetd knows the caller by it, whatever tenant it names.
        other = self.fleet.Client(self.demo.grpc, tenant="team-b", **self.demo.issue_job("team-b"))
        self.addCleanup(other.close)
        with self.client.topology(ring=GPUS[:4], bidirectional=False, lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            # Answered as a missing allocation: team-b learns nothing of team-a's.
            with self.assertRaises(self.fleet.NotFound) as caught:
                other.allocation(topo.id)
            self.assertEqual(caught.exception.message, f"allocation {topo.id} not found")
            self.assertNotIn(topo.id, [a.id for a in other.allocations()])
            with self.assertRaises(self.fleet.NotFound):
                other.release(topo.id)
            # Naming team-a as its tenant does not make team-b's certificate act for it.
            with self.assertRaises(self.fleet.PermissionDenied) as caught:
                other.topology(ring=GPUS[4:], lease=60, tenant=TENANT)
            self.assertIn("team-a", caught.exception.message)
            # Its owner still sees it, READY.
            self.assertIn(topo.id, [a.id for a in self.client.allocations()])
            self.assertEqual(topo.refresh().state, "READY")


class CredentialsTest(FleetTestCase):
    """Dialling with certificates, and what happens without them (python.client)."""

    def test_without_credentials_the_client_says_what_to_give(self) -> None:
        empty = os.path.join(self.demo.dir, "no-such-config.yaml")
        with self.assertRaises(self.fleet.CredentialsError) as caught:
            self.fleet.Client(self.demo.grpc, config=empty)
        self.assertIn(f"no credentials for {self.demo.grpc}", str(caught.exception))
        with self.assertRaises(self.fleet.CredentialsError) as caught:
            self.fleet.Client(self.demo.grpc, config=self.demo.config, context="nope")
        self.assertIn("context 'nope' (context) is not in", str(caught.exception))
        self.assertIn("contexts: demo, demo-job, demo-viewer", str(caught.exception))
        with self.assertRaises(self.fleet.CredentialsError) as caught:
            self.fleet.Client(self.demo.grpc, ca=os.path.join(self.demo.pki, "ca.pem"),
                              config=empty)
        self.assertIn("no client certificate", str(caught.exception))

    def test_plaintext_and_a_foreign_ca_are_refused(self) -> None:
        plain = self.fleet.Client(self.demo.grpc, tenant=TENANT, insecure=True,
                                  principal="operator:x", timeout=10)
        self.addCleanup(plain.close)
        with self.assertRaises(self.fleet.Unavailable):
            plain.allocations()
        # A CA of its own: fleetd's certificate does not verify, the handshake fails.
        foreign = os.path.join(self.demo.dir, "foreign")
        if not os.path.exists(os.path.join(foreign, "ca.pem")):
            subprocess.run([fleetctl(), "certs", "init-ca", "--out", foreign, "--site",
                            "demo.fleet"], check=True, capture_output=True, timeout=60)
        job = self.demo.issue_job(TENANT)
        job["ca"] = os.path.join(foreign, "ca.pem")
        stranger = self.fleet.Client(self.demo.grpc, tenant=TENANT, timeout=10, **job)
        self.addCleanup(stranger.close)
        with self.assertRaises(self.fleet.Unavailable):
            stranger.allocations()

    def test_a_viewer_reads_but_may_not_request(self) -> None:
        viewer = self.fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                   context="demo-viewer")
        self.addCleanup(viewer.close)
        viewer.allocations()
        with self.assertRaises(self.fleet.PermissionDenied) as caught:
            viewer.topology(ring=GPUS[:2], lease=60)
        self.assertIn("viewer", caught.exception.message)

    def test_environment_and_context_are_read_as_fleetctl_reads_them(self) -> None:
        from fleet import credentials
        c = credentials.resolve(environ={"FLEET_CONFIG": self.demo.config,
                                         "FLEET_CONTEXT": JOB_CONTEXT})
        self.assertEqual(c.server, self.demo.grpc)
        self.assertEqual(c.cert, os.path.join(self.demo.state, "pki/job-team-a.pem"))
        self.assertFalse(c.insecure)
        # An argument beats the environment, which beats the context.
        c = credentials.resolve("h:1", environ={"FLEET_CONFIG": self.demo.config,
                                                "FLEET_SERVER": "h:2", "FLEET_INSECURE": "1"})
        self.assertEqual((c.server, c.insecure, c.context), ("h:1", True, "demo"))
        with self.assertRaises(credentials.CredentialsError) as caught:
            credentials.resolve(environ={"FLEET_INSECURE": "maybe"})
        self.assertIn("FLEET_INSECURE='maybe' is not a boolean", str(caught.exception))
        bad = os.path.join(self.demo.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("current-context: x\ncontexts:\n  - name: x\n    ca: a.pem\n"
                    "    colour: red\n")
        with self.assertRaises(credentials.CredentialsError) as caught:
            credentials.resolve(config=bad, environ={})
        # As fleetctl says it: the file, the line, the key and the rule.
        self.assertIn(f"{bad}:5: unknown key 'colour' in a context; known: ca, cert, insecure, "
                      "key, name, server", str(caught.exception))
        self.assertIn(f"{bad}:3: context 'x' has no cert and key: ca, cert and key go together",
                      str(caught.exception))
        # The job's client works from the environment alone, as a launched job's would.
        from unittest import mock
        with mock.patch.dict(os.environ, {"FLEET_CONFIG": self.demo.config,
                                          "FLEET_CONTEXT": JOB_CONTEXT}):
            with self.fleet.Client(tenant=TENANT) as from_env:
                self.assertIsNotNone(from_env.allocations())


class LeaderEndpointTest(FleetTestCase):
    """Of several fleetd replicas, the client dials the leader (docs/ha.md)."""

    @staticmethod
    def health_server(status: int):
        """A gRPC server answering grpc.health.v1.Health/Check with `status` (1 SERVING, 2
        NOT_SERVING), as a replicated fleetd answers for fleet.v1.Leader; its address."""
        from concurrent import futures

        import grpc
        from google.protobuf import wrappers_pb2
        asked = []

        def check(request, context):
            asked.append(request.value)
            return wrappers_pb2.Int32Value(value=status)

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(
                check, request_deserializer=wrappers_pb2.StringValue.FromString,
                response_serializer=wrappers_pb2.Int32Value.SerializeToString)})])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        return server, f"127.0.0.1:{port}", asked

    def test_of_several_servers_the_leader_is_dialled(self) -> None:
        from fleet import credentials
        follower, follower_at, asked = self.health_server(2)
        self.addCleanup(follower.stop, None)
        leader, leader_at, _ = self.health_server(1)
        self.addCleanup(leader.stop, None)
        dead = "127.0.0.1:1"

        def endpoint(server: str) -> str:
            return credentials.Connection(server=server, insecure=True).endpoint()

        self.assertEqual(endpoint(f"{dead},{follower_at},{leader_at}"), leader_at)
        self.assertEqual(asked[-1], credentials.LEADER_HEALTH_SERVICE)
        # No leader (no quorum): the first that answered, whose reads work.
        self.assertEqual(endpoint(f"{dead}, {follower_at}"), follower_at)
        self.assertEqual(endpoint(f"{dead},127.0.0.1:2"), dead)
        # One endpoint is dialled as it is, nothing asked.
        before = len(asked)
        self.assertEqual(endpoint(follower_at), follower_at)
        self.assertEqual(len(asked), before)
        # A real fleetd, single, says it leads: given with a dead replica first, the job's
        # client reaches it over mutual TLS.
        job = self.demo.issue_job(TENANT)
        with self.fleet.Client(f"{dead},{self.demo.grpc}", tenant=TENANT, **job) as client:
            self.assertEqual(client.connection.endpoint(), self.demo.grpc)
            self.assertIsNotNone(client.allocations())

    def test_each_call_sends_the_newest_log_position_an_answer_named(self) -> None:
        """Read-your-writes (docs/ha.md): a replica's answers name its log position in
        trailing metadata; the client sends the newest it saw with every later call, a
        refusal's included, and never goes back."""
        from concurrent import futures

        import grpc
        from fleet import core
        from fleet.v1 import topology_pb2
        sent: "list[str]" = []
        answers = [("41", None), ("17", None), ("52", grpc.StatusCode.UNAVAILABLE), ("x", None)]

        def list_allocations(request, context):
            sent.append(dict(context.invocation_metadata()).get(
                core.MIN_LOG_POSITION_METADATA_KEY, ""))
            position, refusal = answers[len(sent) - 1]
            context.set_trailing_metadata(((core.LOG_POSITION_METADATA_KEY, position),))
            if refusal is not None:
                context.abort(refusal, "not the leader: elsewhere leads")
            return topology_pb2.ListAllocationsResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "fleet.v1.TopologyService", {"ListAllocations": grpc.unary_unary_rpc_method_handler(
                list_allocations,
                request_deserializer=topology_pb2.ListAllocationsRequest.FromString,
                response_serializer=topology_pb2.ListAllocationsResponse.SerializeToString)})])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        with self.fleet.Client(f"127.0.0.1:{port}", insecure=True, tenant=TENANT) as client:
            client.allocations()
            client.allocations()
            with self.assertRaises(self.fleet.FleetError):
                client.allocations()
            client.allocations()  # An answer that names no number leaves the position.
            self.assertEqual(client.log_position.seen, 52)
        self.assertEqual(sent, ["", "41", "41", "52"])


GROUPS = {"client": [ClientTest, CredentialsTest, LeaderEndpointTest]}

# The tests name their credentials; a caller's FLEET_* settings must not override them.
FLEET_SETTINGS = ("FLEET_SERVER", "FLEET_CA", "FLEET_CERT", "FLEET_KEY", "FLEET_INSECURE",
                  "FLEET_CONTEXT", "FLEET_CONFIG")


def run(classes: List[type], patterns: List[str]) -> int:
    """Runs the test classes against one fleetd --demo (started by the first test that needs
    it, stopped at the end); 0 when they pass. Shared by the other tests/python files."""
    require_client()
    for name in FLEET_SETTINGS:
        os.environ.pop(name, None)
    loader = unittest.TestLoader()
    if patterns:
        loader.testNamePatterns = [f"*{p}*" for p in patterns]
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(c) for c in classes)
    try:
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    finally:
        if _demo is not None:
            _demo.stop()
    if not result.wasSuccessful():
        if _demo is not None:
            print(f"---- fleetd stderr (last lines, {_demo.stderr_path}):\n{_demo.stderr_tail()}")
        return 1
    if _demo is not None:
        _demo.remove()
    return 0


def arguments(description: str, groups: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--group", choices=sorted(groups), required=True)
    parser.add_argument("-k", dest="patterns", action="append", default=[],
                        help="run only tests whose name holds this substring")
    return parser.parse_args()


def main() -> int:
    args = arguments(__doc__.splitlines()[0], list(GROUPS))
    return run(GROUPS[args.group], args.patterns)


if __name__ == "__main__":
    sys.exit(main())
