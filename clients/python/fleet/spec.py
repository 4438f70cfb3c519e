"""Building ``fleet.v1.TopologySpec`` messages from plain Python values.

Endpoints are written as in fleetctl's request files: ``"gpu1"`` is a device (the planner
picks its free O-NIC port), ``"gpu1-n0/2"`` is port 2 of O-NIC ``gpu1-n0``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence, Tuple, Union

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
