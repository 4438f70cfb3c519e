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

import dataclasses
import datetime
import logging
import os
import threading
import time
from types import TracebackType
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple, Type, Union

import grpc

from fleet import credentials, errors, spec
from fleet.v1 import admin_pb2, admin_pb2_grpc, topology_pb2, topology_pb2_grpc

log = logging.getLogger("fleet")

PRINCIPAL_METADATA_KEY = "x-fleet-principal"
"""gRPC metadata key naming the caller (``job:TENANT``, ``operator:NAME``)."""

Seconds = Union[float, int, datetime.timedelta]

_STATE_NAMES = {v: k.removeprefix("ALLOCATION_STATE_")
                for k, v in topology_pb2.AllocationState.items()}


def state_name(state: int) -> str:
    """``ALLOCATION_STATE_READY`` → ``"READY"``."""
    return _STATE_NAMES.get(state, str(state))


def _seconds(value: Optional[Seconds]) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def _duration_seconds(d: Any) -> float:
    return d.seconds + d.nanos / 1e9


# States after which an allocation changes no more: its watch ends there.
_ENDED = (topology_pb2.ALLOCATION_STATE_FAILED, topology_pb2.ALLOCATION_STATE_RELEASED)


@dataclasses.dataclass(frozen=True)
class MemberReplacement:
    """One member of an allocation replaced by another device, as the job sees it: by fleetd
    healing under the request's failure policy, by the job (:meth:`Topology.replace`) or by an
    operator. Made from a ``fleet.v1.MemberReplacement`` record of the allocation.

    Attributes:
        failed: the device that left.
        spare: the device that took its place.
        position: its index in the member list, the same for both: the spare takes over the
            failed member's rank.
        reason: why, e.g. ``device gpu2 failed: …`` or the links that would not retrain.
        by: ``"fleetd"`` when healing, else the principal that asked.
        degraded_for: seconds from the allocation turning DEGRADED to the replacement being
            stored, for a heal; ``None`` when fleetd did not time it (a job's or an
            operator's replacement).
        time: when fleetd stored the replacement (UTC), ``None`` if it did not say.
        members: the member list right after this replacement, in member order (ranks):
            ``members[position] == spare``.
        index: its place among the allocation's replacements, oldest first (0 for the first).
        allocation: the allocation as the client saw it when it learned of the replacement;
            it may still be retraining the spare's links (``state`` PROGRAMMING or TRAINING):
            :meth:`Topology.wait_ready` waits for READY.
    """

    failed: str
    spare: str
    position: int
    reason: str
    by: str
    degraded_for: Optional[float]
    time: Optional[datetime.datetime]
    members: Tuple[str, ...]
    index: int
    allocation: topology_pb2.Allocation

    @classmethod
    def of(cls, allocation: topology_pb2.Allocation, index: int) -> "MemberReplacement":
        """Replacement ``index`` of ``allocation.replacements``, with the member list as it
        was right after it (later replacements undone at their positions)."""
        records = allocation.replacements
        r = records[index]
        members = list(allocation.members)
        for later in reversed(records[index + 1:]):
            if later.position < len(members) and members[later.position] == later.spare:
                members[later.position] = later.failed
        return cls(failed=r.failed, spare=r.spare, position=r.position, reason=r.reason,
                   by=r.by,
                   degraded_for=(_duration_seconds(r.degraded_for)
                                 if r.HasField("degraded_for") else None),
                   time=(r.time.ToDatetime(tzinfo=datetime.timezone.utc)
                         if r.HasField("time") else None),
                   members=tuple(members), index=index, allocation=allocation)


MemberReplacedCallback = Callable[["MemberReplacement"], None]


