"""FLEET client for training jobs: request an optical topology, keep it, switch its phases.

::

    import fleet

    gpus = [f"gpu{i}" for i in range(1, 9)]
    client = fleet.Client("127.0.0.1:50051")  # credentials as fleetctl's: FLEET_CONFIG, ...
    with client.topology(ring=gpus, lease=60, tenant="team-a") as topo:
        topo.wait_ready(timeout=60)
        ...

With ``on_failure={"replace": True, "within": "2s"}`` fleetd replaces a failed member by a
spare; ``topo.on_member_replaced(callback)`` hands the job each replacement and the new
member list. ``topo.ranks()`` gives the rank order that follows the circuits, with each
rank's host, the torchrun environment and a hostfile (:class:`fleet.Ranks`).
``client.fabric(devices)`` and ``topo.fabric()`` tell a job's own planner which ports and
pairs it may use and what a phase switch costs (:class:`fleet.Fabric`); ``fleet.traffic``
asks for a phase by its traffic matrix.

:mod:`fleet.aio` is the same client over asyncio (``await topo.phase("tp")``,
``await topo.start_phase("tp")`` to overlap a switch with compute, ``async for`` over
``topo.changes()``).

The generated ``fleet.v1`` messages and stubs (``fleet.v1.topology_pb2`` and friends) are
built next to this package from ``proto/fleet/v1``; see clients/python/README.md.
"""

from fleet.client import Client, Topology
from fleet.core import Allocation, Circuit, MemberReplacement, PhaseSwitch, state_name
from fleet.credentials import Connection, CredentialsError
from fleet.errors import (
    Aborted,
    AllocationError,
    AllocationFailed,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    Degraded,
    FailedPrecondition,
    FleetError,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    PhaseSuperseded,
    Released,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from fleet.fabric import Fabric, StageCost
from fleet.ranks import Rank, RankHost, Ranks
from fleet.spec import Link, failure_policy, links, ring, traffic

__all__ = [
    "Client", "Topology", "Allocation", "Circuit", "PhaseSwitch", "MemberReplacement", "Link",
    "ring", "links", "traffic",
    "failure_policy", "state_name", "Ranks", "Rank", "RankHost", "Fabric", "StageCost",
    "Connection", "CredentialsError",
    "FleetError", "AllocationError", "AllocationFailed", "Degraded", "Released",
    "PhaseSuperseded",
    "Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
]
