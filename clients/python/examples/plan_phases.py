#!/usr/bin/env python3
"""Plan a job's phases from its task graph's traffic, with what fleetd says of the fabric.

A runtime that plans its own communication (a Legion mapper, FlexFlow's search) knows how
many bytes each pair of its devices sends in each phase of a step. This example asks fleetd
for the fabric those devices sit on (GetFabric: their usable O-NIC ports, which pairs one
circuit could join, what a phase switch has cost lately), keeps the traffic a circuit can
carry, asks for one traffic-aware phase per phase of the graph (fleetd picks the links that
carry the most bytes directly), asks for make before break when every member has the ports
for both phases' links side by side, then runs the phases and prints each switch's latency
and what a change of circuits has cost. Against the demo::

    build/bin/fleetd --demo --grpc-port 0 --metrics-port 0   # prints fleetctl-config: FILE
    export FLEET_CONFIG=FILE FLEET_CONTEXT=demo-job            # mutual TLS as job/team-a
    PYTHONPATH=build/clients/python /usr/bin/python3 clients/python/examples/plan_phases.py

The task graph is a JSON file (``--task-graph``) or, by default, a step of an 8-GPU model,
tensor parallel in pairs and data parallel across them::

    {"devices": ["gpu1", ...],
     "phases": {"tp": [["gpu1", "gpu2", 4e9], ...], "dp": [["gpu1", "gpu3", 1e9], ...]}}

each entry bytes a step sends from the first device to the second.

Exit status: 0 done, 1 fleetd refused or failed (its message is printed), 2 a task graph no
circuit can carry any of.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Mapping, Tuple

import fleet

Matrix = Dict[Tuple[str, str], float]


def default_graph() -> Tuple[List[str], Dict[str, Matrix]]:
    """Eight GPUs: tensor parallel within pairs (gpu1-gpu2, ...), then a data-parallel ring
    over the pairs' first and second GPUs."""
    gpus = [f"gpu{i}" for i in range(1, 9)]
    tp: Matrix = {}
    for i in range(0, 8, 2):
        tp[(gpus[i], gpus[i + 1])] = tp[(gpus[i + 1], gpus[i])] = 4e9
    dp: Matrix = {}
    for half in (gpus[0::2], gpus[1::2]):
        for i, gpu in enumerate(half):
            dp[(gpu, half[(i + 1) % len(half)])] = 1e9
    return gpus, {"tp": tp, "dp": dp}


def load_graph(path: str) -> Tuple[List[str], Dict[str, Matrix]]:
    with open(path, encoding="utf-8") as f:
        graph = json.load(f)
    phases = {name: {(a, b): float(sent) for a, b, sent in entries}
              for name, entries in graph["phases"].items()}
    return list(graph["devices"]), phases


def carried(fabric: fleet.Fabric, name: str, matrix: Mapping[Tuple[str, str], float]) -> Matrix:
    """The part of `matrix` one circuit could carry (both directions joinable: traffic-aware
    links are duplex); prints what is left to other paths."""
    kept: Matrix = {}
    for (a, b), sent in matrix.items():
        if fabric.joinable(a, b) and fabric.joinable(b, a):
            kept[(a, b)] = sent
        else:
            why = fabric.why_not(a, b) or fabric.why_not(b, a)
            print(f"phase {name}: {a} -> {b} ({sent:.3g} bytes) has no circuit: {why}")
    total = sum(matrix.values())
    if total > 0:
        hops = sorted({fabric.hops(a, b) for a, b in kept})
        print(f"phase {name}: {sum(kept.values()) / total:.0%} of {total:.3g} bytes between "
              f"pairs a circuit can join (trunk hops {hops})")
    return kept


def degrees(matrix: Mapping[Tuple[str, str], float]) -> Dict[str, int]:
    """The ports each device needs to give every pair with traffic its own duplex link."""
    partners: Dict[str, set] = {}
    for a, b in matrix:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    return {device: len(p) for device, p in partners.items()}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None,
                        help="fleetd's gRPC address HOST:PORT (default $FLEET_SERVER, else the "
                             "config context's); credentials as fleetctl's")
    parser.add_argument("--tenant", default="team-a")
    parser.add_argument("--task-graph", default=None, help="JSON file (default: built in)")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args(argv)
    devices, graph = load_graph(args.task_graph) if args.task_graph else default_graph()

    client = fleet.Client(args.server, tenant=args.tenant)
    try:
        fabric = client.fabric(devices)
        print(fabric)
        for device in devices:
            ports = fabric.devices[device].ports
            print(f"{device}: {fabric.degree(device)} of {len(ports)} ports usable, on switch "
                  f"{', '.join(sorted({p.switch_id for p in ports}))}")
        # A device with no usable port can carry nothing: it is left out of the request.
        members = [d for d in devices if fabric.degree(d) > 0]
        kept_by_phase = {}
        for name, matrix in graph.items():
            kept = carried(fabric, name, {pair: sent for pair, sent in matrix.items()
                                          if pair[0] in members and pair[1] in members})
            if kept:
                kept_by_phase[name] = kept
        if not kept_by_phase:
            print("no phase has traffic a circuit can carry", file=sys.stderr)
            return 2
        phases = {name: fleet.traffic(members, kept) for name, kept in kept_by_phase.items()}
        # Make before break holds each phase's ports at once: ask for it when, for every
        # member, the two phases' links fit its usable ports side by side.
        need = [degrees(kept) for kept in kept_by_phase.values()]
        prepare = len(phases) == 2 and all(
            need[0].get(d, 0) + need[1].get(d, 0) <= fabric.degree(d) for d in members)
        predicted = fabric.change_seconds()
        print(f"make before break: {'asked' if prepare else 'no'}; a change of circuits has "
              f"cost {'(not measured yet)' if predicted is None else f'{predicted * 1e3:.0f} ms'}")

        with client.topology(phases=phases, prepare_next_phase=prepare, lease=60,
                             name="planned-phases") as topo:
            a = topo.wait_ready(timeout=120)
            # A phase is prepared when its circuits are on the switch while it is not active.
            waiting = [c for c in a.circuits if c.phase != a.active_phase]
            prepared = bool(waiting) and all(c.state != "INACTIVE" for c in waiting)
            print(f"allocation {topo.id} READY in phase {topo.active_phase}"
                  f"{', the other prepared' if prepared else ''}")
            order = list(phases)
            for step in range(args.steps):
                for name in order[1:] + order[:1]:
                    switch = topo.phase(name, timeout=120)
                    print(f"step {step}: phase {name} latency {switch.latency * 1e3:.1f} ms")
            measured = topo.fabric().change_seconds()
            if measured is not None:
                print(f"a change of circuits costs {measured * 1e3:.0f} ms now (median)")
        print(f"allocation {topo.id} released")
    except fleet.FleetError as e:
        print(f"fleetd: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
