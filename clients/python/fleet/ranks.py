"""Rank order: which rank each member of an allocation should be, so that a collective's ring
(NCCL, gloo) follows the circuits, and where each rank runs.

``Topology.ranks()`` (GetRanks) returns a :class:`Ranks`: the ranks in order, each with its
device, host and local rank, and the hosts in node-rank order. From it come the environment
of one torch.distributed process (:meth:`Ranks.torch_env`), a hostfile
(:meth:`Ranks.hostfile`) and the ring as NCCL_RINGS text (:meth:`Ranks.nccl_rings`); see
docs/ranks.md ("From Python and PyTorch") for how to hand the order to NCCL and what is
doubtful about it.

FLEET's rank order may interleave hosts (host A runs ranks 0 and 2, host B ranks 1 and 3):
a rank is found from a host and a local rank through ``hosts[].ranks``, never as
``node_rank * nproc + local_rank``.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, Mapping, Optional, Tuple

from fleet.v1 import topology_pb2


def order_name(order: int) -> str:
    """A ``fleet.v1.RankOrder`` value's short name: ``"RING"``, ``"CHAIN"``, ``"TORUS"``,
    ``"MEMBERS"`` (the number, as text, for one this client does not know)."""
    for name, value in topology_pb2.RankOrder.items():
        if value == order:
            return name.removeprefix("RANK_ORDER_")
    return str(order)


def _index(value: object, field: str) -> int:
    """An integer argument (not a bool), or TypeError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} {value!r}: expected an integer")
    return value


@dataclasses.dataclass(frozen=True)
class Rank:
    """One rank of a :class:`Ranks`.

    Attributes:
        rank: its global rank (RANK).
        device: the member device that runs it, e.g. ``"gpu3"``.
        member_index: the device's index in the allocation's ``members``.
        host: the host that runs it: a CPU's own host, else the host an attach allocation
            of the same tenant attaches the device to; ``""`` for a pooled device attached
            to no host.
        pcie_address: for an attached device, the PCIe address on that host of the host
            O-NIC's downstream port it appears behind; ``""`` otherwise.
        coordinates: for a torus, x, y[, z] (x varying fastest); empty otherwise.
        local_rank: its index among its host's ranks, in rank order (LOCAL_RANK).
    """

    rank: int
    device: str
    member_index: int
    host: str
    pcie_address: str
    coordinates: Tuple[int, ...]
    local_rank: int


@dataclasses.dataclass(frozen=True)
class RankHost:
    """One host's share of the ranks.

    Attributes:
        host: its name; ``""`` collects the ranks whose devices have no host.
        node_rank: hosts are numbered in order of their lowest rank (GROUP_RANK, torchrun's
            ``--node-rank``); node rank 0 runs rank 0.
        ranks: its global ranks in order: ``ranks[LOCAL_RANK]`` is RANK.
    """

    host: str
    node_rank: int
    ranks: Tuple[int, ...]

    @property
    def local_world_size(self) -> int:
        """How many ranks it runs (LOCAL_WORLD_SIZE, a hostfile's slots)."""
        return len(self.ranks)


