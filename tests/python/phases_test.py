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


class ExampleTest(FleetTestCase):
    """clients/python/examples/train_step.py against the demo (python.phases)."""

    def test_train_step_switches_phases(self) -> None:
        example = os.path.join(os.environ.get("FLEET_SOURCE_DIR", ""),
                               "clients/python/examples/train_step.py")
        env = dict(os.environ, FLEET_CONFIG=self.demo.config, FLEET_CONTEXT=JOB_CONTEXT)
        run = subprocess.run([sys.executable, example, "--steps", "2"], env=env,
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("READY", run.stdout)
        self.assertEqual(run.stdout.count("latency"), 4, run.stdout)  # tp and dp, two steps
        self.assertIn("released", run.stdout)


GROUPS = {"phases": [PhaseTest, ExampleTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
