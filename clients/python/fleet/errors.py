"""Exceptions raised by the FLEET client.

Every gRPC error fleetd answers becomes a :class:`FleetError` subclass chosen by its status
code, carrying the server's message unchanged; the allocation outcomes a job waits for
(:class:`AllocationFailed`, :class:`Degraded`, :class:`Released`) are FleetErrors too, so one
``except fleet.FleetError`` catches everything the client raises on the server's behalf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Type

import grpc

if TYPE_CHECKING:  # fleet.core imports this module.
    from fleet.core import Allocation


class FleetError(Exception):
    """An error from fleetd, or an allocation that did not become what the job asked for.

    Attributes:
        code: the gRPC status code fleetd answered (``None`` for allocation outcomes that are
            not RPC errors).
        message: the server's message, unchanged.
    """

    code: Optional[grpc.StatusCode] = None

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        # The same form as fleetctl's `error: CODE: message`.
        if self.code is None:
            return self.message
        return f"{self.code.name}: {self.message}"


class Cancelled(FleetError):
    """A call or a wait that was cancelled, or given up by the client itself: a
    ``start_phase`` wait abandoned by ``release()`` or ``Client.close()``, for instance
    (the message says which)."""

    code = grpc.StatusCode.CANCELLED


class Unknown(FleetError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(FleetError):
    """A malformed request; the message names the field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(FleetError):
    """An RPC or a wait ran past its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(FleetError):
    """An unknown device, O-NIC or allocation."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(FleetError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(FleetError):
    """Another tenant's allocation, or an operator-only action."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(FleetError):
    """No free port or trunk; the message names the member or trunk group."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(FleetError):
    """A member that is drained, failed or held by another allocation, or an ended allocation."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(FleetError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(FleetError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(FleetError):
    """Something this fleetd does not do yet (for example phases)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(FleetError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(FleetError):
    """fleetd is unreachable or stopping, or an agent it needs is not connected."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(FleetError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(FleetError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[FleetError]] = {
    cls.code: cls
    for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
    if cls.code is not None
}


def from_rpc_error(error: grpc.RpcError) -> FleetError:
    """The FleetError for a failed RPC: the subclass of its code, with the server's message."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else None
    cls = _BY_CODE.get(code, FleetError)
    return cls(details or str(code.name if code else "unknown error"), code)


class AllocationError(FleetError):
    """An allocation that ended up in a state the job did not ask for.

    Attributes:
        allocation: the allocation as last seen (a :class:`fleet.Allocation`: ``state`` is a
            name, ``"FAILED"``).
        reason: the server's reason (``allocation.reason``).
    """

    def __init__(self, message: str, allocation: "Allocation") -> None:
        super().__init__(message)
        self.allocation = allocation
        self.reason = allocation.reason


class AllocationFailed(AllocationError):
    """The allocation is FAILED: rolled back, holding no circuits; ``reason`` says why."""


class Degraded(AllocationError):
    """The allocation is DEGRADED: its circuits are kept but some link did not train.

    fleetd keeps retrying the untrained links, so this is raised only when asked for
    (``wait_ready(raise_on_degraded=True)``) or when a wait times out while DEGRADED.
    """


class Released(AllocationError):
    """The allocation was released (by the job, an operator, or its lease running out)."""


class PhaseSuperseded(AllocationError):
    """A wait for READY in a phase that is no longer the active one: another phase was
    activated (by this job or another caller) before it was READY, so it cannot end READY in
    the phase asked for. The switch to :attr:`active_phase` is fleetd's to finish.

    Attributes:
        phase: the phase the wait was for.
        active_phase: the phase active now.
    """

    def __init__(self, phase: str, allocation: "Allocation") -> None:
        active = allocation.active_phase or "''"
        super().__init__(
            f"allocation {allocation.id}: the switch to phase {phase} was superseded: phase "
            f"{active} is active now ({allocation.state})", allocation)
        self.phase = phase
        self.active_phase = allocation.active_phase