@dataclasses.dataclass(frozen=True)
class Ranks:
    """An allocation's rank order for one phase, as GetRanks answered it.

    Attributes:
        allocation_id: the allocation.
        phase: the phase whose circuits were followed; ``""`` for a single-phase allocation.
        order: how the ranks follow the circuits: ``"RING"`` (rank r+1 is the member r's
            light goes to; rank 0 follows the last), ``"CHAIN"`` (one path, rank 0 at an
            end), ``"TORUS"`` (member order, each rank with its ``coordinates``) or
            ``"MEMBERS"`` (none of these: member order).
        ranks: the ranks in order; ``ranks[r].rank == r``.
        hosts: the hosts in node-rank order.
        response: the ``fleet.v1.GetRanksResponse`` it was made from.
    """

    allocation_id: str
    phase: str
    order: str
    ranks: Tuple[Rank, ...]
    hosts: Tuple[RankHost, ...]
    response: topology_pb2.GetRanksResponse = dataclasses.field(repr=False, compare=False)

    @classmethod
    def of(cls, response: topology_pb2.GetRanksResponse) -> "Ranks":
        """From a ``fleet.v1.GetRanksResponse``; checks what the helpers rely on (ranks
        numbered 0..n-1 in order, every rank on exactly one host) and raises ValueError
        naming what does not hold."""
        ranks = tuple(Rank(rank=r.rank, device=r.device, member_index=r.member_index,
                           host=r.host, pcie_address=r.pcie_address,
                           coordinates=tuple(r.coordinates), local_rank=r.local_rank)
                      for r in response.ranks)
        hosts = tuple(RankHost(host=h.host, node_rank=h.node_rank, ranks=tuple(h.ranks))
                      for h in sorted(response.hosts, key=lambda h: h.node_rank))
        for i, r in enumerate(ranks):
            if r.rank != i:
                raise ValueError(f"GetRanks of {response.allocation_id}: ranks[{i}].rank is "
                                 f"{r.rank}: ranks must come in order from 0")
        placed = sorted(r for h in hosts for r in h.ranks)
        if placed != list(range(len(ranks))):
            raise ValueError(f"GetRanks of {response.allocation_id}: hosts[].ranks hold "
                             f"{placed}, not each of ranks 0..{len(ranks) - 1} once")
        return cls(allocation_id=response.allocation_id, phase=response.phase,
                   order=order_name(response.order), ranks=ranks,
                   hosts=hosts, response=response)

    # --- reading it ---

    @property
    def world_size(self) -> int:
        """How many ranks (WORLD_SIZE)."""
        return len(self.ranks)

    @property
    def devices(self) -> Tuple[str, ...]:
        """The member devices in rank order: ``devices[r]`` runs rank r."""
        return tuple(r.device for r in self.ranks)

    def __len__(self) -> int:
        return len(self.ranks)

    def __iter__(self) -> Iterator[Rank]:
        return iter(self.ranks)

    def __getitem__(self, rank: int) -> Rank:
        return self.ranks[rank]

    def host(self, name: str) -> RankHost:
        """The share of host ``name`` (``""``: the ranks with no host).

        Raises:
            ValueError: no rank runs on ``name``; the message lists the hosts that do.
        """
        for h in self.hosts:
            if h.host == name:
                return h
        known = ", ".join(repr(h.host) for h in self.hosts) or "none"
        raise ValueError(f"host {name!r} runs no rank of allocation {self.allocation_id}; "
                         f"hosts: {known}")

    def rank_of(self, device: str) -> Rank:
        """The rank ``device`` runs.

        Raises:
            ValueError: ``device`` is not a member; the message lists the members.
        """
        for r in self.ranks:
            if r.device == device:
                return r
        raise ValueError(f"device {device!r} is not a member of allocation "
                         f"{self.allocation_id}; members in rank order: "
                         f"{', '.join(self.devices) or 'none'}")

    def global_rank(self, host: str, local_rank: int) -> int:
        """RANK of local rank ``local_rank`` on ``host``: ``host(host).ranks[local_rank]``.

        Raises:
            ValueError: an unknown host, or a local rank outside 0..LOCAL_WORLD_SIZE-1.
            TypeError: ``local_rank`` is not an integer.
        """
        share = self.host(host)
        local_rank = _index(local_rank, "local_rank")
        if not 0 <= local_rank < len(share.ranks):
            raise ValueError(f"local_rank {local_rank} is out of range for host {host!r}: it "
                             f"runs {len(share.ranks)} rank(s), local ranks 0.."
                             f"{len(share.ranks) - 1}")
        return share.ranks[local_rank]

    # --- handing it on ---

    def torch_env(self, host: str, local_rank: int, *, master_addr: Optional[str] = None,
                  master_port: Optional[int] = None) -> Dict[str, str]:
        """The torch.distributed environment (``init_method="env://"``) of the process that
        runs local rank ``local_rank`` on ``host``, as torchrun names it: RANK, WORLD_SIZE,
        LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (and NODE_RANK: the host's node rank),
        GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE; MASTER_ADDR (``master_addr``, else the
        host of rank 0 when it has one) and MASTER_PORT when given; and FLEET_ALLOCATION,
        FLEET_PHASE, FLEET_HOST, FLEET_DEVICE and FLEET_PCIE_ADDRESS (when known) so the
        process knows its device.

        RANK comes from ``hosts[].ranks``: where FLEET's order interleaves hosts, it is not
        ``GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK`` as torchrun would number it, so a
        script started by torchrun updates ``os.environ`` with this before
        ``init_process_group`` (docs/ranks.md).

        Raises:
            ValueError: an unknown host, a local rank out of range, a port outside 1..65535.
            TypeError: ``local_rank`` or ``master_port`` is not an integer.
        """
        share = self.host(host)
        rank = self.ranks[self.global_rank(host, local_rank)]
        env = {
            "RANK": str(rank.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(share.local_world_size),
            "GROUP_RANK": str(share.node_rank),
            "NODE_RANK": str(share.node_rank),
            "GROUP_WORLD_SIZE": str(len(self.hosts)),
            "ROLE_RANK": str(rank.rank),
            "ROLE_WORLD_SIZE": str(self.world_size),
            "FLEET_ALLOCATION": self.allocation_id,
            "FLEET_HOST": host,
            "FLEET_DEVICE": rank.device,
        }
        if self.phase:
            env["FLEET_PHASE"] = self.phase
        if rank.pcie_address:
            env["FLEET_PCIE_ADDRESS"] = rank.pcie_address
        if master_addr is None and self.ranks and self.ranks[0].host:
            master_addr = self.ranks[0].host  # Rank 0 serves env://'s store.
        if master_addr:
            env["MASTER_ADDR"] = master_addr
        if master_port is not None:
            port = _index(master_port, "master_port")
            if not 1 <= port <= 65535:
                raise ValueError(f"master_port {port}: must be from 1 to 65535")
            env["MASTER_PORT"] = str(port)
        return env

    def hostfile(self, *, no_host: Optional[str] = None) -> str:
        """A hostfile, ``HOST slots=N`` a line in node-rank order (mpirun, DeepSpeed): the
        host of node rank 0 first, N its ranks.

        Args:
            no_host: the name to write for the ranks whose devices have no host (e.g.
                ``"localhost"``); by default they raise.

        Raises:
            ValueError: some ranks have no host and ``no_host`` is not given.
        """
        lines = []
        for h in self.hosts:
            name = h.host
            if not name:
                if not no_host:
                    raise ValueError(
                        f"ranks {', '.join(map(str, h.ranks))} of allocation "
                        f"{self.allocation_id} have no host (pooled devices attached to none): "
                        "attach them to hosts, or give no_host= a name for them")
                name = no_host
            lines.append(f"{name} slots={h.local_world_size}\n")
        return "".join(lines)

    def nccl_rings(self, rank_of: Optional[Mapping[str, int]] = None, *,
                   reverse: bool = False) -> str:
        """The ring as NCCL_RINGS text (``"0 1 2 3"``; ``"0 1 2 3|3 2 1 0"`` with
        ``reverse``, for a bidirectional ring whose circuits run both ways).

        Only RCCL and NCCL up to 2.4 read NCCL_RINGS (docs/ranks.md); a job whose ranks are
        FLEET's already has them in ring order. ``rank_of`` (device → the job's own rank)
        writes the ring in the job's numbering, for a job that cannot take FLEET's.

        Raises:
            ValueError: the order is not RING, or ``rank_of`` misses a member or repeats a
                rank.
        """
        if self.order != "RING":
            raise ValueError(f"allocation {self.allocation_id}"
                             f"{' phase ' + self.phase if self.phase else ''} is ordered "
                             f"{self.order}, not RING: its circuits form no ring")
        if rank_of is None:
            ring = [r.rank for r in self.ranks]
        else:
            missing = [d for d in self.devices if d not in rank_of]
            if missing:
                raise ValueError(f"rank_of has no rank for {', '.join(missing)}")
            ring = [rank_of[d] for d in self.devices]
            if len(set(ring)) != len(ring):
                raise ValueError(f"rank_of gives two members the same rank: {ring}")
        text = " ".join(map(str, ring))
        if reverse:
            text += "|" + " ".join(map(str, reversed(ring)))
        return text

    def table(self) -> str:
        """A table to print: a row per rank with its device, host, local rank and PCIe
        address."""
        rows = [("RANK", "DEVICE", "HOST", "LOCAL", "PCIE")]
        rows += [(str(r.rank), r.device, r.host or "-", str(r.local_rank),
                  r.pcie_address or "-") for r in self.ranks]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n"
                       for row in rows)
