"""Building ``fleet.v1.TopologySpec`` and ``fleet.v1.FailurePolicy`` messages from plain
Python values.

Endpoints are written as in fleetctl's request files: ``"gpu1"`` is a device (the planner
picks its free O-NIC port), ``"gpu1-n0/2"`` is port 2 of O-NIC ``gpu1-n0``. So is a failure
policy: ``{"replace": True, "within": "2s", "max_replacements": 2, "spares": "same-switch"}``
is the request file's ``on_failure: {replace: true, within: 2s, max_replacements: 2,
spares: same-switch}``.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from fleet.v1 import common_pb2, topology_pb2


@dataclasses.dataclass(frozen=True)
class Link:
    """A link from ``a`` to ``b``: one circuit a→b, or one each way when ``duplex``.

    ``width`` parallel circuits each way (device endpoints only when > 1).
    """

    a: str
    b: str
    duplex: bool = False
    width: int = 1


LinkLike = Union[Link, Tuple[str, str], topology_pb2.Link]
Members = Union[Sequence[str], topology_pb2.MemberSet]
TopologyLike = Union[topology_pb2.TopologySpec, Mapping[str, Any]]


def endpoint(name: str) -> topology_pb2.Endpoint:
    """``"dev"`` → a device endpoint; ``"onic/port"`` → a named O-NIC port."""
    if "/" in name:
        onic, _, port = name.rpartition("/")
        if not onic or not port.isdigit():
            raise ValueError(f"endpoint {name!r}: expected DEVICE or ONIC/PORT")
        return topology_pb2.Endpoint(onic_port=common_pb2.OnicPortRef(onic=onic, port=int(port)))
    if not name:
        raise ValueError("endpoint is empty")
    return topology_pb2.Endpoint(device=name)


def member_set(members: Members) -> topology_pb2.MemberSet:
    """An ordered member list from device names (or a MemberSet, copied)."""
    if isinstance(members, topology_pb2.MemberSet):
        out = topology_pb2.MemberSet()
        out.CopyFrom(members)
        return out
    if isinstance(members, str):
        raise TypeError("members: expected a sequence of device names, not a string")
    return topology_pb2.MemberSet(devices=list(members))


def ring(members: Members, *, bidirectional: bool = True, width: int = 1) -> topology_pb2.TopologySpec:
    """A ring over ``members`` in order.

    Bidirectional (the default): duplex links m(i)↔m(i+1), two ports per member.
    Unidirectional: m0→m1→…→m(n-1)→m0, one port per member.
    """
    kind = (topology_pb2.TEMPLATE_KIND_RING_BIDIRECTIONAL if bidirectional
            else topology_pb2.TEMPLATE_KIND_RING_UNIDIRECTIONAL)
    return topology_pb2.TopologySpec(template=topology_pb2.TemplateSpec(
        kind=kind, members=member_set(members), width=width if width > 1 else 0))


def _link(item: LinkLike, duplex: bool) -> topology_pb2.Link:
    if isinstance(item, topology_pb2.Link):
        out = topology_pb2.Link()
        out.CopyFrom(item)
        return out
    if isinstance(item, Link):
        return topology_pb2.Link(a=endpoint(item.a), b=endpoint(item.b), duplex=item.duplex,
                                 width=item.width if item.width > 1 else 0)
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return topology_pb2.Link(a=endpoint(item[0]), b=endpoint(item[1]), duplex=duplex)
    raise TypeError(f"link {item!r}: expected fleet.Link, (a, b) or fleet.v1.Link")


def links(items: Iterable[LinkLike], *, duplex: bool = False) -> topology_pb2.TopologySpec:
    """Explicit links. ``(a, b)`` pairs are directed a→b unless ``duplex``; :class:`Link`
    and ``fleet.v1.Link`` items keep their own direction."""
    out = topology_pb2.LinksSpec(links=[_link(i, duplex) for i in items])
    if not out.links:
        raise ValueError("links: at least one link is needed")
    return topology_pb2.TopologySpec(links=out)


def traffic(members: Members,
            matrix: Mapping[Tuple[str, str], float]) -> topology_pb2.TopologySpec:
    """A traffic-aware topology: fleetd picks the duplex links that carry the most of
    ``matrix`` (bytes a step sends, keyed ``(source, destination)`` by device name) on direct
    circuits, within each member's free ports. Every device in ``matrix`` must be a member."""
    spec = member_set(members)
    index = {name: i for i, name in enumerate(spec.devices)}
    entries = []
    for (source, destination), sent in matrix.items():
        for name in (source, destination):
            if name not in index:
                raise ValueError(f"traffic: {name!r} is not one of the members")
        if source == destination:
            raise ValueError(f"traffic: {source} -> {destination}: a device sends to itself")
        if not math.isfinite(sent) or sent < 0:
            raise ValueError(f"traffic: {source} -> {destination} sends {sent} bytes; "
                             "bytes are a finite number, not negative")
        if sent > 0:
            entries.append(topology_pb2.TrafficEntry(
                source=index[source], destination=index[destination], bytes=sent))
    if not entries:
        raise ValueError("traffic: no pair sends any bytes")
    return topology_pb2.TopologySpec(
        traffic=topology_pb2.TrafficSpec(members=spec, matrix=entries))


