#!/usr/bin/env python3
"""Phased allocations from Python against a real `fleetd --demo`: phase switches, phases
prepared together (make before break), the rule a phase wait follows, and
clients/python/examples/train_step.py.

Run by ctest as python.phases (tests/python/CMakeLists.txt):

    python3 phases_test.py --group phases [-k PATTERN]

with PYTHONPATH holding the built package and FLEET_BIN_DIR the built binaries, as
client_test.py. Exit 77 only when python3-grpcio or python3-protobuf is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import GPUS, JOB_CONTEXT, TENANT, WAIT, FleetTestCase  # noqa: E402


class PhaseTest(FleetTestCase):
    """Phased allocations (python.phases)."""

    def test_phase_switches_reach_ready(self) -> None:
        phases = {
            "dp": self.fleet.ring(GPUS),  # bidirectional ring: the data-parallel all-reduce
            "tp": self.fleet.links([(GPUS[i], GPUS[i + 1]) for i in range(0, 8, 2)],
                                   duplex=True),  # pairs: tensor parallel
        }
        topo = self.client.topology(phases=phases, lease=60, name="phased")
        with topo:
            a = topo.wait_ready(timeout=WAIT)
            self.assertEqual(list(a.phases), ["dp", "tp"])
            self.assertEqual(a.active_phase, "dp")
            self.assertAllActive(a, "dp")
            for name, circuits in (("tp", 8), ("dp", 16), ("tp", 8)):
                switch = topo.phase(name, timeout=WAIT)
                a = switch.allocation
                self.assertEqual(switch.phase, name)
                self.assertEqual(a.state, "READY")
                self.assertEqual(a.active_phase, name)
                self.assertAllActive(a, name)
                self.assertEqual(len([c for c in a.circuits if c.phase == name]), circuits)
                for c in a.circuits:
                    if c.phase != name:
                        self.assertEqual(c.state, "INACTIVE", c)
                self.assertGreater(switch.latency, 0)
                self.assertEqual(float(switch), switch.latency)
            allocation_id = topo.id
        self.assertEqual(self.client.allocation(allocation_id).state, "RELEASED")

    def test_prepared_phases_switch_without_a_switch_command(self) -> None:
        phases = {
            "dp": self.fleet.ring(GPUS, bidirectional=False),  # one port per GPU
            "tp": self.fleet.links([(GPUS[i], GPUS[i + 1]) for i in range(0, 8, 2)],
                                   duplex=True),  # the other port
        }
        topo = self.client.topology(phases=phases, prepare_next_phase=True, lease=60)
        with topo:
            a = topo.wait_ready(timeout=WAIT)
            for c in a.circuits:  # Both phases programmed and trained at admission.
                self.assertEqual(c.state, "ACTIVE", c)
            for name in ("tp", "dp"):
                switch = topo.phase(name, timeout=WAIT)
                self.assertEqual(switch.allocation.state, "READY")
                self.assertEqual(switch.allocation.active_phase, name)
                self.assertEqual((switch.cross_connects_removed, switch.cross_connects_added),
                                 (0, 0))
        with self.assertRaisesRegex(ValueError, "prepare_next_phase: needs exactly two phases"):
            self.client.topology(phases={"dp": phases["dp"]}, prepare_next_phase=True)

    def test_a_wait_for_a_phase_ends_when_another_is_active(self) -> None:
        # fleet.core.check_phase, the rule both clients' phase waits follow, on allocations
        # made here.
        from fleet import core
        from fleet.v1 import topology_pb2 as pb

        def allocation(state: int, phase: str, updated: int,
                       reason: str = "") -> "core.Allocation":
            a = pb.Allocation(id="a1", state=state, active_phase=phase, reason=reason)
            a.updated.FromSeconds(updated)
            return core.Allocation(a)

        since = allocation(pb.ALLOCATION_STATE_PROGRAMMING, "tp", 10)  # ActivatePhase's answer
        for still_tp in (allocation(pb.ALLOCATION_STATE_TRAINING, "tp", 11),
                         allocation(pb.ALLOCATION_STATE_DEGRADED, "tp", 11),
                         allocation(pb.ALLOCATION_STATE_READY, "dp", 9),  # Before the switch.
                         allocation(pb.ALLOCATION_STATE_RELEASED, "dp", 12)):  # check_progress's
            core.check_phase("tp", still_tp, since)
        for state in (pb.ALLOCATION_STATE_READY, pb.ALLOCATION_STATE_PROGRAMMING):
            with self.assertRaises(self.fleet.PhaseSuperseded) as caught:
                core.check_phase("tp", allocation(state, "dp", 12), since)
            self.assertEqual((caught.exception.phase, caught.exception.active_phase),
                             ("tp", "dp"))
            self.assertEqual(str(caught.exception),
                             "allocation a1: the switch to phase tp was superseded: phase dp is "
                             f"active now ({self.fleet.state_name(state)})")
        # fleetd rolled a failed switch back: DEGRADED in the phase before, at once.
        rolled_back = allocation(pb.ALLOCATION_STATE_DEGRADED, "dp", 12,
                                 "phase tp: program failed: refused; back on phase dp")
        with self.assertRaises(self.fleet.Degraded) as degraded:
            core.check_phase("tp", rolled_back, since)
        self.assertIn("DEGRADED in phase dp, not tp: phase tp: program failed",
                      str(degraded.exception))

    def test_unknown_phase_is_refused(self) -> None:
        phases = {"dp": {"ring": GPUS}, "tp": {"links": [("gpu1", "gpu2")], "duplex": True}}
        topo = self.client.topology(phases=phases, lease=60)
        with topo:
            topo.wait_ready(timeout=WAIT)
            with self.assertRaises(self.fleet.FleetError) as caught:
                topo.phase("no-such-phase")
            self.assertIsInstance(caught.exception, self.fleet.NotFound)
            self.assertIn("no-such-phase", caught.exception.message)


class FabricTest(FleetTestCase):
    """GetFabric from Python: a job's own planner's view (python.phases)."""

    def test_fabric_of_candidates_then_of_the_allocation_they_became(self) -> None:
        from fleet.v1 import topology_pb2
        free = self.client.fabric(GPUS[:4])
        self.assertEqual(list(free.devices), GPUS[:4])
        self.assertEqual(len(free.pairs), 12)
        for gpu in GPUS[:4]:
            self.assertEqual(free.degree(gpu), 2)  # One O-NIC, two ports, both free.
            self.assertEqual({p.switch_id for p in free.devices[gpu].ports}, {"ocs1"})
        self.assertTrue(free.joinable("gpu1", "gpu3"))
        self.assertEqual(free.hops("gpu1", "gpu3"), 0)
        self.assertEqual(free.why_not("gpu1", "gpu3"), "")
        self.assertEqual([c.stage for c in free.costs.values()],
                         ["quiesce", "program", "verify", "retrain"])
        phases = {"dp": self.fleet.ring(GPUS[:4]),
                  "tp": self.fleet.links([("gpu1", "gpu2"), ("gpu3", "gpu4")], duplex=True)}
        with self.client.topology(phases=phases, lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            topo.phase("tp", timeout=WAIT)
            own = topo.fabric()
            self.assertEqual(list(own.devices), list(topo.members))
            for gpu in own.devices:
                self.assertEqual(own.degree(gpu), 2)  # Its own ports stay usable to it.
                self.assertEqual({p.use for p in own.devices[gpu].ports},
                                 {topology_pb2.PORT_USE_OWN})
            # Two changes of circuits ran (admission, the switch to tp): every stage measured.
            for cost in own.costs.values():
                self.assertGreaterEqual(cost.samples, 2, cost)
                self.assertLessEqual(cost.median, cost.p90)
            self.assertGreater(own.change_seconds(), 0)
            # As candidates, the same devices are this tenant's allocation's: held, named.
            held = self.client.fabric(["gpu1", "gpu5"])
            self.assertEqual(held.degree("gpu1"), 0)
            self.assertEqual({p.holder for p in held.devices["gpu1"].ports}, {topo.id})
            self.assertFalse(held.joinable("gpu1", "gpu5"))
            self.assertIn("no usable port of gpu1", held.why_not("gpu1", "gpu5"))
            # Another tenant may not ask about them, nor about the allocation.
            other = self.fleet.Client(self.demo.grpc, tenant="team-b",
                                      **self.demo.issue_job("team-b"))
            self.addCleanup(other.close)
            with self.assertRaises(self.fleet.PermissionDenied) as caught:
                other.fabric(["gpu5", "gpu1"])
            self.assertIn("devices[1]: device gpu1 is in another tenant's allocation",
                          caught.exception.message)
            self.assertNotIn(topo.id, caught.exception.message)
            with self.assertRaises(self.fleet.NotFound):
                other.fabric(allocation=topo.id)
            self.assertEqual(other.fabric(["gpu5", "gpu6"]).degree("gpu5"), 2)
        with self.assertRaises(self.fleet.InvalidArgument) as caught:
            self.client.fabric(["gpu1", "gpu1"])
        self.assertIn("devices[1]: device gpu1 is named twice", caught.exception.message)
        with self.assertRaises(TypeError):
            self.client.fabric("gpu1")

    def test_traffic_phases_carry_the_heaviest_pairs(self) -> None:
        matrix = {("gpu1", "gpu2"): 4e9, ("gpu3", "gpu4"): 4e9, ("gpu1", "gpu3"): 1.0}
        with self.client.topology(phases={"mix": self.fleet.traffic(GPUS[:4], matrix),
                                          "dp": self.fleet.ring(GPUS[:4])},
                                  lease=60) as topo:
            a = topo.wait_ready(timeout=WAIT)
            ends = {(c.source.onic.split("-")[0], c.destination.onic.split("-")[0])
                    for c in a.circuits if c.phase == "mix"}
            self.assertIn(("gpu1", "gpu2"), ends)
            self.assertIn(("gpu4", "gpu3"), ends)  # Traffic-aware links are duplex.
        with self.assertRaisesRegex(ValueError, "'gpu9' is not one of the members"):
            self.fleet.traffic(GPUS[:2], {("gpu1", "gpu9"): 1.0})
        with self.assertRaisesRegex(ValueError, "no pair sends any bytes"):
            self.fleet.traffic(GPUS[:2], {("gpu1", "gpu2"): 0.0})
        with self.assertRaisesRegex(ValueError, "a device sends to itself"):
            self.fleet.traffic(GPUS[:2], {("gpu1", "gpu1"): 1.0})
        with self.assertRaisesRegex(ValueError, "bytes are a finite number"):
            self.fleet.traffic(GPUS[:2], {("gpu1", "gpu2"): float("nan")})


class ExampleTest(FleetTestCase):
    """clients/python/examples against the demo (python.phases)."""

    def run_example(self, name: str, *args: str) -> str:
        """Runs examples/`name` as the demo's job with `args`; its stdout, once it exits 0."""
        example = os.path.join(os.environ.get("FLEET_SOURCE_DIR", ""),
                               "clients/python/examples", name)
        env = dict(os.environ, FLEET_CONFIG=self.demo.config, FLEET_CONTEXT=JOB_CONTEXT)
        run = subprocess.run([sys.executable, example, *args], env=env, capture_output=True,
                             text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        return run.stdout

    def test_train_step_switches_phases(self) -> None:
        out = self.run_example("train_step.py", "--steps", "2")
        self.assertIn("READY", out)
        self.assertEqual(out.count("latency"), 4, out)  # tp and dp, two steps
        self.assertIn("released", out)

    def test_plan_phases_plans_from_the_fabric_and_switches(self) -> None:
        out = self.run_example("plan_phases.py", "--steps", "2")
        self.assertIn("Fabric(8 devices, 56/56 pairs joinable)", out)
        self.assertIn("gpu1: 2 of 2 ports usable, on switch ocs1", out)
        self.assertIn("phase tp: 100% of", out)
        self.assertIn("phase dp: 100% of", out)
        # tp takes a port of each GPU and dp two: they cannot be on the switch side by side.
        self.assertIn("make before break: no", out)
        self.assertIn("READY in phase tp\n", out)
        self.assertEqual(out.count("latency"), 4, out)  # dp and tp, two steps
        self.assertIn("a change of circuits costs", out)
        self.assertIn("released", out)
        # Two phases of one link per GPU each: asked for side by side, and prepared.
        graph = os.path.join(self.demo.dir, "graph.json")
        with open(graph, "w", encoding="utf-8") as f:
            f.write('{"devices": ["gpu1", "gpu2", "gpu3", "gpu4"], "phases": {'
                    '"a": [["gpu1", "gpu2", 1e9], ["gpu3", "gpu4", 1e9]], '
                    '"b": [["gpu1", "gpu3", 1e9], ["gpu2", "gpu4", 1e9]]}}')
        out = self.run_example("plan_phases.py", "--steps", "1", "--task-graph", graph)
        self.assertIn("make before break: asked", out)
        self.assertIn("READY in phase a, the other prepared", out)


GROUPS = {"phases": [PhaseTest, FabricTest, ExampleTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
