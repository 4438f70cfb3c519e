#!/usr/bin/env python3
"""A mock training loop on a phased FLEET topology.

Each step runs a tensor-parallel part on GPU pairs (phase ``tp``: a duplex link per pair)
and then a data-parallel all-reduce over a ring of all the GPUs (phase ``dp``: a
bidirectional ring); the fabric is switched between the two phases every step, and the
switch's latency is printed. Against the demo::

    build/bin/fleetd --demo --grpc-port 0 --metrics-port 0   # prints fleetctl-config: FILE
    export FLEET_CONFIG=FILE FLEET_CONTEXT=demo-job            # mutual TLS as job/team-a
    PYTHONPATH=build/clients/python /usr/bin/python3 clients/python/examples/train_step.py

Exit status: 0 done, 1 fleetd refused or failed (its message is printed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import List

import fleet


def mock_compute(seconds: float) -> None:
    """Stands in for a forward/backward pass or an all-reduce."""
    time.sleep(seconds)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None,
                        help="fleetd's gRPC address HOST:PORT (default $FLEET_SERVER, else the "
                             "config context's); credentials as fleetctl's (FLEET_CONFIG, "
                             "FLEET_CONTEXT, FLEET_CA/CERT/KEY)")
    parser.add_argument("--tenant", default="team-a")
    parser.add_argument("--gpus", type=int, default=8, help="use gpu1..gpuN (even, default 8)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lease", type=float, default=60, help="lease in seconds")
    parser.add_argument("--compute-ms", type=float, default=20,
                        help="mock compute time per phase, in milliseconds")
    args = parser.parse_args(argv)
    if args.gpus < 2 or args.gpus % 2:
        parser.error("--gpus must be even and at least 2")

    gpus = [f"gpu{i}" for i in range(1, args.gpus + 1)]
    phases = {
        "dp": fleet.ring(gpus),
        "tp": fleet.links([(gpus[i], gpus[i + 1]) for i in range(0, len(gpus), 2)], duplex=True),
    }
    latencies: List[float] = []
    try:
        with fleet.Client(args.server) as client:
            with client.topology(phases=phases, lease=args.lease, tenant=args.tenant,
                                 name="train-step-example") as topo:
                a = topo.wait_ready(timeout=120)
                print(f"allocation {topo.id} READY in phase {a.active_phase}: "
                      f"{len(a.circuits)} circuits over {', '.join(a.members)}")
                for step in range(1, args.steps + 1):
                    for name in ("tp", "dp"):
                        switch = topo.phase(name, timeout=120)
                        latencies.append(switch.latency)
                        on_switch = (f"{switch.switch_seconds * 1e3:.1f} ms on the switch"
                                     if switch.switch_seconds is not None else "switch time n/a")
                        print(f"step {step} phase {name}: latency {switch.latency * 1e3:.1f} ms "
                              f"({on_switch}, +{switch.cross_connects_added}"
                              f"/-{switch.cross_connects_removed} cross-connects)")
                        mock_compute(args.compute_ms / 1e3)
            print(f"allocation {topo.id} released")
    except (fleet.FleetError, fleet.CredentialsError) as e:
        print(f"train_step: {e}", file=sys.stderr)
        return 1
    if latencies:
        print(f"phase switches: {len(latencies)}, median {statistics.median(latencies) * 1e3:.1f} ms, "
              f"max {max(latencies) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
