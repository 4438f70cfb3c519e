#!/usr/bin/env python3
"""Writes FLEET inventories: the shipped ones, or a generated site of many clusters.

With no arguments: deploy/inventory/fleet-gen1.yaml and fleet-2cluster.yaml.

A FLEET Gen1 cluster: one 384x384 Polatis; four servers of two CPU blades, three O-NICs
per CPU; eight pooled GPUs with one O-NIC each; two NVMe JBODs with two O-NICs each; the
top 96 port pairs (ingress 289-384, egress 673-768) reserved for trunks and WAN.
O-NIC port k's tx fiber enters ingress p and its rx fiber leaves egress p + 384, with p
counting up from 1 in file order.

With --clusters S: a site of S scale clusters on a 2-D torus of switches, written to
--output (docs/scale.md says why this shape). A scale cluster is the same 384x384 switch
with 240 of its 288 non-trunk port pairs wired (83 %): eight dual-CPU servers (three O-NICs
per CPU), 64 pooled GPUs in chassis of four (one O-NIC each) and eight single-O-NIC NVMe
JBODs, so 32 agents (one per host and per chassis). Each switch's 96 trunk port pairs are
split evenly among its distinct torus neighbours, as many fibers each way.

Run from anywhere: python3 deploy/inventory/generate.py [--clusters S --output FILE]
"""
import argparse
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_PCIE = [["0000:17:00.0", "0000:3a:00.0", "0000:5d:00.0"],
            ["0000:98:00.0", "0000:b1:00.0", "0000:ca:00.0"]]


GEN1 = {"servers": 4, "gpus": 8, "gpus_per_chassis": 8, "nvmes": 2, "nvme_onics": 2}
SCALE = {"servers": 8, "gpus": 64, "gpus_per_chassis": 4, "nvmes": 8, "nvme_onics": 1}
TRUNK_INGRESS, TRUNK_EGRESS, TRUNK_PAIRS = 289, 673, 96


def cluster(prefix, switch, cluster_name, net, mgmt_octet, shape=GEN1):
    """Returns (switch lines, host lines, device lines) for one cluster.

    `net` is the management addresses' first three octets with the dot ("192.0.2.")."""
    sw = [
        f"  - id: {switch}",
        "    model: polatis-7000-384x384",
        "    size: 384x384",
        f"    address: {net}{mgmt_octet}",
        "    protocol: tl1",
        "    port: 3082",
        f"    credentials: /etc/fleet/credentials/{switch}.yaml",
        f"    cluster: {cluster_name}",
        '    trunk_reserved: ["289-384", "673-768"]',
    ]
    hosts, devices = [], []
    next_port = [1]

    def onic(onic_id, serial, pcie):
        lines = [f"      - id: {onic_id}", f"        serial: {serial}"]
        if pcie:
            lines.append(f'        pcie: "{pcie}"')
        lines.append("        ports:")
        for _ in range(2):
            p = next_port[0]
            next_port[0] += 1
            assert p < TRUNK_INGRESS, f"{switch}: O-NIC fibers reach the trunk ports"
            lines.append(f"          - {{tx: {switch}/{p}, rx: {switch}/{p + 384}}}")
        return lines

    for s in range(1, shape["servers"] + 1):
        host = f"{prefix}server{s}"
        hosts.append(f"  - {{name: {host}, address: {net}{mgmt_octet + 10 + s}, cluster: {cluster_name}}}")
        for c in range(2):
            devices += [f"  - id: {host}-cpu{c}", "    kind: cpu", f"    host: {host}",
                        "    model: xeon-28c", "    onics:"]
            for n in range(3):
                oid = f"{prefix}s{s}c{c}-n{n}"
                devices += onic(oid, f"FLT-{oid.upper()}", CPU_PCIE[c][n])
    for g in range(1, shape["gpus"] + 1):
        dev = f"{prefix}gpu{g}"
        pool = (g - 1) // shape["gpus_per_chassis"] + 1
        devices += [f"  - id: {dev}", "    kind: gpu", f"    chassis: {prefix}gpu-pool-{pool}",
                    "    model: a100-80g", "    onics:"]
        devices += onic(f"{dev}-n0", f"FLT-{dev.upper()}-N0", "0000:01:00.0")
    for j in range(1, shape["nvmes"] + 1):
        dev = f"{prefix}nvme{j}"
        devices += [f"  - id: {dev}", "    kind: nvme", f"    chassis: {prefix}jbod-{j}",
                    "    model: nvme-jbod-24", "    onics:"]
        for n in range(shape["nvme_onics"]):
            devices += onic(f"{dev}-n{n}", f"FLT-{dev.upper()}-N{n}", f"0000:0{n + 1}:00.0")
    return sw, hosts, devices