@dataclasses.dataclass(frozen=True)
class PhaseSwitch:
    """What one :meth:`Topology.phase` call took.

    Attributes:
        phase: the phase now active.
        latency: seconds from the ActivatePhase call to the allocation READY in the new
            phase, as the job saw it.
        switch_seconds: the switch's part of it (the program and verify stages fleetd
            timed); ``None`` if fleetd reported no such stages.
        stages: every stage fleetd timed for this reconfiguration, name → seconds.
        cross_connects_added: cross-connects the switch made.
        cross_connects_removed: cross-connects the switch removed.
        allocation: the allocation, READY in the new phase.
    """

    phase: str
    latency: float
    switch_seconds: Optional[float]
    stages: Mapping[str, float]
    cross_connects_added: int
    cross_connects_removed: int
    allocation: topology_pb2.Allocation

    def __float__(self) -> float:
        return self.latency


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
        self._followed_lock = threading.Lock()
        self._followed: "set[Topology]" = set()  # Topologies with a follower running.

    # --- plumbing ---

    def metadata(self, tenant: Optional[str] = None) -> Tuple[Tuple[str, str], ...]:
        """The call metadata naming the caller for ``tenant``: none over TLS, where fleetd
        knows the caller by its certificate."""
        if self.connection is not None and not self.connection.insecure:
            return ()
        principal = self.principal
        tenant = tenant or self.tenant
        if principal is None and tenant:
            principal = f"job:{tenant}"
        return ((PRINCIPAL_METADATA_KEY, principal),) if principal else ()

    def call(self, method: str, request: Any, *, tenant: Optional[str] = None,
             timeout: Optional[float] = None, stub: Any = None) -> Any:
        """Calls unary RPC ``method`` of TopologyService (or of ``stub``, e.g. ``self.admin``);
        a failure raises its FleetError."""
        try:
            return getattr(self.stub if stub is None else stub, method)(
                request, timeout=self.timeout if timeout is None else timeout,
                metadata=self.metadata(tenant))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from e

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
        forms = sum(x is not None for x in (request, ring, links, phases))
        if forms != 1:
            raise ValueError("give exactly one of request, ring=, links= and phases=")
        if isinstance(request, topology_pb2.RequestTopologyRequest):
            req = topology_pb2.RequestTopologyRequest()
            req.CopyFrom(request)
        else:
            req = topology_pb2.RequestTopologyRequest()
            if isinstance(request, topology_pb2.TopologySpec):
                req.topology.CopyFrom(request)
            elif request is not None:
                raise TypeError(f"request {type(request).__name__}: expected fleet.v1.TopologySpec "
                                "or fleet.v1.RequestTopologyRequest")
            elif ring is not None:
                req.topology.CopyFrom(spec.ring(ring, bidirectional=bidirectional, width=width))
            elif links is not None:
                req.topology.CopyFrom(spec.links(links, duplex=duplex))
            else:
                assert phases is not None
                if not phases:
                    raise ValueError("phases: at least one phase is needed")
                for phase_name, topology in phases.items():
                    req.phases.add(name=phase_name, topology=spec.topology_spec(topology))
        if initial_phase is not None:
            req.initial_phase = initial_phase
        if tenant is not None:
            req.tenant = tenant
        elif not req.tenant and self.tenant:
            req.tenant = self.tenant
        if name is not None:
            req.name = name
        if request_id is not None:
            req.request_id = request_id
        if on_failure is not None:
            req.on_failure.CopyFrom(spec.failure_policy(on_failure))
        elif req.HasField("on_failure"):
            spec.failure_policy(req.on_failure)  # A raw request's policy keeps the same rules.
        lease_s = _seconds(lease)
        if lease_s is not None:
            if lease_s <= 0:
                raise ValueError(f"lease {lease_s}s: must be positive")
            req.lease.FromNanoseconds(int(lease_s * 1e9))
        if req.dry_run:
            raise ValueError("dry_run: a dry run returns a plan, not an allocation; call "
                             "client.stub.RequestTopology for it")
        if not 0 < keepalive_fraction < 1:
            raise ValueError("keepalive_fraction: must be between 0 and 1")

        response = self.call("RequestTopology", req, tenant=req.tenant or None)
        return Topology(self, response.allocation, tenant=req.tenant or None,
                        keepalive=keepalive, keepalive_fraction=keepalive_fraction)

    def allocation(self, allocation_id: str, *, tenant: Optional[str] = None) -> topology_pb2.Allocation:
        """The allocation ``allocation_id`` as fleetd has it now."""
        return self.call("GetAllocation", topology_pb2.GetAllocationRequest(id=allocation_id),
                         tenant=tenant)

    def allocations(self, *, tenant: Optional[str] = None,
                    include_released: bool = False) -> List[topology_pb2.Allocation]:
        """The tenant's allocations (every tenant's for an operator with no tenant)."""
        tenant = tenant or self.tenant
        response = self.call("ListAllocations", topology_pb2.ListAllocationsRequest(
            tenant=tenant or "", include_released=include_released), tenant=tenant)
        return list(response.allocations)

    def release(self, allocation_id: str, *, tenant: Optional[str] = None) -> topology_pb2.Allocation:
        """Releases the allocation: its circuits come off the switch. Returns it, RELEASED."""
        return self.call("ReleaseTopology", topology_pb2.ReleaseTopologyRequest(id=allocation_id),
                         tenant=tenant).allocation

    def close(self) -> None:
        """Stops following the allocations of its topologies (:meth:`Topology.stop_following`)
        and closes the channel if this client opened it."""
        self._closed = True
        with self._followed_lock:
            followed = list(self._followed)
        for topo in followed:
            topo.stop_following()
        if self._owns_channel:
            self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