# `build`'s keywords shadow the functions of the same name.
_ring = ring
_links = links


def topology_spec(value: TopologyLike) -> topology_pb2.TopologySpec:
    """A TopologySpec from a TopologySpec (copied) or a mapping of :func:`build` keywords,
    e.g. ``{"ring": gpus}`` or ``{"links": [("gpu1", "gpu2")], "duplex": True}``."""
    if isinstance(value, topology_pb2.TopologySpec):
        out = topology_pb2.TopologySpec()
        out.CopyFrom(value)
        return out
    if isinstance(value, Mapping):
        return build(**value)
    raise TypeError(f"topology {value!r}: expected fleet.v1.TopologySpec or a mapping")


def build(*, ring: Members | None = None, links: Iterable[LinkLike] | None = None,
          bidirectional: bool = True, duplex: bool = False, width: int = 1) -> topology_pb2.TopologySpec:
    """One topology from exactly one of ``ring`` and ``links``."""
    if (ring is None) == (links is None):
        raise ValueError("give exactly one of ring= and links=")
    if ring is not None:
        return _ring(ring, bidirectional=bidirectional, width=width)
    return _links(links, duplex=duplex)


# --- failure policy (the request's on_failure) ---

FailurePolicyLike = Union[topology_pb2.FailurePolicy, Mapping[str, Any]]

FAILURE_POLICY_KEYS = ("replace", "within", "max_replacements", "spares")
"""The keys of an ``on_failure`` mapping, as in fleetctl's request files."""

SPARE_SCOPES: Mapping[str, int] = {
    "same-switch": topology_pb2.SPARE_SCOPE_SAME_SWITCH,
    "same_switch": topology_pb2.SPARE_SCOPE_SAME_SWITCH,
    "any": topology_pb2.SPARE_SCOPE_ANY,
}
"""``on_failure.spares`` words → ``fleet.v1.SpareScope``: ``same-switch`` takes only a device
on the failed member's switch, ``any`` its switch first, else another one over trunks."""

_WITHIN_MIN_NS = 1_000_000  # 1ms
_WITHIN_MAX_NS = 24 * 3600 * 1_000_000_000  # 24h
_WITHIN_RULE = "is not a duration from 1ms to 24h, such as 2s or 500ms"
_UINT32_MAX = 2**32 - 1
_DURATION_UNITS_NS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "ms": 1_000_000,
                      "s": 1_000_000_000, "m": 60 * 1_000_000_000, "h": 3600 * 1_000_000_000}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|ms|s|m|h)")


def duration_nanos(text: str) -> Optional[int]:
    """Nanoseconds of a duration written as fleetctl (Abseil's ParseDuration) reads it:
    ``"2s"``, ``"500ms"``, ``"1m30s"``, ``"1.5h"``, ``"-3s"``, ``"0"``; ``None`` when it is not
    one (``"inf"`` included)."""
    text = text.strip()
    sign = 1
    if text[:1] in ("+", "-"):
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        return None
    total = 0
    pos = 0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None:
            return None
        number, unit = m.groups()
        whole, _, fraction = number.partition(".")
        scale = _DURATION_UNITS_NS[unit]
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        pos = m.end()
    return sign * total


