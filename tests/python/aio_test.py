#!/usr/bin/env python3
"""The asyncio client (fleet.aio) and the blocking client's non-blocking forms
(Topology.start_phase, Topology.changes, Client.open) against a real `fleetd --demo`.

Run by ctest as python.aio (tests/python/CMakeLists.txt):

    python3 aio_test.py --group aio [-k PATTERN]

with PYTHONPATH holding the built package and FLEET_BIN_DIR the built binaries, as
client_test.py (whose fleetd --demo harness this uses). Exit 77 only when python3-grpcio,
python3-protobuf or python3-grpc-tools is absent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import os
import sys
import time
import unittest
from typing import Any, Callable, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import GPUS, JOB_CONTEXT, TENANT, WAIT, FleetTestCase  # noqa: E402


def phases(fleet: Any) -> dict:
    """dp: a bidirectional ring of the eight GPUs; tp: a duplex link per GPU pair."""
    return {"dp": fleet.ring(GPUS),
            "tp": fleet.links([(GPUS[i], GPUS[i + 1]) for i in range(0, 8, 2)], duplex=True)}


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Polls ``condition`` on the loop until it holds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


class AioTest(unittest.IsolatedAsyncioTestCase):
    """fleet.aio.Client and fleet.aio.Topology (python.aio)."""

    @classmethod
    def setUpClass(cls) -> None:
        client_test.demo()  # Started off the loop: starting it blocks for a while.

    async def asyncSetUp(self) -> None:
        import fleet
        import fleet.aio
        self.fleet = fleet
        self.demo = client_test.demo()
        self.client = fleet.aio.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                       context=JOB_CONTEXT)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    def assertAllActive(self, allocation: Any, phase: str) -> None:
        FleetTestCase.assertAllActive(self, allocation, phase)  # type: ignore[arg-type]

    async def test_ring_becomes_ready_and_is_released_on_exit(self) -> None:
        async with await self.client.topology(ring=GPUS[:4], bidirectional=False, lease=60,
                                              name="aio-ring") as topo:
            self.assertIsInstance(topo, self.fleet.aio.Topology)
            a = await topo.wait_ready(timeout=WAIT)
            self.assertEqual(topo.state, "READY")
            self.assertEqual((a.tenant, a.name, list(a.members)), (TENANT, "aio-ring", GPUS[:4]))
            self.assertEqual(len(a.circuits), 4)  # gpu1→gpu2→gpu3→gpu4→gpu1
            self.assertAllActive(a, "")
            allocation_id = topo.id
        a = await self.client.allocation(allocation_id)
        self.assertEqual(self.fleet.state_name(a.state), "RELEASED")
        # Leaving the block released it, so the renewal task is gone too.
        self.assertFalse([t for t in asyncio.all_tasks()
                          if t.get_name() == f"fleet-keepalive-{allocation_id}"])

    async def test_phase_and_start_phase_overlap_with_compute(self) -> None:
        async with await self.client.topology(phases=phases(self.fleet), lease=60) as topo:
            await topo.wait_ready(timeout=WAIT)
            switch = await topo.phase("tp", timeout=WAIT)
            self.assertIsInstance(switch, self.fleet.PhaseSwitch)
            self.assertEqual((switch.phase, switch.allocation.active_phase), ("tp", "tp"))
            self.assertAllActive(switch.allocation, "tp")
            self.assertGreater(switch.latency, 0)

            pending = await topo.start_phase("dp", timeout=WAIT)
            self.assertIsInstance(pending, asyncio.Task)
            # fleetd took the switch before start_phase returned: the allocation is already
            # in phase dp, whatever the job does next.
            self.assertEqual(topo.active_phase, "dp")
            # Compute that blocks (here on a thread, so the loop keeps watching).
            total = await asyncio.to_thread(lambda: sum(i * i for i in range(200_000)))
            self.assertGreater(total, 0)
            switch = await pending
            self.assertEqual(switch.phase, "dp")
            self.assertEqual(self.fleet.state_name(switch.allocation.state), "READY")
            self.assertAllActive(switch.allocation, "dp")
            self.assertEqual(len([c for c in switch.allocation.circuits if c.phase == "dp"]), 16)

    async def test_a_bad_phase_is_refused_when_the_switch_starts(self) -> None:
        async with await self.client.topology(phases=phases(self.fleet), lease=60) as topo:
            await topo.wait_ready(timeout=WAIT)
            with self.assertRaises(self.fleet.NotFound) as caught:
                await topo.start_phase("no-such-phase")
            self.assertIn("no-such-phase", caught.exception.message)
            with self.assertRaises(ValueError) as caught_value:
                await topo.start_phase("")
            self.assertIn("phase ''", str(caught_value.exception))
            with self.assertRaises(TypeError):
                await topo.phase(3)  # type: ignore[arg-type]
            self.assertEqual(topo.active_phase, "dp")

    async def test_changes_follow_the_allocation_to_its_end(self) -> None:
        topo = await self.client.topology(ring=GPUS[4:], bidirectional=False, lease=60,
                                          keepalive=False)
        seen: List[str] = []
        async with contextlib.aclosing(topo.changes(timeout=WAIT)) as changes:
            async for a in changes:
                seen.append(self.fleet.state_name(a.state))
                if a.state == self.fleet.v1.topology_pb2.ALLOCATION_STATE_READY:
                    break
        self.assertEqual(seen[-1], "READY", seen)
        # Released from another task while this one follows: the iteration ends by itself
        # with the RELEASED allocation.
        release = asyncio.get_running_loop().create_task(topo.release())
        ends: List[str] = [self.fleet.state_name(a.state)
                           async for a in topo.changes(timeout=WAIT)]
        await release
        self.assertEqual(ends[-1], "RELEASED", ends)
        self.assertEqual(topo.state, "RELEASED")

    async def test_lease_is_renewed_by_a_task(self) -> None:
        topo = await self.client.topology(ring=GPUS[:4], bidirectional=False, lease=2)
        try:
            await topo.wait_ready(timeout=WAIT)
            first = topo.lease_expires
            assert first is not None
            self.assertTrue(await until(lambda: topo.lease_expires is not None
                                        and topo.lease_expires > first, 10),
                            "the lease was not renewed")
            # Past the first expiry and fleetd's once-a-second lease check: still READY.
            after = first + datetime.timedelta(seconds=1.5)
            self.assertTrue(await until(
                lambda: datetime.datetime.now(datetime.timezone.utc) > after, 10))
            a = await topo.refresh()
            self.assertEqual(self.fleet.state_name(a.state), "READY", a.reason)
            self.assertIsNone(topo.keepalive_error)
        finally:
            await topo.release()

    async def test_errors_map_to_fleet_errors(self) -> None:
        with self.assertRaises(self.fleet.NotFound):
            await self.client.open("a-no-such")
        with self.assertRaises(ValueError) as caught:
            await self.client.topology(ring=GPUS[:4], lease=60, on_failure={"spares": "nearby"})
        self.assertIn("on_failure.spares 'nearby' is not one of: same-switch, any",
                      str(caught.exception))
        with self.assertRaises(ValueError):
            await self.client.topology(ring=GPUS[:4], links=[("gpu1", "gpu2")])
        with self.assertRaises(self.fleet.PermissionDenied):
            await self.client.topology(ring=GPUS[:2], lease=60, tenant="team-b")
        with self.assertRaises(self.fleet.InvalidArgument):
            await self.client.topology(ring=["gpu1"], lease=60)

    async def test_a_replacement_reaches_an_async_callback(self) -> None:
        told: List[Any] = []
        event = asyncio.Event()

        async def remap(r: Any) -> None:
            told.append(r)
            event.set()

        async with await self.client.topology(ring=GPUS[:4], bidirectional=False,
                                              lease=60) as topo:
            await topo.wait_ready(timeout=WAIT)
            self.assertIs(topo.on_member_replaced(remap), remap)
            a = await topo.replace("gpu2", timeout=WAIT)
            self.assertNotIn("gpu2", a.members)
            await asyncio.wait_for(event.wait(), WAIT)
            r = told[0]
            self.assertIsInstance(r, self.fleet.MemberReplacement)
            self.assertEqual((r.failed, r.position, r.index), ("gpu2", 1, 0))
            self.assertEqual(list(r.members), ["gpu1", r.spare, "gpu3", "gpu4"])
            allocation_id = topo.id
        self.assertEqual(len(told), 1)
        self.assertFalse([t for t in asyncio.all_tasks()
                          if t.get_name() == f"fleet-follow-{allocation_id}"])


class NonBlockingTest(FleetTestCase):
    """The blocking client's start_phase, changes and open (python.aio)."""

    def test_start_phase_returns_a_future(self) -> None:
        with self.client.topology(phases=phases(self.fleet), lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            pending = topo.start_phase("tp", timeout=WAIT)
            self.assertIsInstance(pending, concurrent.futures.Future)
            self.assertEqual(topo.active_phase, "tp")  # Accepted before it returned.
            switch = pending.result(WAIT)
            self.assertEqual(switch.phase, "tp")
            self.assertAllActive(switch.allocation, "tp")
            with self.assertRaises(self.fleet.NotFound):
                topo.start_phase("no-such-phase")

    def test_changes_and_open(self) -> None:
        topo = self.client.topology(ring=GPUS[:4], bidirectional=False, lease=60)
        self.addCleanup(topo.release)
        states = []
        for a in topo.changes(timeout=WAIT):
            states.append(self.fleet.state_name(a.state))
            if states[-1] == "READY":
                break
        self.assertEqual(states[-1], "READY", states)
        # Another process's handle on it (the launcher requested it): no renewals of its own.
        other = self.fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                  context=JOB_CONTEXT)
        self.addCleanup(other.close)
        opened = other.open(topo.id)
        self.assertEqual((opened.id, opened.state, opened.members), (topo.id, "READY", GPUS[:4]))
        self.assertEqual(opened.wait_ready(timeout=WAIT).id, topo.id)
        with self.assertRaises(ValueError):
            other.open("")
        with self.assertRaises(self.fleet.NotFound):
            other.open("a-no-such")


GROUPS = {"aio": [AioTest, NonBlockingTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
