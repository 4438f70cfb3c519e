"""The friendly layer over ``fleet.v1.TopologyService``: request a topology, wait for it,
keep its lease, switch its phases and give it back.

Example::

    import fleet

    gpus = [f"gpu{i}" for i in range(1, 9)]
    with fleet.Client("127.0.0.1:50051").topology(ring=gpus, lease=60, tenant="team-a") as topo:
        topo.wait_ready(timeout=60)
        ...  # train; the lease is renewed in the background
    # released here, also when the block raised

Healing: with a failure policy fleetd replaces a failed member by a spare on its own; the job
hears of it and remaps its ranks::

    with client.topology(ring=gpus, lease=60, on_failure={"replace": True, "within": "2s"}) as topo:
        topo.on_member_replaced(lambda r: remap(r.members))
        ...
"""

from __future__ import annotations

import concurrent.futures
import datetime
import logging
import threading
import time
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Type, Union

import grpc

from fleet import core, credentials, errors, fabric, spec
from fleet.core import (PRINCIPAL_METADATA_KEY, Allocation, Circuit, MemberReplacedCallback,
                        MemberReplacement, PhaseSwitch, Seconds, state_name)
from fleet.fabric import Fabric
from fleet.ranks import Ranks
from fleet.v1 import admin_pb2, admin_pb2_grpc, topology_pb2, topology_pb2_grpc

log = logging.getLogger("fleet")

__all__ = ["Client", "Topology", "Allocation", "Circuit", "MemberReplacement", "PhaseSwitch",
           "state_name", "PRINCIPAL_METADATA_KEY", "Seconds"]


