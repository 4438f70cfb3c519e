"""What the blocking client (:mod:`fleet.client`) and the asyncio client (:mod:`fleet.aio`)
share: everything that does no I/O. Building a request, naming the caller, deciding when a
wait is over or has failed, and turning what fleetd answered into Python objects are done
here once, so the two clients cannot drift apart; they differ only in how they call fleetd.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import threading
from typing import Any, Callable, Iterable, List, Mapping, Optional, Tuple, Union

import grpc

from fleet import credentials, errors, spec
from fleet.v1 import topology_pb2

PRINCIPAL_METADATA_KEY = "x-fleet-principal"
"""gRPC metadata key naming the caller (``job:TENANT``, ``operator:NAME``)."""

LOG_POSITION_METADATA_KEY = "x-fleet-log-position"
"""Trailing metadata of a replicated fleetd's every answer: the replicated log's entry its
store held (docs/ha.md)."""

MIN_LOG_POSITION_METADATA_KEY = "x-fleet-min-log-position"
"""Call metadata: the newest entry the caller was answered; a replica behind it waits for it."""


class LogPosition:
    """Read-your-writes across a replicated site's fleetd (docs/ha.md): the newest entry of
    the replicated log any answer to this client named, sent with each call so that a replica
    that has not applied it yet waits for it (or refuses UNAVAILABLE) instead of answering from
    before a change this client saw. A single fleetd names none. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen = 0

    def metadata(self) -> Tuple[Tuple[str, str], ...]:
        """The call metadata naming the newest entry seen; none before the first."""
        with self._lock:
            return ((MIN_LOG_POSITION_METADATA_KEY, str(self._seen)),) if self._seen else ()

    def learn(self, trailing: Optional[Iterable[Tuple[str, Any]]]) -> None:
        """Takes the position an answer's trailing metadata names, if it is newer."""
        for key, value in trailing or ():
            if key != LOG_POSITION_METADATA_KEY:
                continue
            try:
                entry = int(value)
            except (TypeError, ValueError):
                continue  # Not a position this client can use: it keeps the one it has.
            with self._lock:
                self._seen = max(self._seen, entry)

    @property
    def seen(self) -> int:
        with self._lock:
            return self._seen

Seconds = Union[float, int, datetime.timedelta]

_STATE_NAMES = {v: k.removeprefix("ALLOCATION_STATE_")
                for k, v in topology_pb2.AllocationState.items()}
_CIRCUIT_STATE_NAMES = {v: k.removeprefix("CIRCUIT_STATE_")
                        for k, v in topology_pb2.CircuitState.items()}

# States after which an allocation changes no more: its watch ends there.
ENDED = ("FAILED", "RELEASED")

# Errors after which following an allocation again may work (fleetd restarting, a proxy
# dropping the stream); any other (unknown, not ours, refused) will not get better.
RETRIABLE = (errors.Unavailable, errors.DeadlineExceeded, errors.Internal, errors.Unknown)

FOLLOW_BACKOFF_FIRST = 0.1
FOLLOW_BACKOFF_MAX = 5.0


def state_name(state: Union[int, str]) -> str:
    """An allocation state's short name: ``ALLOCATION_STATE_READY`` → ``"READY"``; a name
    (what :class:`Allocation` has) stays as it is, and a number this client does not know
    becomes its text."""
    if isinstance(state, str):
        return state
    return _STATE_NAMES.get(state, str(state))


def circuit_state_name(state: Union[int, str]) -> str:
    """A circuit state's short name: ``CIRCUIT_STATE_ACTIVE`` → ``"ACTIVE"``, as
    :func:`state_name`."""
    if isinstance(state, str):
        return state
    return _CIRCUIT_STATE_NAMES.get(state, str(state))