def torus(count):
    """(rows, columns) of the squarest torus of `count` switches: 64 -> 8x8, 4 -> 2x2."""
    rows = max(r for r in range(1, math.isqrt(count) + 1) if count % r == 0)
    return rows, count // rows


def torus_trunks(switches):
    """Trunk lines joining `switches` (row-major on their torus) to their distinct neighbours.

    Each switch's 96 trunk egress and 96 trunk ingress ports are split evenly among its
    neighbours: for a pair of neighbours a < b, the same number of fibers a -> b (a's next
    trunk egress to b's next trunk ingress) and b -> a."""
    rows, cols = torus(len(switches))
    neighbours = []
    for i in range(len(switches)):
        r, c = divmod(i, cols)
        near = {((r + dr) % rows) * cols + (c + dc) % cols
                for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))}
        near.discard(i)
        neighbours.append(near)
    next_egress = [TRUNK_EGRESS] * len(switches)
    next_ingress = [TRUNK_INGRESS] * len(switches)
    lines = []
    for a in range(len(switches)):
        for b in sorted(n for n in neighbours[a] if n > a):
            fibers = TRUNK_PAIRS // max(len(neighbours[a]), len(neighbours[b]))
            for src, dst in ((a, b), (b, a)):
                for k in range(fibers):
                    lines.append(f"  - {{id: {switches[src]}-{switches[dst]}-{k + 1:02d}, "
                                 f"from: {switches[src]}/{next_egress[src]}, "
                                 f"to: {switches[dst]}/{next_ingress[dst]}}}")
                    next_egress[src] += 1
                    next_ingress[dst] += 1
    return lines


def scale_site(count):
    """The --clusters site: (header, clusters, trunks)."""
    switches = [f"ocs{i + 1:02d}" for i in range(count)]
    clusters = [cluster(f"c{i + 1:02d}-", switches[i], f"c{i + 1:02d}", f"10.0.{i + 1}.", 10, SCALE)
                for i in range(count)]
    rows, cols = torus(count)
    header = [f"# {count} FLEET scale clusters ({count * SCALE['gpus']} GPUs, "
              f"{count * (SCALE['servers'] + SCALE['gpus'] // SCALE['gpus_per_chassis'] + SCALE['nvmes'])} "
              f"agents) on a {rows}x{cols} torus of 384x384 switches.",
              f"# Generated by: deploy/inventory/generate.py --clusters {count}"]
    return header, clusters, torus_trunks(switches) if count > 1 else []


def write(path, header, site, clusters, trunks):
    lines = header + [f"site: {site}", "switches:"]
    for sw, _, _ in clusters:
        lines += sw
    lines.append("hosts:")
    for _, hosts, _ in clusters:
        lines += hosts
    lines.append("devices:")
    for _, _, devices in clusters:
        lines += devices
    if trunks:
        lines.append("trunks:")
        lines += trunks
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


GENERATED = "# Generated by deploy/inventory/generate.py; edit that script, not this file."


def write_shipped():
    write(os.path.join(HERE, "fleet-gen1.yaml"),
          ["# One FLEET Gen1 cluster: a 384x384 Polatis, four dual-CPU servers (three O-NICs",
           "# per CPU), eight pooled GPUs, two NVMe JBODs; port pairs 289-384/673-768 are kept",
           "# for trunks and WAN.", GENERATED],
          "fleet-gen1", [cluster("", "ocs1", "gen1", "192.0.2.", 10)], [])

    trunks = []
    for i in range(16):
        trunks.append(f"  - {{id: a-b-{i + 1:02d}, from: ocs-a/{673 + i}, to: ocs-b/{289 + i}}}")
    for i in range(16):
        trunks.append(f"  - {{id: b-a-{i + 1:02d}, from: ocs-b/{673 + i}, to: ocs-a/{289 + i}}}")
    write(os.path.join(HERE, "fleet-2cluster.yaml"),
          ["# Two FLEET Gen1 clusters, a and b, joined by 16 trunk fibers each way between their",
           "# switches (ocs-a egress 673-688 -> ocs-b ingress 289-304, and back).", GENERATED],
          "fleet-2cluster",
          [cluster("a-", "ocs-a", "a", "192.0.2.", 10), cluster("b-", "ocs-b", "b", "192.0.2.", 50)],
          trunks)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, help="S: write a site of S scale clusters")
    parser.add_argument("--output", help="where the --clusters site goes")
    args = parser.parse_args()
    if args.clusters is None:
        if args.output:
            parser.error("--output needs --clusters")
        write_shipped()
        return
    if not 1 <= args.clusters <= 250:
        parser.error(f"--clusters {args.clusters}: must be 1..250 (one 10.0.N.0/24 per cluster)")
    if not args.output:
        parser.error("--clusters needs --output FILE")
    header, clusters, trunks = scale_site(args.clusters)
    write(args.output, header, f"fleet-scale-{args.clusters}", clusters, trunks)


if __name__ == "__main__":
    main()