class Topology:
    """One allocation held by this job: wait for it, switch its phases, release it.

    Made by :meth:`Client.topology`. While it is held, a background thread renews its lease;
    :attr:`keepalive_error` is the last renewal's failure, if any. Once a callback is
    registered with :meth:`on_member_replaced`, another follows the allocation
    (WatchAllocation) and keeps :attr:`members`, :attr:`replacements` and :attr:`state`
    current. As a context manager it releases the allocation on exit, also when the block
    raises (a failed release is then logged, never hiding the block's exception).
    """

    def __init__(self, client: Client, allocation: topology_pb2.Allocation, *,
                 tenant: Optional[str], keepalive: bool = True,
                 keepalive_fraction: float = 1 / 3) -> None:
        self.client = client
        self.id: str = allocation.id
        self.tenant = tenant or allocation.tenant or None
        self._lock = threading.Lock()
        self._allocation = allocation
        self._released = False
        self.keepalive_error: Optional[errors.FleetError] = None
        self._lease_expires = self._expiry(allocation)
        self.lease_seconds = self._lease_length(allocation)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if keepalive and self.lease_seconds is not None:
            self._interval = max(0.05, self.lease_seconds * keepalive_fraction)
            self._thread = threading.Thread(target=self._keepalive_loop,
                                            name=f"fleet-keepalive-{self.id}", daemon=True)
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
    def allocation(self) -> topology_pb2.Allocation:
        """The allocation as last seen (see :meth:`refresh`)."""
        with self._lock:
            return self._allocation

    @property
    def state(self) -> str:
        """The last seen state's short name: ``"READY"``, ``"FAILED"``, …"""
        return state_name(self.allocation.state)

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
    def circuits(self) -> List[topology_pb2.Circuit]:
        return list(self.allocation.circuits)

    @property
    def active_phase(self) -> str:
        return self.allocation.active_phase

    @property
    def lease_expires(self) -> Optional[datetime.datetime]:
        """When the lease runs out unless renewed, as of the last renewal (UTC)."""
        with self._lock:
            return self._lease_expires

    def refresh(self) -> topology_pb2.Allocation:
        """Reads the allocation from fleetd."""
        a = self.client.allocation(self.id, tenant=self.tenant)
        self._seen(a)
        return a

    # --- waiting ---

    def wait_ready(self, timeout: Optional[Seconds] = None, *,
                   raise_on_degraded: bool = False) -> topology_pb2.Allocation:
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
        return self._watch(lambda a: a.state == topology_pb2.ALLOCATION_STATE_READY,
                           _seconds(timeout), "READY", raise_on_degraded=raise_on_degraded)

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
            AllocationFailed, Degraded, Released, DeadlineExceeded: as :meth:`wait_ready`.
        """
        start = time.monotonic()
        response = self.client.call(
            "ActivatePhase", topology_pb2.ActivatePhaseRequest(id=self.id, phase=name),
            tenant=self.tenant)
        if response.HasField("allocation"):
            self._seen(response.allocation)

        def ready_in_phase(a: topology_pb2.Allocation) -> bool:
            return (a.state == topology_pb2.ALLOCATION_STATE_READY and a.active_phase == name
                    and all(c.state == topology_pb2.CIRCUIT_STATE_ACTIVE
                            for c in a.circuits if c.phase == name))

        a = response.allocation
        if not ready_in_phase(a):
            a = self._watch(ready_in_phase, _seconds(timeout), f"READY in phase {name}")
        latency = time.monotonic() - start
        stages = {t.stage: _duration_seconds(t.duration) for t in a.stage_timings}
        switch = [stages[s] for s in ("program", "verify") if s in stages]
        return PhaseSwitch(phase=name, latency=latency,
                           switch_seconds=sum(switch) if switch else None, stages=stages,
                           cross_connects_added=len(response.plan.add),
                           cross_connects_removed=len(response.plan.remove), allocation=a)

    def detach(self, *devices: str, timeout: Optional[Seconds] = 60.0) -> topology_pb2.Allocation:
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
        if response.HasField("allocation"):
            self._seen(response.allocation)
        gone = set(devices)

        def ready_without(a: topology_pb2.Allocation) -> bool:
            return (a.state == topology_pb2.ALLOCATION_STATE_READY
                    and not gone.intersection(a.members))

        a = response.allocation
        if not ready_without(a):
            a = self._watch(ready_without, _seconds(timeout),
                            f"READY without {', '.join(devices)}")
        return a

    def replace(self, member: str, spare: Optional[str] = None,
                timeout: Optional[Seconds] = 60.0) -> topology_pb2.Allocation:
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
        if response.HasField("allocation"):
            self._seen(response.allocation)

        def ready_replaced(a: topology_pb2.Allocation) -> bool:
            return a.state == topology_pb2.ALLOCATION_STATE_READY and member not in a.members

        a = response.allocation
        if not ready_replaced(a):
            a = self._watch(ready_replaced, _seconds(timeout), f"READY without {member}")
        return a

    def _watch(self, done: Callable[[topology_pb2.Allocation], bool], timeout: Optional[float],
               goal: str, *, raise_on_degraded: bool = False,
               stop_at_end: bool = True) -> topology_pb2.Allocation:
        stream = self.client.stub.WatchAllocation(
            topology_pb2.WatchAllocationRequest(id=self.id), timeout=timeout,
            metadata=self.client.metadata(self.tenant))
        last: Optional[topology_pb2.Allocation] = None
        try:
            for message in stream:
                a = message.allocation
                last = a
                self._seen(a)
                if done(a):
                    return a
                if not stop_at_end:
                    continue
                state = a.state
                if state == topology_pb2.ALLOCATION_STATE_FAILED:
                    raise errors.AllocationFailed(
                        f"allocation {self.id} FAILED: {a.reason or 'no reason given'}", a)
                if state in (topology_pb2.ALLOCATION_STATE_RELEASING,
                             topology_pb2.ALLOCATION_STATE_RELEASED):
                    raise errors.Released(
                        f"allocation {self.id} is {state_name(state)}"
                        + (f": {a.reason}" if a.reason else ""), a)
                if state == topology_pb2.ALLOCATION_STATE_DEGRADED and raise_on_degraded:
                    raise errors.Degraded(f"allocation {self.id} DEGRADED: {a.reason}", a)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                if last is not None and last.state == topology_pb2.ALLOCATION_STATE_DEGRADED:
                    raise errors.Degraded(
                        f"allocation {self.id} still DEGRADED after {timeout:g}s: {last.reason}",
                        last) from None
                seen = state_name(last.state) if last is not None else "unknown"
                raise errors.DeadlineExceeded(
                    f"allocation {self.id} not {goal} after {timeout:g}s (state {seen})",
                    grpc.StatusCode.DEADLINE_EXCEEDED) from None
            raise errors.from_rpc_error(e) from e
        finally:
            stream.cancel()
        raise errors.Unavailable(f"fleetd ended the watch of allocation {self.id} before it was "
                                 f"{goal}", grpc.StatusCode.UNAVAILABLE)

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
        backoff = 0.1
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
                        backoff = 0.1
                        a = message.allocation
                        self._seen(a)
                        self._deliver(a, stop)
                        if a.state in _ENDED:
                            ended = True
                            break
                except grpc.RpcError as e:
                    if stop.is_set() or self.client._closed:
                        return
                    error = errors.from_rpc_error(e)
                    if not isinstance(error, (errors.Unavailable, errors.DeadlineExceeded,
                                              errors.Internal, errors.Unknown)):
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
                backoff = min(backoff * 2, 5.0)
        finally:
            with self._lock:
                current = self._follow_stop is stop
            if current:
                with self.client._followed_lock:
                    self.client._followed.discard(self)

    def _deliver(self, a: topology_pb2.Allocation, stop: threading.Event) -> None:
        """Calls each callback for the replacements of ``a`` it has not had yet."""
        count = len(a.replacements)
        with self._lock:
            due = [(s, s[1]) for s in self._subscribers if s[1] < count]
            for s, _ in due:
                s[1] = count
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
        # A renewal that takes longer than half the lease is given up and tried again.
        call_timeout = min(self.client.timeout, max(0.5, (self.lease_seconds or 0) / 2))
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

    def stop_keepalive(self) -> None:
        """Stops the background renewals (the lease then runs out unless released first)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # --- release ---

    def release(self, timeout: Optional[Seconds] = 60.0) -> topology_pb2.Allocation:
        """Stops the renewals and releases the allocation: its circuits come off the switch.
        Returns it RELEASED. Releasing again does nothing. Stops following it
        (:meth:`on_member_replaced`) too."""
        self.stop_keepalive()
        self.stop_following()
        if self._released:
            return self.allocation
        a = self.client.release(self.id, tenant=self.tenant)
        self._seen(a)
        if a.state == topology_pb2.ALLOCATION_STATE_RELEASING:
            # The switch refused a removal; fleetd retries it. Wait for the end.
            a = self._watch(lambda x: x.state == topology_pb2.ALLOCATION_STATE_RELEASED,
                            _seconds(timeout), "RELEASED", stop_at_end=False)
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

    def _seen(self, a: topology_pb2.Allocation) -> None:
        with self._lock:
            # Several streams may report it (a wait and the follower): keep the newest.
            old = self._allocation
            if (a.HasField("updated") and old.HasField("updated")
                    and a.updated.ToNanoseconds() < old.updated.ToNanoseconds()):
                return
            self._allocation = a
            expires = self._expiry(a)
            if expires is not None:
                self._lease_expires = expires

    @staticmethod
    def _expiry(a: topology_pb2.Allocation) -> Optional[datetime.datetime]:
        if not a.HasField("lease_expires"):
            return None
        return a.lease_expires.ToDatetime(tzinfo=datetime.timezone.utc)

    @staticmethod
    def _lease_length(a: topology_pb2.Allocation) -> Optional[float]:
        """The lease the allocation was admitted with: the request's, or fleetd's default
        (its expiry less its creation)."""
        if a.request.HasField("lease"):
            lease = _duration_seconds(a.request.lease)
            if lease > 0:
                return lease
        if a.HasField("lease_expires") and a.HasField("created"):
            lease = (a.lease_expires.ToNanoseconds() - a.created.ToNanoseconds()) / 1e9
            if lease > 0:
                return lease
        return None
