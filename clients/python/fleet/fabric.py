"""The fabric as a job's own planner sees it (GetFabric): which O-NIC ports of its devices it
may use, which ordered pairs one circuit could join and over how many trunk hops, and what a
change of circuits has cost on this fleetd lately.

::

    fabric = client.fabric(["gpu1", "gpu2", "gpu3", "gpu4"])   # candidates before a request
    fabric = topo.fabric()                                      # an allocation's members
    fabric.degree("gpu1")            # ports a phase may give gpu1 (its own or free)
    fabric.joinable("gpu1", "gpu3")  # one circuit gpu1 -> gpu3 could be made now
    fabric.hops("gpu1", "gpu3")      # trunk fibers it would cross (0: one switch)
    fabric.change_seconds()          # median quiesce + program + verify + retrain, or None

Asking holds nothing: a request made after may still find a port taken.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

from fleet import core
from fleet.v1 import topology_pb2


@dataclasses.dataclass(frozen=True)
class StageCost:
    """What one stage of a change has cost lately: median and 90th percentile in seconds
    (``None`` before fleetd has measured it), over ``samples`` recent changes."""

    stage: str
    median: Optional[float]
    p90: Optional[float]
    samples: int


class Fabric:
    """A GetFabricResponse, indexed by device and by ordered pair."""

    def __init__(self, response: topology_pb2.GetFabricResponse) -> None:
        self.response = response
        self.devices: Dict[str, topology_pb2.FabricDevice] = {
            d.device: d for d in response.devices}
        self.pairs: Dict[Tuple[str, str], topology_pb2.FabricPair] = {
            (p.source, p.destination): p for p in response.pairs}
        self.costs: Dict[str, StageCost] = {
            c.stage: StageCost(
                c.stage,
                core.duration_seconds(c.median) if c.samples else None,
                core.duration_seconds(c.p90) if c.samples else None,
                c.samples)
            for c in response.change_costs}

    def degree(self, device: str) -> int:
        """The ports of ``device`` a phase may use: free, or held by the allocation asked
        about."""
        return self.devices[device].usable_ports

    def joinable(self, source: str, destination: str) -> bool:
        """Whether one circuit ``source`` → ``destination`` could be made now (each pair
        judged alone: two may need the same trunk)."""
        return self.pairs[(source, destination)].joinable

    def hops(self, source: str, destination: str) -> Optional[int]:
        """Trunk fibers the circuit would cross (0: both on one switch); ``None`` when not
        joinable."""
        pair = self.pairs[(source, destination)]
        return pair.trunk_hops if pair.joinable else None

    def why_not(self, source: str, destination: str) -> str:
        """Why ``source`` → ``destination`` cannot be joined; empty when it can."""
        return self.pairs[(source, destination)].reason

    def change_seconds(self, quantile: str = "median") -> Optional[float]:
        """What a change of circuits (a phase switched in place, a request, a heal) has cost
        lately: quiesce, program, verify and retrain added up at ``quantile`` (``"median"`` or
        ``"p90"``); ``None`` until the fleetd answering has measured each of them (a follower
        replica, or a leader just after a takeover, has not)."""
        total = 0.0
        for stage in ("quiesce", "program", "verify", "retrain"):
            cost = self.costs.get(stage)
            value = None if cost is None else getattr(cost, quantile)
            if value is None:
                return None
            total += value
        return total

    def __repr__(self) -> str:
        joinable = sum(1 for p in self.response.pairs if p.joinable)
        return (f"Fabric({len(self.devices)} devices, {joinable}/{len(self.pairs)} pairs "
                f"joinable)")


def request(devices: Optional[List[str]], allocation: str,
            max_switch_hops: int) -> topology_pb2.GetFabricRequest:
    """The GetFabric request for :meth:`fleet.Client.fabric` and :meth:`fleet.Topology.fabric`."""
    if isinstance(devices, str):
        raise TypeError("devices: expected a sequence of device names, not a string")
    return topology_pb2.GetFabricRequest(allocation=allocation, devices=list(devices or []),
                                         max_switch_hops=max_switch_hops)
