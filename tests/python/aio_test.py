#!/usr/bin/env python3
"""The asyncio client (fleet.aio) and the blocking client's non-blocking forms
(Topology.start_phase, Topology.changes, Client.open) against a real `fleetd --demo`.

Run by ctest as python.aio (tests/python/CMakeLists.txt):

    python3 aio_test.py --group aio [-k PATTERN]

with PYTHONPATH holding the built package and FLEET_BIN_DIR the built binaries, as
client_test.py (whose fleetd --demo harness this uses). Exit 77 only when python3-grpcio or
python3-protobuf is absent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import gc
import os
import sys
import threading
import time
import unittest
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import (GPUS, JOB_CONTEXT, TENANT, WAIT, FleetTestCase,  # noqa: E402
                         eventually)


def phases(fleet: Any) -> dict:
    """dp: a bidirectional ring of the eight GPUs; tp: a duplex link per GPU pair."""
    return {"dp": fleet.ring(GPUS),
            "tp": fleet.links([(GPUS[i], GPUS[i + 1]) for i in range(0, 8, 2)], duplex=True)}


def small_phases(fleet: Any, gpus: List[str]) -> dict:
    """phases() over four GPUs: dp a ring, tp duplex pairs."""
    return {"dp": fleet.ring(gpus),
            "tp": fleet.links([(gpus[0], gpus[1]), (gpus[2], gpus[3])], duplex=True)}


class GatedWatch:
    """A client's stub whose WatchAllocation waits for ``gate`` first: a wait that is slow to
    open its watch, as a busy process's thread may be. Every other RPC passes through."""

    def __init__(self, stub: Any, gate: threading.Event) -> None:
        self._stub = stub
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    def WatchAllocation(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - gRPC's name
        self._gate.wait(WAIT)
        return self._stub.WatchAllocation(*args, **kwargs)


def phase_threads(allocation_id: str) -> List[threading.Thread]:
    """The blocking client's start_phase threads still running for the allocation."""
    return [t for t in threading.enumerate() if t.name.startswith(f"fleet-phase-{allocation_id}-")]


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

    def loop_errors(self) -> List[Dict[str, Any]]:
        """What the loop's exception handler is given from now on ("Task exception was never
        retrieved", for one)."""
        seen: List[Dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        previous = loop.get_exception_handler()
        loop.set_exception_handler(lambda _, context: seen.append(context))
        self.addCleanup(loop.set_exception_handler, previous)
        return seen

    async def release_quietly(self, allocation_id: str) -> None:
        """Releases what a failed test may have left (a cleanup: self.client is closed by
        then); one already released is fine."""
        async with self.fleet.aio.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                         context=JOB_CONTEXT) as client:
            with contextlib.suppress(self.fleet.FleetError):
                await client.release(allocation_id)

    def blocking_client(self) -> Any:
        client = self.fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                   context=JOB_CONTEXT)
        self.addCleanup(client.close)
        return client

    def assertAllActive(self, allocation: Any, phase: str) -> None:
        FleetTestCase.assertAllActive(self, allocation, phase)  # type: ignore[arg-type]

    async def test_allocation_states_are_names_everywhere(self) -> None:
        """As the blocking client: every allocation returned has its state as a name."""
        from fleet.v1 import topology_pb2
        async with await self.client.topology(ring=GPUS[:4], bidirectional=False,
                                              lease=60) as topo:
            self.assertIn(topo.allocation.state, ("PENDING", "PROGRAMMING", "TRAINING", "READY"))
            ready = await topo.wait_ready(timeout=WAIT)
            self.assertIsInstance(ready, self.fleet.Allocation)
            listed = [a for a in await self.client.allocations() if a.id == topo.id]
            for a in (ready, topo.allocation, await topo.refresh(),
                      await self.client.allocation(topo.id), *listed):
                self.assertEqual(a.state, "READY", a)
                self.assertEqual([c.state for c in a.circuits], ["ACTIVE"] * 4, a)
                self.assertEqual(a.message.state, topology_pb2.ALLOCATION_STATE_READY)
            self.assertEqual([c.state for c in topo.circuits], ["ACTIVE"] * 4)
            async with contextlib.aclosing(topo.changes(timeout=WAIT)) as changes:
                async for a in changes:
                    self.assertEqual(a.state, "READY")
                    break
            self.assertEqual((await topo.release()).state, "RELEASED")
        self.assertEqual([a.state async for a in topo.changes(timeout=WAIT)], ["RELEASED"])
        other = await self.client.topology(ring=GPUS[4:], bidirectional=False, lease=60)
        self.addAsyncCleanup(self.release_quietly, other.id)
        await other.wait_ready(timeout=WAIT)
        self.assertEqual((await self.client.release(other.id)).state, "RELEASED")

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
        self.assertEqual(a.state, "RELEASED")
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
            self.assertEqual(switch.allocation.state, "READY")
            self.assertAllActive(switch.allocation, "dp")
            self.assertEqual(len([c for c in switch.allocation.circuits if c.phase == "dp"]), 16)

    async def test_a_superseded_start_phase_task_ends_at_once(self) -> None:
        errors_seen = self.loop_errors()
        client = self.blocking_client()
        loop = asyncio.get_running_loop()
        # The loop is blocked on purpose below: no "slow callback" warnings for it.
        self.addCleanup(setattr, loop, "slow_callback_duration", loop.slow_callback_duration)
        loop.slow_callback_duration = 2 * WAIT

        def switch_on(allocation_id: str) -> None:
            """Waits for the switch under way and starts the next, blocking the loop: the
            job's compute outlasted the switch and it moved on before its task ran."""
            other = client.open(allocation_id)
            other.wait_ready(timeout=WAIT)
            other.phase("dp", timeout=WAIT)

        async with await self.client.topology(phases=phases(self.fleet), lease=60) as topo:
            await topo.wait_ready(timeout=WAIT)
            # No deadline: only the switch to dp can end this wait.
            pending = await topo.start_phase("tp", timeout=None)
            switch_on(topo.id)
            with self.assertRaises(self.fleet.PhaseSuperseded) as caught:
                await asyncio.wait_for(pending, WAIT)
            e = caught.exception
            self.assertEqual((e.phase, e.active_phase), ("tp", "dp"))
            self.assertIn("the switch to phase tp was superseded: phase dp is active now",
                          str(e))
            self.assertIsInstance(e, self.fleet.AllocationError)
            # One nobody awaits ends too, and logs nothing when it is collected.
            unawaited = await topo.start_phase("tp", timeout=None)
            switch_on(topo.id)
            self.assertTrue(await until(unawaited.done, WAIT), "the wait did not end")
            del unawaited
            gc.collect()
            self.assertEqual(topo.active_phase, "dp")
        self.assertEqual(errors_seen, [])

    async def test_close_and_release_give_up_start_phase_tasks(self) -> None:
        errors_seen = self.loop_errors()
        client = self.fleet.aio.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                       context=JOB_CONTEXT)
        self.addAsyncCleanup(client.close)
        topo = await client.topology(phases=small_phases(self.fleet, GPUS[:4]), lease=60)
        self.addAsyncCleanup(self.release_quietly, topo.id)
        await topo.wait_ready(timeout=WAIT)
        # The caller's own cancel() is a CancelledError, as for any task.
        mine = await topo.start_phase("tp", timeout=None)
        mine.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await mine
        await topo.wait_ready(timeout=WAIT)  # The switch itself went on.
        self.assertEqual(topo.active_phase, "tp")
        # release() gives up a task already watching: it raises Cancelled, not the
        # CancelledError its caller would take for its own.
        watching = await topo.start_phase("dp", timeout=None)
        await asyncio.sleep(0)  # It has begun: its watch is open.
        self.assertFalse(watching.done())
        await topo.release()
        self.assertTrue(watching.done())
        with self.assertRaises(self.fleet.Cancelled) as caught:
            await watching
        self.assertIn(f"allocation {topo.id}: the wait for READY in phase dp was given up: "
                      "the topology was released", str(caught.exception))
        self.assertEqual(topo.state, "RELEASED")
        # close() gives up one that has not begun yet, so its coroutine never ran.
        other = await client.topology(phases=small_phases(self.fleet, GPUS[4:]), lease=60)
        self.addAsyncCleanup(self.release_quietly, other.id)
        await other.wait_ready(timeout=WAIT)
        unstarted = await other.start_phase("tp", timeout=None)
        await client.close()
        self.assertTrue(unstarted.done())
        self.assertFalse(unstarted.cancelled())
        with self.assertRaises(self.fleet.Cancelled) as caught:
            await unstarted
        self.assertIn("the client was closed", str(caught.exception))
        self.assertFalse([t for t in asyncio.all_tasks()
                          if t.get_name().startswith(f"fleet-phase-{other.id}-")])
        del watching, unstarted, caught
        gc.collect()
        self.assertEqual(errors_seen, [])

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
                seen.append(a.state)
                if a.state == "READY":
                    break
        self.assertEqual(seen[-1], "READY", seen)
        # Released from another task while this one follows: the iteration ends by itself
        # with the RELEASED allocation.
        release = asyncio.get_running_loop().create_task(topo.release())
        ends: List[str] = [a.state
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
            self.assertEqual(a.state, "READY", a.reason)
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

    async def test_stop_following_from_a_callback_ends_the_follower(self) -> None:
        told: List[Any] = []
        async with await self.client.topology(ring=GPUS[:4], bidirectional=False,
                                              lease=60) as topo:
            await topo.wait_ready(timeout=WAIT)
            name = f"fleet-follow-{topo.id}"

            def followers() -> List[asyncio.Task]:
                return [t for t in asyncio.all_tasks() if t.get_name() == name]

            async def once(r: Any) -> None:
                told.append(r)
                await topo.stop_following()

            topo.on_member_replaced(once)
            self.assertEqual(len(followers()), 1)
            await topo.replace("gpu2", timeout=WAIT)
            # The follower is the task that called stop_following: it ends by itself.
            self.assertTrue(await until(lambda: bool(told) and not followers(), WAIT),
                            f"told {len(told)}, followers {followers()}")
            # Unfollowed: a later replacement reaches nobody.
            await topo.replace("gpu3", timeout=WAIT)
            # A new callback gets a follower of its own, the only one.
            later: List[Any] = []
            event = asyncio.Event()
            topo.on_member_replaced(lambda r: (later.append(r), event.set()))
            self.assertEqual(len(followers()), 1)
            await topo.replace("gpu4", timeout=WAIT)
            await asyncio.wait_for(event.wait(), WAIT)
            self.assertEqual([r.failed for r in told], ["gpu2"])
            self.assertEqual([r.failed for r in later], ["gpu4"])
            self.assertEqual(len(followers()), 1)
        # close() (and release(), leaving the block) stop it.
        self.assertTrue(await until(lambda: not followers(), WAIT))


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

    def gate_watches(self) -> threading.Event:
        """Gates the client's watches (GatedWatch) until the returned event is set."""
        gate = threading.Event()
        self.addCleanup(gate.set)
        stub = self.client.stub
        self.client.stub = GatedWatch(stub, gate)
        self.addCleanup(setattr, self.client, "stub", stub)
        return gate

    def test_a_superseded_start_phase_future_ends_at_once(self) -> None:
        with self.client.topology(phases=phases(self.fleet), lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            gate = self.gate_watches()
            # No deadline: only the switch to dp can end this wait.
            pending = topo.start_phase("tp", timeout=None)
            # Its thread is slow to open its watch; meanwhile the job switches on to dp.
            other = self.fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                      context=JOB_CONTEXT)
            self.addCleanup(other.close)
            handle = other.open(topo.id)
            handle.wait_ready(timeout=WAIT)  # READY in tp, unseen by the gated wait.
            handle.phase("dp", timeout=WAIT)
            gate.set()
            with self.assertRaises(self.fleet.PhaseSuperseded) as caught:
                pending.result(WAIT)
            self.assertEqual((caught.exception.phase, caught.exception.active_phase),
                             ("tp", "dp"))
            self.assertIn("the switch to phase tp was superseded: phase dp is active now",
                          str(caught.exception))
            self.assertTrue(eventually(lambda: not phase_threads(topo.id), WAIT))

    def test_a_start_phase_future_can_be_cancelled(self) -> None:
        # tp's one link gets no light, so READY in tp never comes: its links stay DEGRADED.
        from fleet.v1 import inventory_pb2, inventory_pb2_grpc
        with self.demo.channel() as channel:
            onic = inventory_pb2_grpc.InventoryServiceStub(channel).GetOnic(
                inventory_pb2.GetOnicRequest(id="gpu7-n0"), timeout=10)
        egress = next(p.rx.port for p in onic.ports if p.index == 1)
        link = self.fleet.Link
        with self.client.topology(phases={"dp": self.fleet.links([link("gpu7-n0/1", "gpu8-n0/1")]),
                                          "tp": self.fleet.links([link("gpu8-n0/1", "gpu7-n0/1")])},
                                  lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            self.addCleanup(self.demo.switch_fault, None)
            self.demo.switch_fault({"power_drop_db": 30.0}, f"ports/{egress}")
            pending = topo.start_phase("tp", timeout=None)
            # The wait's own watch sees it DEGRADED in tp: it is waiting for fleetd's retries.
            self.assertTrue(eventually(lambda: topo.state == "DEGRADED", WAIT), topo.state)
            self.assertEqual(topo.active_phase, "tp")
            self.assertFalse(pending.done())
            self.assertTrue(pending.cancel())  # Not yet done: the wait is given up.
            self.assertTrue(pending.cancelled())
            self.assertTrue(eventually(lambda: not phase_threads(topo.id), WAIT),
                            "its thread still waits")
            with self.assertRaises(concurrent.futures.CancelledError):
                pending.result(0)
            # The light back, fleetd's retry trains the link: READY in tp.
            self.demo.switch_fault(None)
            done = topo.start_phase("tp", timeout=WAIT)
            self.assertEqual(done.result(WAIT).phase, "tp")
            self.assertFalse(done.cancel())  # Done: nothing left to give up.

    def test_release_and_close_give_up_start_phase_futures(self) -> None:
        with self.client.topology(phases=small_phases(self.fleet, GPUS[:4]), lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            gate = self.gate_watches()
            released = topo.start_phase("tp", timeout=None)
            topo.release()
            gate.set()
            with self.assertRaises(self.fleet.Cancelled) as caught:
                released.result(WAIT)
            self.assertIn("the topology was released", str(caught.exception))
        self.assertTrue(eventually(lambda: not phase_threads(topo.id), WAIT))
        # Closing the client gives them up too (and its channel is closed under the thread).
        client = self.fleet.Client(self.demo.grpc, tenant=TENANT, config=self.demo.config,
                                   context=JOB_CONTEXT)
        self.addCleanup(client.close)
        topo = client.topology(phases=small_phases(self.fleet, GPUS[4:]), lease=60)
        self.addCleanup(self.client.release, topo.id)
        topo.wait_ready(timeout=WAIT)
        gate = threading.Event()
        self.addCleanup(gate.set)
        client.stub = GatedWatch(client.stub, gate)
        closed = topo.start_phase("tp", timeout=None)
        client.close()
        gate.set()
        with self.assertRaises(self.fleet.Cancelled) as caught:
            closed.result(WAIT)
        self.assertIn("the client was closed", str(caught.exception))
        self.assertTrue(eventually(lambda: not phase_threads(topo.id), WAIT))

    def test_changes_and_open(self) -> None:
        topo = self.client.topology(ring=GPUS[:4], bidirectional=False, lease=60)
        self.addCleanup(topo.release)
        states = []
        for a in topo.changes(timeout=WAIT):
            states.append(a.state)
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