class Client:
    """A connection to fleetd's TopologyService.

    fleetd takes the caller's identity from its client certificate (mutual TLS). The address
    and credentials are found as fleetctl finds them (:mod:`fleet.credentials`): the
    arguments, then ``FLEET_SERVER``/``FLEET_CA``/``FLEET_CERT``/``FLEET_KEY``/
    ``FLEET_INSECURE``/``FLEET_CONTEXT``, then a context of fleetctl's config file
    (``$FLEET_CONFIG``, else ``$XDG_CONFIG_HOME/fleet/config.yaml``, else
    ``~/.config/fleet/config.yaml``).

    Args:
        address: ``HOST:PORT`` of fleetd's gRPC port; default ``$FLEET_SERVER``, else the
            context's server, else ``localhost:50051``.
        tenant: the tenant requests are made for when :meth:`topology` is not told one; a job
            certificate may act only for the tenants fleetd's policy gives it.
        principal: over plaintext only (a fleetd started with ``--insecure``), the caller sent
            as ``x-fleet-principal``; by default ``job:TENANT`` for the tenant of each call, or
            nothing when there is no tenant. Over TLS nothing is sent; over a ``channel`` given
            by the caller it is sent (fleetd ignores it under TLS).
        timeout: deadline in seconds for each unary RPC.
        channel: an existing gRPC channel to use instead of opening one; the credentials
            arguments are then not used.
        ca, cert, key: PEM files: the site CA bundle that verifies fleetd, and this caller's
            certificate and key.
        insecure: True to dial in plaintext (only a fleetd started with ``--insecure``).
        context: the config file's context to use instead of its ``current-context``.
        config: the config file instead of ``$FLEET_CONFIG`` or the default.

    Raises:
        fleet.CredentialsError: no credentials, some of ca/cert/key only, a context that is
            not in the file, or an unreadable file; the message says what to give.
    """

    def __init__(self, address: Optional[str] = None, *, tenant: Optional[str] = None,
                 principal: Optional[str] = None, timeout: float = 30.0,
                 channel: Optional[grpc.Channel] = None, ca: Optional[str] = None,
                 cert: Optional[str] = None, key: Optional[str] = None,
                 insecure: Optional[bool] = None, context: Optional[str] = None,
                 config: Optional[str] = None) -> None:
        if channel is None:
            self.connection: Optional[credentials.Connection] = credentials.resolve(
                address, ca=ca, cert=cert, key=key, insecure=insecure, context=context,
                config=config)
            address = self.connection.server
            channel = self.connection.channel()
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
        """The generated stub, for RPCs this layer does not wrap."""
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        """AdminService's stub: a job may replace a member of its own allocations there."""
        self._closed = False
        self.log_position = core.LogPosition()
        """The newest replicated-log entry an answer named; every call sends it (docs/ha.md)."""
        self._followed_lock = threading.Lock()
        self._followed: "set[Topology]" = set()  # Topologies with a follower running.
        # Topologies with lease renewals or start_phase waits running (under _followed_lock).
        self._topologies: "set[Topology]" = set()

    # --- plumbing ---

    def metadata(self, tenant: Optional[str] = None) -> "tuple[tuple[str, str], ...]":
        """The call metadata naming the caller for ``tenant``: none over TLS, where fleetd
        knows the caller by its certificate."""
        return core.call_metadata(self.connection, self.principal, tenant or self.tenant)

    def call(self, method: str, request: Any, *, tenant: Optional[str] = None,
             timeout: Optional[float] = None, stub: Any = None) -> Any:
        """Calls unary RPC ``method`` of TopologyService (or of ``stub``, e.g. ``self.admin``);
        a failure raises its FleetError."""
        try:
            response, call = getattr(self.stub if stub is None else stub, method).with_call(
                request, timeout=self.timeout if timeout is None else timeout,
                metadata=self.metadata(tenant) + self.log_position.metadata())
        except grpc.RpcError as e:
            # A refused change may have committed part of its work: its position counts too.
            trailing = getattr(e, "trailing_metadata", None)
            self.log_position.learn(trailing() if callable(trailing) else None)
            raise errors.from_rpc_error(e) from e
        self.log_position.learn(call.trailing_metadata())
        return response

    # --- the API ---

    def topology(
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
        """Requests a topology and returns its :class:`Topology`, lease kept alive.

        Give the topology as exactly one of:

        - ``ring=[devices]``: a ring in member order, bidirectional (duplex links, two ports
          per member) unless ``bidirectional=False`` (one port per member); ``width``
          parallel circuits per link;
        - ``links=[...]``: explicit links, ``(a, b)`` pairs directed a→b unless
          ``duplex=True``, or :class:`fleet.Link` items; ends are devices (``"gpu1"``) or
          O-NIC ports (``"gpu1-n0/2"``);
        - ``phases={"dp": ..., "tp": ...}``: named phases, one active at a time, each a
          ``fleet.v1.TopologySpec`` (see :func:`fleet.ring`, :func:`fleet.links`) or a
          mapping of these keywords (``{"ring": gpus}``); ``initial_phase`` picks the first
          one active (default: the first);
          with two phases, ``prepare_next_phase=True`` keeps both on the switch, each on
          its own O-NIC ports where the members have them, so that :meth:`Topology.phase`
          is a state change with no switch command or retrain (make before break);
        - ``request``: a raw ``fleet.v1.TopologySpec``, or a whole
          ``fleet.v1.RequestTopologyRequest`` (then the keywords given here override its
          tenant, name, lease and request id).

        Args:
            lease: seconds (or a timedelta) the allocation lives without a renewal; default
                fleetd's. The renewal runs every ``keepalive_fraction`` of it in a
                background thread unless ``keepalive=False``.
            tenant: owner; default the client's.
            name: the job's label for the allocation.
            request_id: idempotency key: a retry with the same key returns the same
                allocation.
            on_failure: what fleetd does when a member fails while the allocation runs, as
                the request file's ``on_failure``: ``{"replace": True, "within": "2s",
                "max_replacements": 2, "spares": "same-switch"}`` (or ``"any"``), or a
                ``fleet.v1.FailurePolicy``; see :func:`fleet.failure_policy`. With
                ``replace``, fleetd swaps a failed member for a spare in the same position;
                :meth:`Topology.on_member_replaced` tells the job. Absent: the request's own
                (if ``request`` is a RequestTopologyRequest), else none: the allocation stays
                DEGRADED and its links are retried until the fault clears.

        Returns once fleetd has persisted the intent (PENDING or later): call
        :meth:`Topology.wait_ready`. Use it as a context manager to release it on exit.

        Raises:
            FleetError: the subclass of fleetd's answer, e.g. NotFound for an unknown
                device, ResourceExhausted for no free port, InvalidArgument.
            ValueError, TypeError: a topology given in more than one form, or malformed; an
                ``on_failure`` with an unknown key or a bad value (the message names the
                field, the value and the rule). Raised before any RPC.
        """
        req = core.topology_request(
            request, ring=ring, links=links, phases=phases, bidirectional=bidirectional,
            duplex=duplex, width=width, initial_phase=initial_phase,
            prepare_next_phase=prepare_next_phase, lease=lease, tenant=tenant,
            default_tenant=self.tenant, name=name, request_id=request_id, on_failure=on_failure,
            keepalive_fraction=keepalive_fraction)
        response = self.call("RequestTopology", req, tenant=req.tenant or None)
        return Topology(self, Allocation(response.allocation), tenant=req.tenant or None,
                        keepalive=keepalive, keepalive_fraction=keepalive_fraction)

    def fabric(self, devices: Optional[List[str]] = None, *, allocation: str = "",
               max_switch_hops: int = 0, tenant: Optional[str] = None,
               timeout: Optional[float] = None) -> Fabric:
        """What a planner of its own phases needs (GetFabric): the O-NIC ports of ``devices``
        (candidates before a request) or of ``allocation``'s members, which ordered pairs one
        circuit could join and over how many trunk hops (within ``max_switch_hops``, 0 meaning
        2), and what a phase switch has cost lately. Ports ``allocation`` holds count as
        usable. See :class:`fleet.Fabric`.

        Raises:
            PermissionDenied: a device another tenant's allocation holds a port of.
            NotFound: an unknown device, or an allocation not the caller's.
            FailedPrecondition: the allocation is FAILED or RELEASED.
            InvalidArgument: neither devices nor an allocation, a device named twice, more
                than 128 devices, a hop bound past the site's (the message names the field
                and the rule).
            ResourceExhausted: an answer too big for one message: ask about fewer devices.
        """
        response = self.call("GetFabric", fabric.request(devices, allocation, max_switch_hops),
                             tenant=tenant, timeout=timeout)
        return Fabric(response)

    def open(self, allocation_id: str, *, tenant: Optional[str] = None,
             keepalive: bool = False, keepalive_fraction: float = 1 / 3) -> "Topology":
        """A :class:`Topology` for an allocation that already exists, e.g. one the job's
        launcher requested and named in ``FLEET_ALLOCATION``: wait for it, switch its phases,
        read its ranks. Its lease is left to whoever requested it unless ``keepalive``.
        Leaving a ``with`` block releases it, as for :meth:`topology`; do not use one where
        another process owns the allocation.

        Raises:
            NotFound: no such allocation, or not the caller's tenant's.
            ValueError: an empty id.
        """
        if not allocation_id:
            raise ValueError("allocation_id '': an allocation id such as 'a12' is needed")
        core.check_keepalive_fraction(keepalive_fraction)
        a = self.allocation(allocation_id, tenant=tenant)
        return Topology(self, a, tenant=tenant or a.tenant or None, keepalive=keepalive,
                        keepalive_fraction=keepalive_fraction)

    def allocation(self, allocation_id: str, *, tenant: Optional[str] = None) -> Allocation:
        """The allocation ``allocation_id`` as fleetd has it now."""
        return Allocation(self.call("GetAllocation",
                                    topology_pb2.GetAllocationRequest(id=allocation_id),
                                    tenant=tenant))

    def allocations(self, *, tenant: Optional[str] = None,
                    include_released: bool = False) -> List[Allocation]:
        """The tenant's allocations (every tenant's for an operator with no tenant)."""
        tenant = tenant or self.tenant
        response = self.call("ListAllocations", topology_pb2.ListAllocationsRequest(
            tenant=tenant or "", include_released=include_released), tenant=tenant)
        return [Allocation(a) for a in response.allocations]

    def release(self, allocation_id: str, *, tenant: Optional[str] = None) -> Allocation:
        """Releases the allocation: its circuits come off the switch. Returns it, RELEASED."""
        return Allocation(self.call("ReleaseTopology",
                                    topology_pb2.ReleaseTopologyRequest(id=allocation_id),
                                    tenant=tenant).allocation)

    def close(self) -> None:
        """Stops its topologies' background work — lease renewals, followers
        (:meth:`Topology.stop_following`) and the waits of :meth:`Topology.start_phase`, whose
        futures then raise :class:`fleet.Cancelled` — and closes the channel if this client
        opened it. The allocations are not released (their leases run out)."""
        self._closed = True
        with self._followed_lock:
            followed = list(self._followed)
            held = list(self._topologies)
            self._topologies.clear()
        for topo in held:
            topo._give_up_phase_waits(core.CLOSED_WHY)
            topo.stop_keepalive()
        for topo in followed:
            topo.stop_following()
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


class _Abandonable:
    """A wait that another thread can give up: it cancels the wait's stream, and the wait
    then raises :func:`fleet.core.abandoned`'s Cancelled saying why."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: Any = None
        self.why: Optional[str] = None

    def attach(self, stream: Any) -> None:
        """Publishes the wait's stream; cancels it at once if the wait was given up."""
        with self._lock:
            self._stream = stream
            why = self.why
        if why is not None:
            stream.cancel()

    def give_up(self, why: str) -> None:
        with self._lock:
            if self.why is None:
                self.why = why
            stream = self._stream
        if stream is not None:
            stream.cancel()


class Topology:
    """One allocation held by this job: wait for it, switch its phases, release it.

    Made by :meth:`Client.topology`. While it is held, a background thread renews its lease;
    :attr:`keepalive_error` is the last renewal's failure, if any. Once a callback is
    registered with :meth:`on_member_replaced`, another follows the allocation
    (WatchAllocation) and keeps :attr:`members`, :attr:`replacements` and :attr:`state`
    current. As a context manager it releases the allocation on exit, also when the block
    raises (a failed release is then logged, never hiding the block's exception).
    """

    def __init__(self, client: Client, allocation: Allocation, *,
                 tenant: Optional[str], keepalive: bool = True,
                 keepalive_fraction: float = 1 / 3) -> None:
        self.client = client
        self.id: str = allocation.id
        self.tenant = tenant or allocation.tenant or None
        self._lock = threading.Lock()
        self._allocation = Allocation(allocation)
        self._released = False
        self.keepalive_error: Optional[errors.FleetError] = None
        self._lease_expires = core.expiry(allocation)
        self.lease_seconds = core.lease_length(allocation)
        self._phase_waits: "set[_Abandonable]" = set()  # start_phase waits still running.
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if keepalive and self.lease_seconds is not None:
            self._interval = core.keepalive_interval(self.lease_seconds, keepalive_fraction)
            self._thread = threading.Thread(target=self._keepalive_loop,
                                            name=f"fleet-keepalive-{self.id}", daemon=True)
            with client._followed_lock:
                client._topologies.add(self)
            self._thread.start()
        # Following (on_member_replaced): callbacks, each with the index of the next
        # replacement it is owed; the follower thread and its current stream.
        self._subscribers: List[List[Any]] = []
        self._follow_stop = threading.Event()
        self._follower: Optional[threading.Thread] = None
        self._follow_stream: Any = None
        self.follow_error: Optional[errors.FleetError] = None
        """Why the follower stopped early (the allocation unknown or not ours), if it did."""

    # --- what is known ---

    @property
    def allocation(self) -> Allocation:
        """The allocation as last seen (see :meth:`refresh`)."""
        with self._lock:
            return self._allocation

    @property
    def state(self) -> str:
        """The last seen state's short name: ``"READY"``, ``"FAILED"``, …"""
        return self.allocation.state

    @property
    def members(self) -> List[str]:
        """Member device ids in member order (ranks), as last seen: after a replacement the
        spare stands at the failed member's position."""
        return list(self.allocation.members)

    @property
    def replacements(self) -> List[MemberReplacement]:
        """Every member replacement of the allocation as last seen, oldest first. Current
        while the allocation is followed (:meth:`on_member_replaced`); else after
        :meth:`refresh` or a wait."""
        a = self.allocation
        return [MemberReplacement.of(a, i) for i in range(len(a.replacements))]

    @property
    def degraded_since(self) -> Optional[datetime.datetime]:
        """When the allocation last turned DEGRADED (UTC), if it is DEGRADED as last seen."""
        a = self.allocation
        if not a.HasField("degraded_since"):
            return None
        return a.degraded_since.ToDatetime(tzinfo=datetime.timezone.utc)

    @property
    def circuits(self) -> List[Circuit]:
        """Every circuit of every phase as last seen, ``state`` a name (``"ACTIVE"``)."""
        return self.allocation.circuits

    @property
    def active_phase(self) -> str:
        return self.allocation.active_phase

    @property
    def lease_expires(self) -> Optional[datetime.datetime]:
        """When the lease runs out unless renewed, as of the last renewal (UTC)."""
        with self._lock:
            return self._lease_expires

    def refresh(self) -> Allocation:
        """Reads the allocation from fleetd."""
        a = self.client.allocation(self.id, tenant=self.tenant)
        self._seen(a)
        return a

    # --- waiting ---

    def wait_ready(self, timeout: Optional[Seconds] = None, *,
                   raise_on_degraded: bool = False) -> Allocation:
        """Follows the allocation (WatchAllocation) until it is READY, and returns it.

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.
            raise_on_degraded: raise :class:`fleet.Degraded` as soon as it is DEGRADED,
                instead of waiting for fleetd's retries to train the links.

        Raises:
            AllocationFailed: it is FAILED; ``reason`` is fleetd's.
            Released: it was released (or its lease ran out) before becoming READY.
            Degraded: it is DEGRADED and ``raise_on_degraded``, or still DEGRADED at the
                timeout.
            DeadlineExceeded: not READY within ``timeout``.
        """
        return self._watch(core.is_ready, core.seconds(timeout), "READY",
                           raise_on_degraded=raise_on_degraded)

    def phase(self, name: str, timeout: Optional[Seconds] = 60.0) -> PhaseSwitch:
        """Activates phase ``name`` (ActivatePhase) and waits until the allocation is READY in
        it: every circuit of the phase ACTIVE.

        Returns:
            a :class:`PhaseSwitch`: ``latency`` (seconds, as the job saw it; also its
            ``float()``), the switch's part ``switch_seconds``, fleetd's stage timings and
            the cross-connects changed.

        Raises:
            Unimplemented: this fleetd does not do phases.
            NotFound, InvalidArgument: no such phase, per fleetd.
            PhaseSuperseded: another phase was activated (by another thread or caller)
                before this one was READY; it names both.
            Degraded: as :meth:`wait_ready`, and at once when the allocation is DEGRADED in
                another phase (fleetd rolled a failed switch back; ``reason`` says why).
            AllocationFailed, Released, DeadlineExceeded: as :meth:`wait_ready`.
        """
        start, response = self._activate(name)
        return self._phase_ready(name, start, response, core.seconds(timeout))

    def start_phase(self, name: str,
                    timeout: Optional[Seconds] = 60.0) -> "concurrent.futures.Future[PhaseSwitch]":
        """Starts a switch to phase ``name`` and returns without waiting for it: a job
        overlaps the switch with compute and collects it when it needs the new circuits::

            pending = topo.start_phase("tp")   # ActivatePhase sent, fleetd reprogramming
            loss = step(batch)                 # compute meanwhile
            switch = pending.result()          # READY in tp: a PhaseSwitch

        ActivatePhase is called before this returns, so an unknown phase or a refused switch
        raises here; the wait for READY runs on a thread (one per call) and the returned
        ``concurrent.futures.Future`` gives the :class:`PhaseSwitch`, or raises what
        :meth:`phase` would (AllocationFailed, Degraded, Released, PhaseSuperseded,
        DeadlineExceeded after ``timeout``). ``latency`` still counts from the ActivatePhase
        call.

        ``future.cancel()`` gives up the wait (the thread ends and its watch is closed; the
        switch goes on on fleetd) and returns True unless the future is done already.
        :meth:`release` and ``Client.close()`` give up the waits still running: their futures
        raise :class:`fleet.Cancelled`. Activating another phase before this one is READY
        ends the wait with :class:`fleet.PhaseSuperseded`.
        """
        start, response = self._activate(name)
        # Left pending while it waits, so that cancel() can give the wait up.
        future: "concurrent.futures.Future[PhaseSwitch]" = concurrent.futures.Future()
        wait = core.seconds(timeout)
        abandon = _Abandonable()
        with self._lock:
            self._phase_waits.add(abandon)
        with self.client._followed_lock:
            self.client._topologies.add(self)

        def cancelled(f: "concurrent.futures.Future[PhaseSwitch]") -> None:
            if f.cancelled():
                abandon.give_up("its future was cancelled")

        future.add_done_callback(cancelled)

        def run() -> None:
            try:
                try:
                    result = self._phase_ready(name, start, response, wait, abandon=abandon)
                except BaseException as e:  # noqa: BLE001 - handed to whoever waits on it.
                    if future.set_running_or_notify_cancel():
                        future.set_exception(e)
                else:
                    if future.set_running_or_notify_cancel():
                        future.set_result(result)
            finally:
                with self._lock:
                    self._phase_waits.discard(abandon)

        threading.Thread(target=run, name=f"fleet-phase-{self.id}-{name}", daemon=True).start()
        return future

    def _give_up_phase_waits(self, why: str) -> None:
        """Gives up the :meth:`start_phase` waits still running: their futures raise
        Cancelled saying ``why``."""
        with self._lock:
            waits = list(self._phase_waits)
        for abandon in waits:
            abandon.give_up(why)

    def _activate(self, name: str) -> "tuple[float, topology_pb2.ActivatePhaseResponse]":
        """Calls ActivatePhase; returns when it was called and fleetd's answer."""
        core.check_phase_name(name)
        start = time.monotonic()
        response = self.client.call(
            "ActivatePhase", topology_pb2.ActivatePhaseRequest(id=self.id, phase=name),
            tenant=self.tenant)
        if response.HasField("allocation"):
            self._seen(Allocation(response.allocation))
        return start, response

    def _phase_ready(self, name: str, start: float,
                     response: topology_pb2.ActivatePhaseResponse,
                     timeout: Optional[float], *,
                     abandon: Optional[_Abandonable] = None) -> PhaseSwitch:
        """Waits until READY in phase ``name`` after ActivatePhase answered ``response``;
        another phase becoming active ends the wait (:func:`fleet.core.check_phase`)."""
        done = core.ready_in_phase(name)
        a = Allocation(response.allocation)
        if not done(a):
            since = a if response.HasField("allocation") else None
            a = self._watch(done, timeout, f"READY in phase {name}",
                            check=core.phase_check(name, since), abandon=abandon)
        return core.phase_switch(name, time.monotonic() - start, response, a)

    # --- rank order ---

    def ranks(self, phase: Optional[str] = None, *,
              timeout: Optional[float] = None) -> Ranks:
        """The rank order that follows the circuits of ``phase`` (default: the active phase)
        with each rank's host (GetRanks): see :class:`fleet.Ranks` for the torchrun
        environment, a hostfile and NCCL.

        Raises:
            NotFound: a phase the allocation does not have (fleetd names those it has).
            FailedPrecondition: the allocation is FAILED or RELEASED.
            Unimplemented: this fleetd has no GetRanks.
        """
        if phase is not None:
            core.check_phase_name(phase)
        response = self.client.call(
            "GetRanks", topology_pb2.GetRanksRequest(id=self.id, phase=phase or ""),
            tenant=self.tenant, timeout=timeout)
        return Ranks.of(response)

    def fabric(self, devices: Optional[List[str]] = None, *, max_switch_hops: int = 0,
               timeout: Optional[float] = None) -> Fabric:
        """The fabric as this allocation's planner sees it (:meth:`fleet.Client.fabric`): its
        members (or ``devices``, e.g. spares to weigh), the ports it holds counted as usable."""
        return self.client.fabric(devices, allocation=self.id, max_switch_hops=max_switch_hops,
                                  tenant=self.tenant, timeout=timeout)

    # --- changes ---

    def changes(self, timeout: Optional[Seconds] = None) -> Iterator[Allocation]:
        """The allocation at every change (WatchAllocation), starting with how it is now,
        until it is FAILED or RELEASED (that one included) or ``timeout`` seconds pass
        (``None``: no limit). Each is also recorded as the allocation last seen. Stop early
        by leaving the loop (the stream is cancelled).

        Raises:
            DeadlineExceeded: ``timeout`` passed.
            NotFound, PermissionDenied, Unavailable: as fleetd says (no reconnection: use
                :meth:`on_member_replaced` for a follower that outlives fleetd's restarts).
        """
        stream = self.client.stub.WatchAllocation(
            topology_pb2.WatchAllocationRequest(id=self.id), timeout=core.seconds(timeout),
            metadata=self.client.metadata(self.tenant))
        try:
            for message in stream:
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
            stream.cancel()

    def detach(self, *devices: str, timeout: Optional[Seconds] = 60.0) -> Allocation:
        """Takes attached devices out of this virtual server (DetachDevices) and waits until it
        is READY again without them; the other devices' circuits are not touched.

        Returns:
            the allocation, READY, without ``devices`` among its members.

        Raises:
            NotFound, InvalidArgument, FailedPrecondition: as fleetd says (not a member, a
            device of the host, every attached device, not an attach allocation).
            AllocationFailed, Degraded, Released, DeadlineExceeded: as :meth:`wait_ready`.
        """
        response = self.client.call(
            "DetachDevices", topology_pb2.DetachDevicesRequest(id=self.id, devices=list(devices)),
            tenant=self.tenant)
        a = Allocation(response.allocation)
        if response.HasField("allocation"):
            self._seen(a)
        done = core.ready_without(devices)
        if not done(a):
            a = self._watch(done, core.seconds(timeout), f"READY without {', '.join(devices)}")
        return a

    def replace(self, member: str, spare: Optional[str] = None,
                timeout: Optional[Seconds] = 60.0) -> Allocation:
        """Swaps ``member`` for a spare (ReplaceMember): fleetd picks a free device of the same
        kind, or takes ``spare``, remakes only the circuits that touched the member and
        retrains them; the others are not touched. Waits until READY with the spare in the
        member's place, so the job can remap its ranks from :attr:`members`.

        Returns:
            the allocation, READY, ``member`` replaced.

        Raises:
            NotFound, FailedPrecondition, ResourceExhausted: as fleetd says (not a member, no
            free spare, the allocation busy or not READY/DEGRADED).
            AllocationFailed, Degraded, Released, DeadlineExceeded: as :meth:`wait_ready`.
        """
        response = self.client.call(
            "ReplaceMember", admin_pb2.ReplaceMemberRequest(
                allocation_id=self.id, member=member, spare=spare or ""),
            tenant=self.tenant, stub=self.client.admin)
        a = Allocation(response.allocation)
        if response.HasField("allocation"):
            self._seen(a)
        done = core.ready_without([member])
        if not done(a):
            a = self._watch(done, core.seconds(timeout), f"READY without {member}")
        return a

    def _watch(self, done: core.Predicate, timeout: Optional[float], goal: str, *,
               raise_on_degraded: bool = False, stop_at_end: bool = True,
               check: Optional[Callable[[Allocation], None]] = None,
               abandon: Optional[_Abandonable] = None) -> Allocation:
        """Watches the allocation until ``done``; raises as :func:`fleet.core.check_progress`
        and ``check`` say (unless not ``stop_at_end``), or Cancelled once ``abandon`` is
        given up."""
        if abandon is not None and abandon.why is not None:
            raise core.abandoned(self.id, goal, abandon.why)
        try:
            stream = self.client.stub.WatchAllocation(
                topology_pb2.WatchAllocationRequest(id=self.id), timeout=timeout,
                metadata=self.client.metadata(self.tenant))
        except ValueError:  # The channel closed after the wait was given up.
            if abandon is not None and abandon.why is not None:
                raise core.abandoned(self.id, goal, abandon.why) from None
            raise
        if abandon is not None:
            abandon.attach(stream)
        last: Optional[Allocation] = None
        try:
            for message in stream:
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
            if abandon is not None and abandon.why is not None:
                raise core.abandoned(self.id, goal, abandon.why) from None
            raise core.wait_error(self.id, e, goal, timeout, last) from None
        finally:
            stream.cancel()
        raise core.watch_ended(self.id, goal)

    # --- following: member replacements ---

    def on_member_replaced(self, callback: MemberReplacedCallback) -> MemberReplacedCallback:
        """Calls ``callback(replacement)`` with a :class:`MemberReplacement` for every member
        replacement of this allocation that :attr:`replacements` did not yet hold when the
        callback was registered: fleetd's heals under the request's ``on_failure``, the job's
        own :meth:`replace` calls and operators' alike. ``replacement.members`` is the member
        list after it, so the job can remap its ranks.

        Each replacement is delivered exactly once per callback, oldest first, as soon as the
        client sees fleetd store it (the spare's links may still be training: call
        :meth:`wait_ready` for READY). Callbacks run on one background thread,
        ``fleet-follow-ID``, which follows the allocation with WatchAllocation (reconnecting
        while fleetd is unavailable) and also keeps :attr:`members`, :attr:`replacements` and
        :attr:`state` current. Keep callbacks short; an exception a callback raises is logged
        and does not stop the others. The thread ends when the allocation is FAILED or
        RELEASED, on :meth:`release`, :meth:`stop_following` or ``Client.close()``, or when
        fleetd says the allocation is unknown or not the caller's (:attr:`follow_error`).

        Returns ``callback``, so it can be used as a decorator.

        Raises:
            Released: the allocation was released by this Topology already.
            TypeError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise TypeError(f"callback {callback!r} is not callable")
        if self._released:
            raise errors.Released(f"allocation {self.id} is released: it is no longer followed",
                                  self.allocation)
        with self._lock:
            self._subscribers.append([callback, len(self._allocation.replacements)])
            if (self._follower is None or not self._follower.is_alive()
                    or self._follow_stop.is_set()):
                # A follower that was told to stop ends on its own; a new one takes over.
                self._follow_stop = threading.Event()
                self.follow_error = None
                with self.client._followed_lock:
                    self.client._followed.add(self)
                self._follower = threading.Thread(target=self._follow_loop,
                                                  args=(self._follow_stop,),
                                                  name=f"fleet-follow-{self.id}", daemon=True)
                self._follower.start()
        return callback

    def stop_following(self, timeout: Optional[float] = 10.0) -> None:
        """Stops the follower thread (no more callbacks) and forgets the callbacks; waits up to
        ``timeout`` seconds for it to end unless called from a callback. Doing it again, or
        with nothing followed, does nothing."""
        with self._lock:
            self._follow_stop.set()
            self._subscribers.clear()
            stream = self._follow_stream
            thread = self._follower
        if stream is not None:
            stream.cancel()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self.client._followed_lock:
            self.client._followed.discard(self)

    def _follow_loop(self, stop: threading.Event) -> None:
        """The follower thread: watches the allocation until ``stop`` is set or it ends."""
        backoff = core.FOLLOW_BACKOFF_FIRST
        try:
            while not stop.is_set() and not self.client._closed:
                stream = self.client.stub.WatchAllocation(
                    topology_pb2.WatchAllocationRequest(id=self.id),
                    metadata=self.client.metadata(self.tenant))
                with self._lock:
                    if stop.is_set():  # Stopped before the stream was published.
                        stream.cancel()
                        return
                    self._follow_stream = stream
                ended = False
                try:
                    for message in stream:
                        backoff = core.FOLLOW_BACKOFF_FIRST
                        a = Allocation(message.allocation)
                        self._seen(a)
                        self._deliver(a, stop)
                        if a.state in core.ENDED:
                            ended = True
                            break
                except grpc.RpcError as e:
                    if stop.is_set() or self.client._closed:
                        return
                    error = errors.from_rpc_error(e)
                    if not isinstance(error, core.RETRIABLE):
                        # Unknown, not ours, or refused: following it again will not help.
                        self.follow_error = error
                        log.warning("allocation %s: no longer followed: %s", self.id, error)
                        return
                    log.warning("allocation %s: watch lost, following again: %s", self.id, error)
                finally:
                    stream.cancel()
                    with self._lock:
                        if self._follow_stream is stream:
                            self._follow_stream = None
                if ended:
                    return
                if stop.wait(backoff):
                    return
                backoff = min(backoff * 2, core.FOLLOW_BACKOFF_MAX)
        finally:
            with self._lock:
                current = self._follow_stop is stop
            if current:
                with self.client._followed_lock:
                    self.client._followed.discard(self)

    def _deliver(self, a: Allocation, stop: threading.Event) -> None:
        """Calls each callback for the replacements of ``a`` it has not had yet."""
        count = len(a.replacements)
        with self._lock:
            due = core.due_replacements(self._subscribers, count)
        for (callback, _), first in due:
            for i in range(first, count):
                if stop.is_set():
                    return
                try:
                    callback(MemberReplacement.of(a, i))
                except Exception:  # noqa: BLE001 - a callback's bug must not stop the others.
                    log.exception("allocation %s: member-replaced callback %r raised", self.id,
                                  callback)

    # --- lease ---

    def keep_alive(self, timeout: Optional[float] = None) -> datetime.datetime:
        """Renews the lease now; returns when it expires (UTC)."""
        response = self.client.call("KeepAlive", topology_pb2.KeepAliveRequest(id=self.id),
                                    tenant=self.tenant, timeout=timeout)
        expires = response.lease_expires.ToDatetime(tzinfo=datetime.timezone.utc)
        with self._lock:
            self._lease_expires = expires
        return expires

    def _keepalive_loop(self) -> None:
        interval = self._interval
        call_timeout = core.keepalive_call_timeout(self.lease_seconds, self.client.timeout)
        while not self._stop.wait(interval):
            try:
                self.keep_alive(timeout=call_timeout)
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
                if not self._stop.is_set():
                    log.warning("allocation %s: lease renewal stopped: %s", self.id, e)
                return
            except ValueError as e:
                # grpc's "closed channel": the caller closed its own channel under the client
                # (Client.close() stops the renewals before closing one it opened).
                if not self._stop.is_set():
                    self.keepalive_error = errors.Cancelled(
                        f"allocation {self.id}: lease renewal stopped: its channel is closed "
                        f"({e})", grpc.StatusCode.CANCELLED)
                    log.warning("%s", self.keepalive_error.message)
                return

    def stop_keepalive(self) -> None:
        """Stops the background renewals (the lease then runs out unless released first)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # --- release ---

    def release(self, timeout: Optional[Seconds] = 60.0) -> Allocation:
        """Stops the renewals and releases the allocation: its circuits come off the switch.
        Returns it RELEASED. Releasing again does nothing. Stops following it
        (:meth:`on_member_replaced`) too, and gives up the :meth:`start_phase` waits still
        running (their futures raise :class:`fleet.Cancelled`)."""
        self._give_up_phase_waits(core.RELEASED_WHY)
        self.stop_keepalive()
        self.stop_following()
        with self.client._followed_lock:
            self.client._topologies.discard(self)
        if self._released:
            return self.allocation
        a = self.client.release(self.id, tenant=self.tenant)
        self._seen(a)
        if a.state == "RELEASING":
            # The switch refused a removal; fleetd retries it. Wait for the end.
            a = self._watch(core.is_released, core.seconds(timeout), "RELEASED",
                            stop_at_end=False)
        self._released = True
        return a

    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.release()
            return
        try:
            self.release()
        except errors.FleetError as e:
            log.warning("allocation %s: release after %s failed: %s", self.id,
                        exc_type.__name__, e)

    def __repr__(self) -> str:
        return f"<fleet.Topology {self.id} {self.state}>"

    # --- helpers ---

    def _seen(self, a: Allocation) -> None:
        with self._lock:
            if not core.newer(a, self._allocation):
                return
            self._allocation = a
            expires = core.expiry(a)
            if expires is not None:
                self._lease_expires = expires
