#!/usr/bin/env python3
"""All-reduce with PyTorch in FLEET's rank order, switching the fabric's phase between
iterations.

The launcher requests a phased topology over four GPUs — ``dp``, a unidirectional ring
gpu1 → gpu3 → gpu2 → gpu4, and ``tp``, a duplex link per pair (gpu1, gpu3) and (gpu2, gpu4)
— after attaching gpu1 and gpu2 to server1 and gpu3 and gpu4 to server2, so the ring's rank
order alternates between the two servers. It reads the rank order (``topo.ranks("dp")``) and
starts one process per rank the way torchrun would on each server — the environment of local
rank L on host H is ``ranks.torch_env(H, L)`` — here all on this machine, since the demo's
servers are emulated. The four processes join a torch.distributed gloo group (CPU) numbered
in FLEET's order; rank 0 drives the phases through the client: at the end of each iteration
it starts the switch to the next phase (``start_phase``), overlapping it with the next
iteration's compute, and waits for READY before the collective. ``dp`` iterations all-reduce
over the four ranks, ``tp`` iterations within each pair the ``tp`` circuits join; every rank
checks every result. Against the demo::

    build/bin/fleetd --demo --grpc-port 0 --metrics-port 0   # prints fleetctl-config: FILE
    export FLEET_CONFIG=FILE FLEET_CONTEXT=demo-job            # mutual TLS as job/team-a
    PYTHONPATH=build/clients/python /usr/bin/python3 clients/python/examples/ring_allreduce.py

Needs Debian's python3-torch (1.13, CPU). Exit status: 0 done, 1 fleetd refused or a rank
failed or computed a wrong sum (the message says which), 2 bad arguments or no PyTorch.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from typing import Dict, List, Sequence

import fleet
from fleet.v1 import topology_pb2

RING = ["gpu1", "gpu3", "gpu2", "gpu4"]          # dp: the light goes round in this order
PAIRS = [("gpu1", "gpu3"), ("gpu2", "gpu4")]      # tp: a duplex link per pair
ATTACH = {"server1": ["gpu1", "gpu2"], "server2": ["gpu3", "gpu4"]}
PHASES = ["dp", "tp"]                             # iteration i runs in PHASES[i % 2]
WORKER = "--worker"


def phase_of(iteration: int) -> str:
    return PHASES[iteration % len(PHASES)]


# --- the launcher ---

def free_port() -> int:
    """A TCP port free now on loopback, for rank 0's rendezvous store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attach(client: fleet.Client, host: str, devices: Sequence[str],
           lease: float) -> fleet.Topology:
    spec = topology_pb2.TopologySpec(attach=topology_pb2.AttachSpec(
        host=host, devices=topology_pb2.MemberSet(devices=list(devices))))
    topo = client.topology(spec, lease=lease, name=f"ring-allreduce-attach-{host}")
    try:
        topo.wait_ready(timeout=120)
    except BaseException:
        topo.release()
        raise
    return topo


def launch(args: argparse.Namespace) -> int:
    with fleet.Client(args.server, tenant=args.tenant) as client:
        attached: List[fleet.Topology] = []
        try:
            if not args.no_attach:
                for host, devices in ATTACH.items():
                    attached.append(attach(client, host, devices, args.lease))
            phases = {"dp": fleet.ring(RING, bidirectional=False),
                      "tp": fleet.links(PAIRS, duplex=True)}
            with client.topology(phases=phases, lease=args.lease,
                                 name="ring-allreduce-example") as topo:
                a = topo.wait_ready(timeout=120)
                print(f"allocation {topo.id} READY in phase {a.active_phase}: "
                      f"{len(a.circuits)} circuits", flush=True)
                ranks = topo.ranks("dp")
                print(f"rank order {ranks.order} over {', '.join(ranks.devices)}:", flush=True)
                print(ranks.table(), end="", flush=True)
                status = run_workers(args, ranks)
            print(f"allocation {topo.id} released", flush=True)
            return status
        finally:
            for t in attached:
                t.release()


def run_workers(args: argparse.Namespace, ranks: fleet.Ranks) -> int:
    """Starts a process per (host, local rank) with the environment torchrun would give it,
    from FLEET's rank order, and waits for them all."""
    port = free_port()
    procs: Dict[int, subprocess.Popen] = {}
    for host in ranks.hosts:
        for local_rank in range(host.local_world_size):
            env = dict(os.environ)
            # Every process runs here, so the store is on loopback whatever the host.
            env.update(ranks.torch_env(host.host, local_rank, master_addr="127.0.0.1",
                                       master_port=port))
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            env["OMP_NUM_THREADS"] = "1"  # Four processes share the cores.
            argv = [sys.executable, os.path.abspath(__file__), WORKER,
                    "--iterations", str(args.iterations), "--size", str(args.size)]
            if args.server:
                argv += ["--server", args.server]
            procs[int(env["RANK"])] = subprocess.Popen(argv, env=env)
    deadline = time.monotonic() + args.timeout
    failed = []
    try:
        for rank, proc in sorted(procs.items()):
            left = max(0.0, deadline - time.monotonic())
            try:
                code = proc.wait(left)
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                failed.append(f"rank {rank}: " + (f"exit {code}" if code is not None
                                                  else f"still running after {args.timeout:g}s"))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if failed:
        print(f"ring_allreduce: {'; '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(procs)} ranks done: every all-reduce checked", flush=True)
    return 0