class _MessageView:
    """A read-only view of a protobuf message whose fields read through, ``state`` aside."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        object.__setattr__(self, "message", message)

    def __getattr__(self, name: str) -> Any:
        if name == "message":  # Not yet set (while unpickling): no recursion.
            raise AttributeError(name)
        return getattr(self.message, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"fleet.{type(self).__name__} is read-only; change a copy of its "
                             f".message (a {self.message.DESCRIPTOR.full_name})")

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return bool(self.message == other.message)  # type: ignore[attr-defined]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # Equal by value, as the message.

    # Defined here, or the lookups of copy and pickle would reach the message's own.
    def __reduce__(self) -> Tuple[Any, Tuple[Any]]:
        return type(self), (self.message,)

    def __copy__(self) -> Any:
        return type(self)(self.message)

    def __deepcopy__(self, memo: dict) -> Any:
        return type(self)(copy.deepcopy(self.message, memo))

    def __str__(self) -> str:
        return str(self.message)


class Circuit(_MessageView):
    """One circuit of an :class:`Allocation`: the fields of ``fleet.v1.Circuit`` (``id``,
    ``source``, ``destination``, ``cross_connects``, ``phase``, ``reason``, …) with ``state``
    the circuit state's name: ``"PLANNED"``, ``"PROGRAMMED"``, ``"ACTIVE"``, ``"DEGRADED"``,
    ``"REMOVING"``, ``"INACTIVE"``. ``message`` is the ``fleet.v1.Circuit``."""

    __slots__ = ()

    def __init__(self, message: Union[topology_pb2.Circuit, "Circuit"]) -> None:
        super().__init__(message.message if isinstance(message, Circuit) else message)

    @property
    def state(self) -> str:
        return circuit_state_name(self.message.state)

    def __repr__(self) -> str:
        m = self.message
        return (f"<fleet.Circuit {m.id} {m.source.onic}/{m.source.port} -> "
                f"{m.destination.onic}/{m.destination.port} {self.state}>")


class Allocation(_MessageView):
    """An allocation as the clients return it: the fields of ``fleet.v1.Allocation`` (``id``,
    ``tenant``, ``members``, ``reason``, ``active_phase``, ``lease_expires``,
    ``replacements``, ``HasField(...)``, …) read as the message's, except that ``state`` is
    the state's name — ``"PENDING"``, ``"PROGRAMMING"``, ``"TRAINING"``, ``"READY"``,
    ``"DEGRADED"``, ``"FAILED"``, ``"RELEASING"``, ``"RELEASED"`` — as ``Topology.state`` is,
    and its ``circuits`` are :class:`Circuit` views, whose ``state`` is a name too
    (``"ACTIVE"``).

    ``message`` is the ``fleet.v1.Allocation`` itself, for protobuf's own functions
    (``json_format.MessageToJson(a.message)``). Read-only; equal to another whose message is
    equal."""

    __slots__ = ()

    def __init__(self, message: Union[topology_pb2.Allocation, "Allocation"]) -> None:
        if isinstance(message, Allocation):
            message = message.message
        if not isinstance(message, topology_pb2.Allocation):
            raise TypeError(f"allocation {type(message).__name__}: expected a "
                            "fleet.v1.Allocation")
        super().__init__(message)

    @property
    def state(self) -> str:
        return state_name(self.message.state)

    @property
    def circuits(self) -> List[Circuit]:
        return [Circuit(c) for c in self.message.circuits]

    def __repr__(self) -> str:
        return f"<fleet.Allocation {self.message.id} {self.state}>"


Predicate = Callable[[Allocation], bool]


def seconds(value: Optional[Seconds]) -> Optional[float]:
    """Seconds from seconds or a timedelta; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def duration_seconds(d: Any) -> float:
    """A ``google.protobuf.Duration`` in seconds."""
    return d.seconds + d.nanos / 1e9


# --- what a job sees ---

@dataclasses.dataclass(frozen=True)
class MemberReplacement:
    """One member of an allocation replaced by another device, as the job sees it: by fleetd
    healing under the request's failure policy, by the job (``Topology.replace``) or by an
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
            ``Topology.wait_ready`` waits for READY.
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
    allocation: Allocation

    @classmethod
    def of(cls, allocation: Allocation, index: int) -> "MemberReplacement":
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
                   degraded_for=(duration_seconds(r.degraded_for)
                                 if r.HasField("degraded_for") else None),
                   time=(r.time.ToDatetime(tzinfo=datetime.timezone.utc)
                         if r.HasField("time") else None),
                   members=tuple(members), index=index, allocation=allocation)


MemberReplacedCallback = Callable[[MemberReplacement], Any]


@dataclasses.dataclass(frozen=True)
class PhaseSwitch:
    """What one phase switch (``Topology.phase``) took.

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
    allocation: Allocation

    def __float__(self) -> float:
        return self.latency


def phase_switch(name: str, latency: float, response: topology_pb2.ActivatePhaseResponse,
                 allocation: Allocation) -> PhaseSwitch:
    """The :class:`PhaseSwitch` of a switch to ``name`` that ActivatePhase answered with
    ``response`` and that ended READY as ``allocation``, ``latency`` seconds after the call."""
    stages = {t.stage: duration_seconds(t.duration) for t in allocation.stage_timings}
    switch = [stages[s] for s in ("program", "verify") if s in stages]
    return PhaseSwitch(phase=name, latency=latency,
                       switch_seconds=sum(switch) if switch else None, stages=stages,
                       cross_connects_added=len(response.plan.add),
                       cross_connects_removed=len(response.plan.remove), allocation=allocation)


# --- requests ---