def _within_nanos(value: Any) -> Optional[int]:
    """``on_failure.within`` as nanoseconds: a duration string, seconds or a timedelta."""
    if isinstance(value, str):
        return duration_nanos(value)
    if isinstance(value, datetime.timedelta):
        return (value.days * 86400 + value.seconds) * 1_000_000_000 + value.microseconds * 1_000
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return round(value * 1e9)
    return None


def _check_policy(policy: topology_pb2.FailurePolicy, problems: List[str]) -> None:
    """The rules a FailurePolicy message must keep, whichever way it was built."""
    if policy.HasField("within"):
        ns = policy.within.ToNanoseconds()
        if not _WITHIN_MIN_NS <= ns <= _WITHIN_MAX_NS:
            problems.append(f"on_failure.within: {policy.within.ToJsonString()!r} {_WITHIN_RULE}")
    if policy.spares not in topology_pb2.SpareScope.values():
        problems.append(f"on_failure.spares {policy.spares!r} is not one of: same-switch, any")


def failure_policy(value: FailurePolicyLike) -> topology_pb2.FailurePolicy:
    """A ``fleet.v1.FailurePolicy`` from a mapping written as fleetctl's request file's
    ``on_failure`` (or from a FailurePolicy message, copied and checked).

    Keys, each optional (as in the request file):

    - ``replace``: ``True`` to have fleetd replace a failed member by a spare; ``False`` or
      absent: the allocation stays DEGRADED and its links are retried until the fault clears.
    - ``within``: how long links may fail to retrain before their member is replaced: a
      duration string (``"2s"``, ``"500ms"``, ``"1m30s"``), seconds (``2``, ``0.5``) or a
      ``datetime.timedelta``; from 1ms to 24h. Absent: fleetd's 2 s. A member whose device or
      switch port has failed is replaced at once.
    - ``max_replacements``: replacements fleetd may make over the allocation's life, an
      integer from 0 to 2^32-1; 0 or absent: 1.
    - ``spares``: ``"same-switch"`` (absent: the same) or ``"any"`` (its switch first, else
      another over trunks); a ``fleet.v1.SpareScope`` value is taken too.

    Raises:
        ValueError: an unknown key or a bad value; the message names every such field, its
            value and the rule, e.g. ``on_failure.spares 'nearby' is not one of: same-switch,
            any``.
        TypeError: ``value`` is neither a mapping nor a ``fleet.v1.FailurePolicy``.
    """
    problems: List[str] = []
    if isinstance(value, topology_pb2.FailurePolicy):
        out = topology_pb2.FailurePolicy()
        out.CopyFrom(value)
        _check_policy(out, problems)
    elif isinstance(value, Mapping):
        out = topology_pb2.FailurePolicy()
        for key in value:
            if key not in FAILURE_POLICY_KEYS:
                problems.append(f"on_failure: unknown key {key!r}; expected "
                                f"{', '.join(FAILURE_POLICY_KEYS)}")
        if "replace" in value:
            replace = value["replace"]
            if isinstance(replace, bool):
                out.replace = replace
            else:
                problems.append(f"on_failure.replace {replace!r} must be true or false")
        if "within" in value:
            within = value["within"]
            ns = _within_nanos(within)
            if ns is None or not _WITHIN_MIN_NS <= ns <= _WITHIN_MAX_NS:
                problems.append(f"on_failure.within: {within!r} {_WITHIN_RULE}")
            else:
                out.within.FromNanoseconds(ns)
        if "max_replacements" in value:
            count = value["max_replacements"]
            if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= _UINT32_MAX:
                out.max_replacements = count
            else:
                problems.append(f"on_failure.max_replacements {count!r} must be a non-negative "
                                "integer")
        if "spares" in value:
            spares = value["spares"]
            if isinstance(spares, str) and spares in SPARE_SCOPES:
                out.spares = SPARE_SCOPES[spares]
            elif (isinstance(spares, int) and not isinstance(spares, bool)
                  and spares in topology_pb2.SpareScope.values()):
                out.spares = spares
            else:
                problems.append(f"on_failure.spares {spares!r} is not one of: same-switch, any")
    else:
        raise TypeError(f"on_failure {value!r}: expected a mapping such as "
                        "{'replace': True, 'within': '2s'} or fleet.v1.FailurePolicy")
    if problems:
        raise ValueError("; ".join(problems))
    return out