# --- a rank ---

def pair_groups(ranks: fleet.Ranks) -> List[List[int]]:
    """The ranks (FLEET's dp order) each tp link joins: the groups tp all-reduces within."""
    return sorted(sorted(ranks.rank_of(d).rank for d in pair) for pair in PAIRS)


def worker(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = os.environ["FLEET_DEVICE"]
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=60))
    client = fleet.Client(args.server)
    try:
        # The launcher holds the allocation and its lease; this is a handle on it.
        topo = client.open(os.environ["FLEET_ALLOCATION"])
        ranks = topo.ranks("dp")
        if ranks.devices[rank] != device:
            raise RuntimeError(f"rank {rank}: FLEET's order has {ranks.devices[rank]} at this "
                               f"rank, the launcher gave {device}")
        # The ring in rank order: what rank r sends reaches rank r+1, whose device FLEET's
        # dp circuits feed from r's.
        mine = torch.tensor([rank], dtype=torch.int64)
        got = torch.zeros(1, dtype=torch.int64)
        send = dist.isend(mine, (rank + 1) % world)
        dist.recv(got, (rank - 1) % world)
        send.wait()
        if int(got) != (rank - 1) % world:
            raise RuntimeError(f"rank {rank}: the ring delivered rank {int(got)}'s tensor, "
                               f"expected rank {(rank - 1) % world}'s")
        groups = pair_groups(ranks)
        # Every rank makes every group, in the same order (torch.distributed's rule).
        handles = {tuple(g): dist.new_group(g) for g in groups}
        my_pair = next(g for g in groups if rank in g)

        pending = None
        for it in range(args.iterations):
            phase = phase_of(it)
            # Compute; meanwhile the switch rank 0 started (if any) goes on.
            x = torch.randn(args.size, args.size)
            (x @ x).sum()
            if rank == 0:
                switch = pending.result(120) if pending is not None else None
                if switch is None and topo.refresh().active_phase != phase:
                    switch = topo.phase(phase, timeout=120)
                note = (f", switch {switch.latency * 1e3:.1f} ms to READY"
                        if switch is not None else "")
            dist.barrier()  # Rank 0 saw READY in `phase`: its circuits carry the collective.
            value = float((rank + 1) * (it + 1))
            t = torch.full((args.size,), value)
            if phase == "dp":
                members = list(range(world))
                dist.all_reduce(t, op=dist.ReduceOp.SUM)
            else:
                members = my_pair
                dist.all_reduce(t, op=dist.ReduceOp.SUM, group=handles[tuple(my_pair)])
            expected = float(sum((r + 1) * (it + 1) for r in members))
            if not torch.equal(t, torch.full((args.size,), expected)):
                raise RuntimeError(f"rank {rank} iteration {it} phase {phase}: all-reduce over "
                                   f"ranks {members} gave {t[0].item()}, expected {expected}")
            if rank == 0:
                print(f"iteration {it} phase {phase}: all-reduce over ranks {members} = "
                      f"{expected:g} (checked){note}", flush=True)
                if it + 1 < args.iterations and phase_of(it + 1) != phase:
                    pending = topo.start_phase(phase_of(it + 1), timeout=120)
                else:
                    pending = None
            dist.barrier()  # Nobody computes on the old phase's collective after the switch.
        if pending is not None:
            pending.result(120)
        print(f"rank {rank} ({device}, {os.environ.get('FLEET_HOST') or 'no host'} local rank "
              f"{os.environ['LOCAL_RANK']}): {args.iterations} all-reduces checked", flush=True)
        return 0
    finally:
        client.close()
        dist.destroy_process_group()


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None,
                        help="fleetd's gRPC address HOST:PORT (default $FLEET_SERVER, else the "
                             "config context's); credentials as fleetctl's (FLEET_CONFIG, "
                             "FLEET_CONTEXT, FLEET_CA/CERT/KEY)")
    parser.add_argument("--tenant", default="team-a")
    parser.add_argument("--iterations", type=int, default=4,
                        help="iterations, alternating phases dp and tp (default 4)")
    parser.add_argument("--size", type=int, default=64, help="tensor side (default 64)")
    parser.add_argument("--lease", type=float, default=60, help="lease in seconds")
    parser.add_argument("--timeout", type=float, default=240,
                        help="seconds the ranks may take in all (default 240)")
    parser.add_argument("--no-attach", action="store_true",
                        help="do not attach the GPUs to servers: every rank has no host")
    parser.add_argument(WORKER, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error(f"--iterations {args.iterations}: must be at least 1")
    if args.size < 1:
        parser.error(f"--size {args.size}: must be at least 1")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"ring_allreduce: needs PyTorch, Debian's python3-torch ({e})", file=sys.stderr)
        return 2
    try:
        return worker(args) if args.worker else launch(args)
    except (fleet.FleetError, fleet.CredentialsError) as e:
        print(f"ring_allreduce: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        print(f"ring_allreduce: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