def topology_request(
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
    default_tenant: Optional[str] = None,
    name: Optional[str] = None,
    request_id: Optional[str] = None,
    on_failure: Optional[spec.FailurePolicyLike] = None,
    keepalive_fraction: float = 1 / 3,
) -> topology_pb2.RequestTopologyRequest:
    """The RequestTopologyRequest of ``Client.topology``'s arguments (documented there),
    checked: raises ValueError or TypeError, naming the field, the value and the rule, for
    anything fleetd would refuse or the client cannot do. ``default_tenant`` is the client's
    tenant, used when neither ``tenant`` nor the raw request names one."""
    forms = sum(x is not None for x in (request, ring, links, phases))
    if forms != 1:
        raise ValueError("give exactly one of request, ring=, links= and phases=")
    req = topology_pb2.RequestTopologyRequest()
    if isinstance(request, topology_pb2.RequestTopologyRequest):
        req.CopyFrom(request)
    elif isinstance(request, topology_pb2.TopologySpec):
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
    if prepare_next_phase:
        if len(req.phases) != 2:
            raise ValueError(f"prepare_next_phase: needs exactly two phases, got {len(req.phases)}"
                             " (make before break keeps both on the switch, each on its own "
                             "ports)")
        req.prepare_next_phase = True
    if tenant is not None:
        req.tenant = tenant
    elif not req.tenant and default_tenant:
        req.tenant = default_tenant
    if name is not None:
        req.name = name
    if request_id is not None:
        req.request_id = request_id
    if on_failure is not None:
        req.on_failure.CopyFrom(spec.failure_policy(on_failure))
    elif req.HasField("on_failure"):
        spec.failure_policy(req.on_failure)  # A raw request's policy keeps the same rules.
    lease_s = seconds(lease)
    if lease_s is not None:
        if lease_s <= 0:
            raise ValueError(f"lease {lease_s:g}s: must be positive")
        req.lease.FromNanoseconds(int(lease_s * 1e9))
    if req.dry_run:
        raise ValueError("dry_run: a dry run returns a plan, not an allocation; call "
                         "client.stub.RequestTopology for it")
    check_keepalive_fraction(keepalive_fraction)
    return req


def check_keepalive_fraction(fraction: float) -> None:
    if not 0 < fraction < 1:
        raise ValueError(f"keepalive_fraction {fraction!r}: must be between 0 and 1")


def check_phase_name(name: Any) -> str:
    """A phase name as ActivatePhase takes it; a wrong type or an empty name raises before
    any RPC."""
    if not isinstance(name, str):
        raise TypeError(f"phase {name!r}: expected the phase's name, a string")
    if not name:
        raise ValueError("phase '': a phase name is needed (the request's phases: names)")
    return name


