"""The asyncio client: :class:`fleet.Client` and :class:`fleet.Topology` over ``grpc.aio``,
with the same names, arguments, errors and results, every call awaited.

Example::

    import asyncio
    import fleet.aio

    async def main() -> None:
        async with fleet.aio.Client() as client:   # credentials as fleetctl's
            phases = {"dp": fleet.ring(gpus), "tp": fleet.links(pairs, duplex=True)}
            async with await client.topology(phases=phases, lease=60) as topo:
                await topo.wait_ready(timeout=60)
                pending = await topo.start_phase("tp")   # the switch has started
                await asyncio.to_thread(compute)         # overlap it with work
                switch = await pending                   # READY in tp: a PhaseSwitch
                async for allocation in topo.changes(timeout=5):
                    ...

    asyncio.run(main())

Make the client inside the event loop that uses it (grpc.aio channels belong to one loop).
Background work — lease renewals and following for :meth:`Topology.on_member_replaced` —
runs as tasks on that loop, so code that blocks the loop (a long synchronous compute) also
delays them: run such work with ``asyncio.to_thread`` or keep the lease longer than it.
Building requests, naming the caller, and what counts as READY, failed or released are
shared with the blocking client (:mod:`fleet.core`); only the calls differ.
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import logging
import time
from types import TracebackType
from typing import (Any, AsyncIterator, Callable, Dict, Iterable, List, Mapping, Optional, Set,
                    Tuple, Type, Union)

import grpc
import grpc.aio

from fleet import core, credentials, errors, fabric, spec
from fleet.core import (Allocation, Circuit, MemberReplacedCallback, MemberReplacement,
                        PhaseSwitch, Seconds)
from fleet.fabric import Fabric
from fleet.ranks import Ranks
from fleet.v1 import admin_pb2, admin_pb2_grpc, topology_pb2, topology_pb2_grpc

log = logging.getLogger("fleet")

__all__ = ["Client", "Topology"]


class Client:
    """An asyncio connection to fleetd's TopologyService: :class:`fleet.Client` with every
    call a coroutine. Arguments are :class:`fleet.Client`'s; ``channel`` is a
    ``grpc.aio.Channel``. Use it as ``async with`` (or ``await client.close()``)."""

    def __init__(self, address: Optional[str] = None, *, tenant: Optional[str] = None,
                 principal: Optional[str] = None, timeout: float = 30.0,
                 channel: Optional[grpc.aio.Channel] = None, ca: Optional[str] = None,
                 cert: Optional[str] = None, key: Optional[str] = None,
                 insecure: Optional[bool] = None, context: Optional[str] = None,
                 config: Optional[str] = None) -> None:
        if channel is None:
            self.connection: Optional[credentials.Connection] = credentials.resolve(
                address, ca=ca, cert=cert, key=key, insecure=insecure, context=context,
                config=config)
            address = self.connection.server
            channel = self.connection.aio_channel()
            self._owns_channel = True
        else:
            self.connection = None
            self._owns_channel = False
        self.address = address
        self.tenant = tenant
        self.principal = principal
        self.timeout = timeout
        self._channel = channel
        self.stub = topology_pb2_grpc.TopologyServiceStub(channel)
        """The generated stub over the asyncio channel: its calls are awaited."""
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self._closed = False
        self.log_position = core.LogPosition()
        """As :attr:`fleet.Client.log_position`."""
        # Those with background tasks: renewals, a follower, start_phase waits.
        self._topologies: Set["Topology"] = set()

    # --- plumbing ---

    def metadata(self, tenant: Optional[str] = None) -> Tuple[Tuple[str, str], ...]:
        """As :meth:`fleet.Client.metadata`."""
        return core.call_metadata(self.connection, self.principal, tenant or self.tenant)

    async def call(self, method: str, request: Any, *, tenant: Optional[str] = None,
                   timeout: Optional[float] = None, stub: Any = None) -> Any:
        """Awaits unary RPC ``method`` of TopologyService (or of ``stub``); a failure raises
        its FleetError."""
        call = getattr(self.stub if stub is None else stub, method)(
            request, timeout=self.timeout if timeout is None else timeout,
            metadata=self.metadata(tenant) + self.log_position.metadata())
        try:
            response = await call
        except grpc.RpcError as e:
            trailing = getattr(e, "trailing_metadata", None)
            self.log_position.learn(trailing() if callable(trailing) else None)
            raise errors.from_rpc_error(e) from e
        self.log_position.learn(await call.trailing_metadata())
        return response

    # --- the API ---

    async def topology(
        self,
        request: Union[topology_pb2.TopologySpec, topology_pb2.RequestTopologyRequest, None] = None,
        *,
        ring: Optional[spec.Members] = None,
        links: Optional[Iterable[spec.LinkLike]] = None,
        phases: Optional[Mapping[str, spec.TopologyLike]] = None,
        bidirectional: bool = True,
        duplex: bool = False,
        width: int = 1,
        initial_phase: Optional[str] = None,
        prepare_next_phase: bool = False,
        lease: Optional[Seconds] = None,
        tenant: Optional[str] = None,
        name: Optional[str] = None,
        request_id: Optional[str] = None,
        on_failure: Optional[spec.FailurePolicyLike] = None,
        keepalive: bool = True,
        keepalive_fraction: float = 1 / 3,
    ) -> "Topology":
        """Requests a topology: :meth:`fleet.Client.topology`, awaited. Bad arguments raise
        ValueError or TypeError before any RPC, exactly as there. The lease is renewed by a
        task on the running loop unless ``keepalive=False``."""
        req = core.topology_request(
            request, ring=ring, links=links, phases=phases, bidirectional=bidirectional,
            duplex=duplex, width=width, initial_phase=initial_phase,
            prepare_next_phase=prepare_next_phase, lease=lease, tenant=tenant,
            default_tenant=self.tenant, name=name, request_id=request_id, on_failure=on_failure,
            keepalive_fraction=keepalive_fraction)
        response = await self.call("RequestTopology", req, tenant=req.tenant or None)
        return Topology(self, Allocation(response.allocation), tenant=req.tenant or None,
                        keepalive=keepalive, keepalive_fraction=keepalive_fraction)

    async def fabric(self, devices: Optional[List[str]] = None, *, allocation: str = "",
                     max_switch_hops: int = 0, tenant: Optional[str] = None,
                     timeout: Optional[float] = None) -> Fabric:
        """As :meth:`fleet.Client.fabric`."""
        response = await self.call(
            "GetFabric", fabric.request(devices, allocation, max_switch_hops), tenant=tenant,
            timeout=timeout)
        return Fabric(response)

    async def open(self, allocation_id: str, *, tenant: Optional[str] = None,
                   keepalive: bool = False, keepalive_fraction: float = 1 / 3) -> "Topology":
        """A :class:`Topology` for an allocation that already exists: as
        :meth:`fleet.Client.open`."""
        if not allocation_id:
            raise ValueError("allocation_id '': an allocation id such as 'a12' is needed")
        core.check_keepalive_fraction(keepalive_fraction)
        a = await self.allocation(allocation_id, tenant=tenant)
        return Topology(self, a, tenant=tenant or a.tenant or None, keepalive=keepalive,
                        keepalive_fraction=keepalive_fraction)

    async def allocation(self, allocation_id: str, *,
                         tenant: Optional[str] = None) -> Allocation:
        """The allocation ``allocation_id`` as fleetd has it now."""
        return Allocation(await self.call("GetAllocation",
                                          topology_pb2.GetAllocationRequest(id=allocation_id),
                                          tenant=tenant))

    async def allocations(self, *, tenant: Optional[str] = None,
                          include_released: bool = False) -> List[Allocation]:
        """The tenant's allocations (every tenant's for an operator with no tenant)."""
        tenant = tenant or self.tenant
        response = await self.call("ListAllocations", topology_pb2.ListAllocationsRequest(
            tenant=tenant or "", include_released=include_released), tenant=tenant)
        return [Allocation(a) for a in response.allocations]

    async def release(self, allocation_id: str, *,
                      tenant: Optional[str] = None) -> Allocation:
        """Releases the allocation: its circuits come off the switch. Returns it."""
        response = await self.call("ReleaseTopology",
                                   topology_pb2.ReleaseTopologyRequest(id=allocation_id),
                                   tenant=tenant)
        return Allocation(response.allocation)

    async def close(self) -> None:
        """Stops its topologies' renewals, followers and :meth:`Topology.start_phase` waits
        (whose tasks then raise :class:`fleet.Cancelled`) and closes the channel if this
        client opened it. The allocations are not released (their leases run out)."""
        self._closed = True
        topologies = list(self._topologies)
        self._topologies.clear()
        # Every wait is given up before anything here yields, so none ends otherwise.
        waits = [t for topo in topologies for t in topo._give_up_phase_waits(core.CLOSED_WHY)]
        for topo in topologies:
            await topo.stop_following()
            await topo.stop_keepalive()
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.close()


class _PhaseWait:
    """What the Topology knows of one :meth:`Topology.start_phase` task."""

    __slots__ = ("started", "why", "quiet")

    def __init__(self) -> None:
        self.started = False  # Its coroutine has begun: a cancel() reaches its handler.
        self.why: Optional[str] = None  # Why the client gave it up, once it has.
        self.quiet = False  # It ends in an error the job brought about: not worth a warning.


class Topology:
    """One allocation held by this job, every call awaited: :class:`fleet.Topology`'s names
    and results. Made by :meth:`Client.topology` or :meth:`Client.open`, inside the running
    loop. As ``async with`` it releases the allocation on exit, also when the block raises
    (a failed release is then logged, never hiding the block's exception)."""

    def __init__(self, client: Client, allocation: Allocation, *,
                 tenant: Optional[str], keepalive: bool = True,
                 keepalive_fraction: float = 1 / 3) -> None:
        self.client = client
        self.id: str = allocation.id
        self.tenant = tenant or allocation.tenant or None
        self._allocation = Allocation(allocation)
        self._released = False
        self.keepalive_error: Optional[errors.FleetError] = None
        self._lease_expires = core.expiry(allocation)
        self.lease_seconds = core.lease_length(allocation)
        self._keepalive_task: Optional[asyncio.Task[None]] = None
        if keepalive and self.lease_seconds is not None:
            self._interval = core.keepalive_interval(self.lease_seconds, keepalive_fraction)
            self._keepalive_task = asyncio.get_running_loop().create_task(
                self._keepalive_loop(), name=f"fleet-keepalive-{self.id}")
            client._topologies.add(self)
        # Following (on_member_replaced): callbacks, each with the index of the next
        # replacement it is owed, and the task that follows.
        self._subscribers: List[List[Any]] = []
        self._follower: Optional[asyncio.Task[None]] = None
        self._follow_stop: Optional[asyncio.Event] = None  # The current follower's.
        self._phase_tasks: Dict["asyncio.Task[PhaseSwitch]", _PhaseWait] = {}
        self.follow_error: Optional[errors.FleetError] = None
        """Why the follower stopped early (the allocation unknown or not ours), if it did."""

    # --- what is known (as fleet.Topology) ---

    @property
    def allocation(self) -> Allocation:
        """The allocation as last seen."""
        return self._allocation

    @property
    def state(self) -> str:
        return self._allocation.state

    @property
    def members(self) -> List[str]:
        return list(self._allocation.members)

    @property
    def replacements(self) -> List[MemberReplacement]:
        a = self._allocation
        return [MemberReplacement.of(a, i) for i in range(len(a.replacements))]

    @property
    def degraded_since(self) -> Optional[datetime.datetime]:
        a = self._allocation
        if not a.HasField("degraded_since"):
            return None
        return a.degraded_since.ToDatetime(tzinfo=datetime.timezone.utc)

    @property
    def circuits(self) -> List[Circuit]:
        return self._allocation.circuits

    @property
    def active_phase(self) -> str:
        return self._allocation.active_phase

    @property
    def lease_expires(self) -> Optional[datetime.datetime]:
        return self._lease_expires

    async def refresh(self) -> Allocation:
        """Reads the allocation from fleetd."""
        a = await self.client.allocation(self.id, tenant=self.tenant)
        self._seen(a)
        return a

    # --- waiting ---

    async def wait_ready(self, timeout: Optional[Seconds] = None, *,
                         raise_on_degraded: bool = False) -> Allocation:
        """Returns the allocation once READY: :meth:`fleet.Topology.wait_ready`."""
        return await self._watch(core.is_ready, core.seconds(timeout), "READY",
                                 raise_on_degraded=raise_on_degraded)

    async def phase(self, name: str, timeout: Optional[Seconds] = 60.0) -> PhaseSwitch:
        """Activates phase ``name`` and returns once READY in it, as a
        :class:`fleet.PhaseSwitch`: :meth:`fleet.Topology.phase`."""
        start, response = await self._activate(name)
        return await self._phase_ready(name, start, response, core.seconds(timeout))

    async def start_phase(self, name: str,
                          timeout: Optional[Seconds] = 60.0) -> "asyncio.Task[PhaseSwitch]":
        """Starts a switch to phase ``name``; returns, once fleetd has accepted it, a task
        that ends READY in the phase::

            pending = await topo.start_phase("tp")    # ActivatePhase answered
            await asyncio.to_thread(step, batch)      # compute while the switch runs
            switch = await pending                    # a PhaseSwitch, READY in tp

        Awaiting this call waits only for ActivatePhase, so an unknown phase or a refused
        switch raises here, and fleetd is reprogramming the switch before the job computes —
        even if that compute then blocks the loop. The task raises what :meth:`phase` would
        (AllocationFailed, Degraded, Released, PhaseSuperseded, DeadlineExceeded after
        ``timeout``); cancel it to stop waiting (the switch goes on). ``latency`` counts from
        the ActivatePhase call to when the task saw READY, so a blocked loop adds to it.

        The Topology keeps its tasks: :meth:`release` and ``Client.close()`` give up those
        still waiting, which then raise :class:`fleet.Cancelled` — never
        ``asyncio.CancelledError``, which stays the sign of the caller's own ``cancel()``.
        A task superseded by another phase (:class:`fleet.PhaseSuperseded`) or given up so
        does not log "exception was never retrieved" if nobody awaits it.
        """
        start, response = await self._activate(name)
        wait = _PhaseWait()
        task = asyncio.get_running_loop().create_task(
            self._phase_task(wait, name, start, response, core.seconds(timeout)),
            name=f"fleet-phase-{self.id}-{name}")
        self._phase_tasks[task] = wait
        self.client._topologies.add(self)
        task.add_done_callback(self._phase_task_done)
        return task

    async def _phase_task(self, wait: _PhaseWait, name: str, start: float,
                          response: topology_pb2.ActivatePhaseResponse,
                          timeout: Optional[float]) -> PhaseSwitch:
        """A :meth:`start_phase` task: :meth:`_phase_ready`, with the cancellations the
        caller did not ask for turned into Cancelled."""
        wait.started = True
        goal = f"READY in phase {name}"
        try:
            if wait.why is not None:  # Given up before it began.
                raise core.abandoned(self.id, goal, wait.why)
            return await self._phase_ready(name, start, response, timeout)
        except asyncio.CancelledError:
            why = wait.why
            if why is None:
                cancelling = getattr(asyncio.current_task(), "cancelling", None)
                if cancelling is None or cancelling():
                    raise  # The caller's cancel() (before Python 3.11, any cancellation).
                # Not the task's own cancellation: grpc cancelled the watch (its channel
                # closed).
                why = "its watch was cancelled (the channel closed)"
            wait.quiet = True
            raise core.abandoned(self.id, goal, why) from None
        except (errors.PhaseSuperseded, errors.Cancelled):
            wait.quiet = True
            raise

    def _phase_task_done(self, task: "asyncio.Task[PhaseSwitch]") -> None:
        wait = self._phase_tasks.pop(task, None)
        if wait is not None and wait.quiet and not task.cancelled():
            task.exception()  # Retrieved: the job moved on (another phase, release, close).

    def _give_up_phase_waits(self, why: str) -> List["asyncio.Task[PhaseSwitch]"]:
        """Gives up the :meth:`start_phase` tasks still waiting, without yielding: each
        raises Cancelled saying ``why``. Returns them (but the current task) to be awaited."""
        current = asyncio.current_task()
        tasks = []
        for task, wait in list(self._phase_tasks.items()):
            if task.done():
                continue
            wait.why = why
            if wait.started:
                task.cancel()
            # Else it raises as soon as it begins: a task cancelled before its coroutine ran
            # would end cancelled, whatever the coroutine does.
            if task is not current:
                tasks.append(task)
        return tasks

    async def _activate(self, name: str) -> Tuple[float, topology_pb2.ActivatePhaseResponse]:
        core.check_phase_name(name)
        start = time.monotonic()
        response = await self.client.call(
            "ActivatePhase", topology_pb2.ActivatePhaseRequest(id=self.id, phase=name),
            tenant=self.tenant)
        if response.HasField("allocation"):
            self._seen(Allocation(response.allocation))
        return start, response

    async def _phase_ready(self, name: str, start: float,
                           response: topology_pb2.ActivatePhaseResponse,
                           timeout: Optional[float]) -> PhaseSwitch:
        done = core.ready_in_phase(name)
        a = Allocation(response.allocation)
        if not done(a):
            since = a if response.HasField("allocation") else None
            a = await self._watch(done, timeout, f"READY in phase {name}",
                                  check=core.phase_check(name, since))
        return core.phase_switch(name, time.monotonic() - start, response, a)

    async def detach(self, *devices: str,
                     timeout: Optional[Seconds] = 60.0) -> Allocation:
        """:meth:`fleet.Topology.detach`, awaited."""
        response = await self.client.call(
            "DetachDevices", topology_pb2.DetachDevicesRequest(id=self.id, devices=list(devices)),
            tenant=self.tenant)
        a = Allocation(response.allocation)
        if response.HasField("allocation"):
            self._seen(a)
        done = core.ready_without(devices)
        if not done(a):
            a = await self._watch(done, core.seconds(timeout),
                                  f"READY without {', '.join(devices)}")
        return a

    async def replace(self, member: str, spare: Optional[str] = None,
                      timeout: Optional[Seconds] = 60.0) -> Allocation:
        """:meth:`fleet.Topology.replace`, awaited."""
        response = await self.client.call(
            "ReplaceMember", admin_pb2.ReplaceMemberRequest(
                allocation_id=self.id, member=member, spare=spare or ""),
            tenant=self.tenant, stub=self.client.admin)
        a = Allocation(response.allocation)
        if response.HasField("allocation"):
            self._seen(a)
        done = core.ready_without([member])
        if not done(a):
            a = await self._watch(done, core.seconds(timeout), f"READY without {member}")
        return a

    async def _watch(self, done: core.Predicate, timeout: Optional[float], goal: str, *,
                     raise_on_degraded: bool = False, stop_at_end: bool = True,
                     check: Optional[Callable[[Allocation], None]] = None
                     ) -> Allocation:
        call = self.client.stub.WatchAllocation(
            topology_pb2.WatchAllocationRequest(id=self.id), timeout=timeout,
            metadata=self.client.metadata(self.tenant))
        last: Optional[Allocation] = None
        try:
            async for message in call:
                a = Allocation(message.allocation)
                last = a
                self._seen(a)
                if done(a):
                    return a
                if stop_at_end:
                    core.check_progress(a, raise_on_degraded=raise_on_degraded)
                    if check is not None:
                        check(a)
        except grpc.RpcError as e:
            raise core.wait_error(self.id, e, goal, timeout, last) from None
        finally:
            call.cancel()
        raise core.watch_ended(self.id, goal)

    # --- rank order ---

    async def ranks(self, phase: Optional[str] = None, *,
                    timeout: Optional[float] = None) -> Ranks:
        """The rank order of ``phase`` (default: the active one): :meth:`fleet.Topology.ranks`."""
        if phase is not None:
            core.check_phase_name(phase)
        response = await self.client.call(
            "GetRanks", topology_pb2.GetRanksRequest(id=self.id, phase=phase or ""),
            tenant=self.tenant, timeout=timeout)
        return Ranks.of(response)

    async def fabric(self, devices: Optional[List[str]] = None, *, max_switch_hops: int = 0,
                     timeout: Optional[float] = None) -> Fabric:
        """As :meth:`fleet.Topology.fabric`."""
        return await self.client.fabric(devices, allocation=self.id,
                                        max_switch_hops=max_switch_hops, tenant=self.tenant,
                                        timeout=timeout)

    # --- changes ---

    async def changes(self,
                      timeout: Optional[Seconds] = None) -> AsyncIterator[Allocation]:
        """``async for allocation in topo.changes():`` the allocation at every change
        (WatchAllocation), starting with how it is now, until it is FAILED or RELEASED (that
        one included) or ``timeout`` seconds pass; as :meth:`fleet.Topology.changes`. Leaving
        the loop early cancels the stream once the generator is closed (at once with
        ``contextlib.aclosing``).

        Raises:
            DeadlineExceeded: ``timeout`` passed.
            NotFound, PermissionDenied, Unavailable: as fleetd says.
        """
        call = self.client.stub.WatchAllocation(
            topology_pb2.WatchAllocationRequest(id=self.id), timeout=core.seconds(timeout),
            metadata=self.client.metadata(self.tenant))
        try:
            async for message in call:
                a = Allocation(message.allocation)
                self._seen(a)
                yield a
                if a.state in core.ENDED:
                    return
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise errors.DeadlineExceeded(
                    f"allocation {self.id}: no end of its changes after {timeout}s",
                    grpc.StatusCode.DEADLINE_EXCEEDED) from None
            raise errors.from_rpc_error(e) from e
        finally:
            call.cancel()

    # --- following: member replacements ---

    def on_member_replaced(self, callback: MemberReplacedCallback) -> MemberReplacedCallback:
        """Calls ``callback(replacement)`` — a function or a coroutine function, awaited —
        for every member replacement not yet in :attr:`replacements`, once each, oldest
        first: :meth:`fleet.Topology.on_member_replaced`, with the follower a task on the
        running loop (``fleet-follow-ID``) instead of a thread. Returns ``callback``.

        Raises:
            Released: the allocation was released by this Topology already.
            TypeError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise TypeError(f"callback {callback!r} is not callable")
        if self._released:
            raise errors.Released(f"allocation {self.id} is released: it is no longer followed",
                                  self._allocation)
        self._subscribers.append([callback, len(self._allocation.replacements)])
        if self._follower is None or self._follower.done():
            self.follow_error = None
            self.client._topologies.add(self)
            # Each follower has its own stop flag: one told to stop from inside a callback
            # (where it cannot be cancelled) ends by itself while a new one takes over.
            self._follow_stop = asyncio.Event()
            self._follower = asyncio.get_running_loop().create_task(
                self._follow_loop(self._follow_stop), name=f"fleet-follow-{self.id}")
        return callback

    async def stop_following(self) -> None:
        """Stops the follower (no more callbacks) and forgets the callbacks. Doing it again,
        or with nothing followed, does nothing. Called from a callback, the follower ends
        as soon as that callback returns, with no other callback called."""
        self._subscribers.clear()
        task, self._follower = self._follower, None
        stop, self._follow_stop = self._follow_stop, None
        if stop is not None:
            stop.set()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _follow_loop(self, stop: asyncio.Event) -> None:
        """The follower: watches the allocation, reconnecting while fleetd is unavailable,
        until it ends, ``stop`` is set or the task is cancelled."""
        backoff = core.FOLLOW_BACKOFF_FIRST
        while not stop.is_set() and not self.client._closed:
            call = self.client.stub.WatchAllocation(
                topology_pb2.WatchAllocationRequest(id=self.id),
                metadata=self.client.metadata(self.tenant))
            try:
                async for message in call:
                    backoff = core.FOLLOW_BACKOFF_FIRST
                    a = Allocation(message.allocation)
                    self._seen(a)
                    await self._deliver(a, stop)
                    if stop.is_set() or a.state in core.ENDED:
                        return
            except grpc.RpcError as e:
                error = errors.from_rpc_error(e)
                if not isinstance(error, core.RETRIABLE):
                    self.follow_error = error
                    log.warning("allocation %s: no longer followed: %s", self.id, error)
                    return
                log.warning("allocation %s: watch lost, following again: %s", self.id, error)
            finally:
                call.cancel()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, core.FOLLOW_BACKOFF_MAX)

    async def _deliver(self, a: Allocation, stop: asyncio.Event) -> None:
        for (callback, _), first in core.due_replacements(self._subscribers,
                                                          len(a.replacements)):
            for i in range(first, len(a.replacements)):
                if stop.is_set():  # stop_following() from a callback.
                    return
                try:
                    result = callback(MemberReplacement.of(a, i))
                    if inspect.isawaitable(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - a callback's bug must not stop the others.
                    log.exception("allocation %s: member-replaced callback %r raised", self.id,
                                  callback)

    # --- lease ---

    async def keep_alive(self, timeout: Optional[float] = None) -> datetime.datetime:
        """Renews the lease now; returns when it expires (UTC)."""
        response = await self.client.call("KeepAlive", topology_pb2.KeepAliveRequest(id=self.id),
                                          tenant=self.tenant, timeout=timeout)
        expires = response.lease_expires.ToDatetime(tzinfo=datetime.timezone.utc)
        self._lease_expires = expires
        return expires

    async def _keepalive_loop(self) -> None:
        interval = self._interval
        call_timeout = core.keepalive_call_timeout(self.lease_seconds, self.client.timeout)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.keep_alive(timeout=call_timeout)
                self.keepalive_error = None
                interval = self._interval
            except (errors.Unavailable, errors.DeadlineExceeded) as e:
                # fleetd restarting or unreachable: try again sooner while the lease lasts.
                self.keepalive_error = e
                interval = max(0.05, self._interval / 3)
                log.warning("allocation %s: lease renewal failed, retrying: %s", self.id, e)
            except errors.FleetError as e:
                # Ended, unknown or not ours: nothing left to renew.
                self.keepalive_error = e
                log.warning("allocation %s: lease renewal stopped: %s", self.id, e)
                return
            except grpc.aio.UsageError as e:
                # The caller closed its own channel under the client (Client.close() stops
                # the renewals before closing one it opened).
                self.keepalive_error = errors.Cancelled(
                    f"allocation {self.id}: lease renewal stopped: its channel is closed ({e})",
                    grpc.StatusCode.CANCELLED)
                log.warning("%s", self.keepalive_error.message)
                return

    async def stop_keepalive(self) -> None:
        """Stops the background renewals (the lease then runs out unless released first)."""
        task, self._keepalive_task = self._keepalive_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # --- release ---

    async def release(self, timeout: Optional[Seconds] = 60.0) -> Allocation:
        """Stops the renewals and the follower, gives up the :meth:`start_phase` tasks still
        waiting (they raise :class:`fleet.Cancelled`) and releases the allocation; returns it
        RELEASED. Releasing again does nothing."""
        waits = self._give_up_phase_waits(core.RELEASED_WHY)
        await self.stop_keepalive()
        await self.stop_following()
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        self.client._topologies.discard(self)
        if self._released:
            return self._allocation
        a = await self.client.release(self.id, tenant=self.tenant)
        self._seen(a)
        if a.state == "RELEASING":
            # The switch refused a removal; fleetd retries it. Wait for the end.
            a = await self._watch(core.is_released, core.seconds(timeout), "RELEASED",
                                  stop_at_end=False)
        self._released = True
        return a

    async def __aenter__(self) -> "Topology":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except errors.FleetError as e:
            log.warning("allocation %s: release after %s failed: %s", self.id,
                        exc_type.__name__, e)

    def __repr__(self) -> str:
        return f"<fleet.aio.Topology {self.id} {self.state}>"

    def _seen(self, a: Allocation) -> None:
        if not core.newer(a, self._allocation):
            return
        self._allocation = a
        expires = core.expiry(a)
        if expires is not None:
            self._lease_expires = expires