def call_metadata(connection: Optional[credentials.Connection], principal: Optional[str],
                  tenant: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    """The call metadata naming the caller for ``tenant``: none over TLS, where fleetd knows
    the caller by its certificate; over plaintext (or a caller's own channel, where
    ``connection`` is None) ``principal``, else ``job:TENANT``."""
    if connection is not None and not connection.insecure:
        return ()
    if principal is None and tenant:
        principal = f"job:{tenant}"
    return ((PRINCIPAL_METADATA_KEY, principal),) if principal else ()


# --- waiting ---

def is_ready(a: Allocation) -> bool:
    return a.state == "READY"


def is_released(a: Allocation) -> bool:
    return a.state == "RELEASED"


def ready_in_phase(name: str) -> Predicate:
    """READY with ``name`` active and every circuit of it ACTIVE."""
    def done(a: Allocation) -> bool:
        return (a.state == "READY" and a.active_phase == name
                and all(c.state == "ACTIVE" for c in a.circuits if c.phase == name))
    return done


def ready_without(devices: Iterable[str]) -> Predicate:
    """READY with none of ``devices`` among its members."""
    gone = frozenset(devices)

    def done(a: Allocation) -> bool:
        return a.state == "READY" and not gone.intersection(a.members)
    return done


def check_progress(a: Allocation, *, raise_on_degraded: bool = False) -> None:
    """Raises the AllocationError a wait ends with when ``a`` can no longer become what it
    waits for: FAILED, releasing or released, or DEGRADED when ``raise_on_degraded``."""
    state = a.state
    if state == "FAILED":
        raise errors.AllocationFailed(
            f"allocation {a.id} FAILED: {a.reason or 'no reason given'}", a)
    if state in ("RELEASING", "RELEASED"):
        raise errors.Released(
            f"allocation {a.id} is {state}" + (f": {a.reason}" if a.reason else ""), a)
    if state == "DEGRADED" and raise_on_degraded:
        raise errors.Degraded(f"allocation {a.id} DEGRADED: {a.reason}", a)


def check_phase(name: str, a: Allocation, since: Optional[Allocation] = None) -> None:
    """Raises when a wait for READY in phase ``name`` (:func:`ready_in_phase`) can no longer
    end so because ``a`` has another phase active: PhaseSuperseded when another switch took
    over (READY, PROGRAMMING, … in the other phase), Degraded when the allocation is DEGRADED
    in another phase (fleetd rolled a failed switch back to the phase before, or the switch
    that took over did not train; ``reason`` says which). ``since`` is the allocation
    ActivatePhase answered with: an update older than it was seen before the switch and is
    not taken for another one. FAILED and released allocations are left to
    :func:`check_progress`."""
    if a.active_phase == name or a.state in ENDED or a.state == "RELEASING":
        return
    if since is not None and not newer(a, since):
        return
    if a.state == "DEGRADED":
        raise errors.Degraded(f"allocation {a.id} DEGRADED in phase {a.active_phase}, not "
                              f"{name}: {a.reason or 'no reason given'}", a)
    raise errors.PhaseSuperseded(name, a)


def phase_check(name: str, since: Optional[Allocation] = None) -> Callable[[Allocation], None]:
    """:func:`check_phase` for ``name`` and ``since``, as a wait's extra check."""
    return lambda a: check_phase(name, a, since)


def wait_error(allocation_id: str, error: grpc.RpcError, goal: str, timeout: Optional[float],
               last: Optional[Allocation]) -> errors.FleetError:
    """The error a wait for ``goal`` ends with when its watch fails with ``error``: at the
    deadline, Degraded if the allocation was last seen DEGRADED, else DeadlineExceeded saying
    the state it was in; otherwise the RPC's own FleetError."""
    code = error.code() if hasattr(error, "code") else None
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        waited = f"{timeout:g}s" if timeout is not None else "the deadline"
        if last is not None and last.state == "DEGRADED":
            return errors.Degraded(
                f"allocation {allocation_id} still DEGRADED after {waited}: {last.reason}", last)
        seen = last.state if last is not None else "unknown"
        return errors.DeadlineExceeded(
            f"allocation {allocation_id} not {goal} after {waited} (state {seen})",
            grpc.StatusCode.DEADLINE_EXCEEDED)
    return errors.from_rpc_error(error)


def watch_ended(allocation_id: str, goal: str) -> errors.FleetError:
    """The error of a watch fleetd ended before the wait was over."""
    return errors.Unavailable(f"fleetd ended the watch of allocation {allocation_id} before it "
                              f"was {goal}", grpc.StatusCode.UNAVAILABLE)


def abandoned(allocation_id: str, goal: str, why: str) -> errors.Cancelled:
    """The error of a wait for ``goal`` the client gave up for ``why`` (the topology
    released, the client closed, the wait's own stream cancelled): not the caller's own
    cancellation, so not one the caller would take for it."""
    return errors.Cancelled(f"allocation {allocation_id}: the wait for {goal} was given up: "
                            f"{why}", grpc.StatusCode.CANCELLED)


RELEASED_WHY = "the topology was released"
CLOSED_WHY = "the client was closed"


# --- the allocation as last seen ---

def newer(a: Allocation, old: Allocation) -> bool:
    """Whether ``a`` may replace ``old`` as the allocation last seen: several streams may
    report it (a wait and the follower), so an older update never overwrites a newer one."""
    return not (a.HasField("updated") and old.HasField("updated")
                and a.updated.ToNanoseconds() < old.updated.ToNanoseconds())


def expiry(a: Allocation) -> Optional[datetime.datetime]:
    """When ``a``'s lease runs out (UTC), if fleetd said."""
    if not a.HasField("lease_expires"):
        return None
    return a.lease_expires.ToDatetime(tzinfo=datetime.timezone.utc)


def lease_length(a: Allocation) -> Optional[float]:
    """The lease the allocation was admitted with: the request's, or fleetd's default (its
    expiry less its creation)."""
    if a.request.HasField("lease"):
        lease = duration_seconds(a.request.lease)
        if lease > 0:
            return lease
    if a.HasField("lease_expires") and a.HasField("created"):
        lease = (a.lease_expires.ToNanoseconds() - a.created.ToNanoseconds()) / 1e9
        if lease > 0:
            return lease
    return None


def keepalive_interval(lease: float, fraction: float) -> float:
    """Seconds between background renewals of a ``lease``-second lease."""
    return max(0.05, lease * fraction)


def keepalive_call_timeout(lease: Optional[float], call_timeout: float) -> float:
    """A renewal that takes longer than half the lease is given up and tried again."""
    return min(call_timeout, max(0.5, (lease or 0) / 2))


def due_replacements(subscribers: Iterable[list], count: int) -> list:
    """For followers' subscriber records ``[callback, next_index]``: the ``(record, first)``
    pairs owed replacements ``first..count-1``; advances each record's index to ``count``, so
    each replacement is delivered once per callback."""
    due = [(s, s[1]) for s in subscribers if s[1] < count]
    for s, _ in due:
        s[1] = count
    return due
