#!/usr/bin/env python3
"""Rank order from Python: fleet.Ranks (the torchrun environment, a hostfile, NCCL_RINGS
text) on GetRanks answers made here, and Topology.ranks() (blocking and asyncio) against a
real `fleetd --demo`, with GPUs attached to two servers so FLEET's order interleaves hosts.

Run by ctest as python.ranks (tests/python/CMakeLists.txt):

    python3 ranks_test.py --group ranks [-k PATTERN]

with PYTHONPATH holding the built package and FLEET_BIN_DIR the built binaries, as
client_test.py. Exit 77 only when python3-grpcio or python3-protobuf is absent.
"""

from __future__ import annotations

import asyncio
import os
import sys
import unittest
from typing import Any, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import JOB_CONTEXT, TENANT, WAIT, FleetTestCase  # noqa: E402

# The demo's ring in the example's order: gpu1 and gpu2 attached to server1, gpu3 and gpu4
# to server2, so ring order gpu1 → gpu3 → gpu2 → gpu4 alternates between the servers.
RING = ["gpu1", "gpu3", "gpu2", "gpu4"]
ATTACH = {"server1": ["gpu1", "gpu2"], "server2": ["gpu3", "gpu4"]}


def response(ranks: List[tuple], hosts: List[tuple], order: Optional[int] = None) -> Any:
    """A GetRanksResponse: ranks as (device, host, local_rank), hosts as (host, ranks)."""
    from fleet.v1 import topology_pb2
    r = topology_pb2.GetRanksResponse(
        allocation_id="a7", order=topology_pb2.RANK_ORDER_RING if order is None else order)
    for i, (device, host, local) in enumerate(ranks):
        r.ranks.add(rank=i, device=device, member_index=i, host=host, local_rank=local,
                    pcie_address=f"0000:0{i}:00.0" if host else "")
    for node, (host, rs) in enumerate(hosts):
        r.hosts.add(host=host, node_rank=node, ranks=rs)
    return r


INTERLEAVED = ([("gpu1", "server1", 0), ("gpu3", "server2", 0), ("gpu2", "server1", 1),
                ("gpu4", "server2", 1)],
               [("server1", [0, 2]), ("server2", [1, 3])])


class RanksUnitTest(unittest.TestCase):
    """fleet.Ranks alone, on answers made here (python.ranks)."""

    def setUp(self) -> None:
        import fleet
        self.fleet = fleet
        self.ranks = fleet.Ranks.of(response(*INTERLEAVED))

    def test_reading(self) -> None:
        r = self.ranks
        self.assertEqual((r.allocation_id, r.order, r.world_size, len(r)), ("a7", "RING", 4, 4))
        self.assertEqual(r.devices, ("gpu1", "gpu3", "gpu2", "gpu4"))
        self.assertEqual(r[2], self.fleet.Rank(rank=2, device="gpu2", member_index=2,
                                               host="server1", pcie_address="0000:02:00.0",
                                               coordinates=(), local_rank=1))
        self.assertEqual(r.rank_of("gpu4").rank, 3)
        self.assertEqual(r.host("server2"), self.fleet.RankHost("server2", 1, (1, 3)))
        self.assertEqual(r.host("server2").local_world_size, 2)
        self.assertEqual([x.rank for x in r], [0, 1, 2, 3])
        self.assertIn("2     gpu2    server1  1      0000:02:00.0", r.table())

    def test_torch_env_maps_local_ranks_through_the_hosts_ranks(self) -> None:
        env = self.ranks.torch_env("server1", 1, master_port=29500)
        # Rank 2, not node_rank * nproc + local_rank = 1: the hosts interleave.
        self.assertEqual(env["RANK"], "2")
        self.assertEqual({k: env[k] for k in ("WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                              "GROUP_RANK", "NODE_RANK", "GROUP_WORLD_SIZE",
                                              "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR",
                                              "MASTER_PORT")},
                         {"WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                          "GROUP_RANK": "0", "NODE_RANK": "0", "GROUP_WORLD_SIZE": "2",
                          "ROLE_RANK": "2", "ROLE_WORLD_SIZE": "4", "MASTER_ADDR": "server1",
                          "MASTER_PORT": "29500"})
        self.assertEqual((env["FLEET_ALLOCATION"], env["FLEET_HOST"], env["FLEET_DEVICE"],
                          env["FLEET_PCIE_ADDRESS"]), ("a7", "server1", "gpu2", "0000:02:00.0"))
        env = self.ranks.torch_env("server2", 0, master_addr="10.0.0.1")
        self.assertEqual((env["RANK"], env["GROUP_RANK"], env["MASTER_ADDR"]),
                         ("1", "1", "10.0.0.1"))
        self.assertNotIn("MASTER_PORT", env)
        every = sorted(int(self.ranks.torch_env(h.host, i)["RANK"])
                       for h in self.ranks.hosts for i in range(h.local_world_size))
        self.assertEqual(every, [0, 1, 2, 3])

    def test_bad_arguments_name_the_field_the_value_and_the_rule(self) -> None:
        with self.assertRaises(ValueError) as caught:
            self.ranks.torch_env("server9", 0)
        self.assertEqual(str(caught.exception), "host 'server9' runs no rank of allocation a7; "
                                                "hosts: 'server1', 'server2'")
        with self.assertRaises(ValueError) as caught:
            self.ranks.torch_env("server1", 2)
        self.assertEqual(str(caught.exception), "local_rank 2 is out of range for host "
                                                "'server1': it runs 2 rank(s), local ranks 0..1")
        with self.assertRaises(TypeError) as caught:
            self.ranks.torch_env("server1", True)
        self.assertIn("local_rank True: expected an integer", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            self.ranks.torch_env("server1", 0, master_port=70000)
        self.assertIn("master_port 70000: must be from 1 to 65535", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            self.ranks.rank_of("gpu9")
        self.assertIn("device 'gpu9' is not a member of allocation a7; members in rank order: "
                      "gpu1, gpu3, gpu2, gpu4", str(caught.exception))

    def test_hostfile_in_node_rank_order(self) -> None:
        self.assertEqual(self.ranks.hostfile(), "server1 slots=2\nserver2 slots=2\n")
        pooled = self.fleet.Ranks.of(response(
            [("gpu1", "", 0), ("gpu2", "", 1)], [("", [0, 1])]))
        with self.assertRaises(ValueError) as caught:
            pooled.hostfile()
        self.assertIn("ranks 0, 1 of allocation a7 have no host", str(caught.exception))
        self.assertEqual(pooled.hostfile(no_host="localhost"), "localhost slots=2\n")
        self.assertNotIn("MASTER_ADDR", pooled.torch_env("", 1))

    def test_nccl_rings(self) -> None:
        self.assertEqual(self.ranks.nccl_rings(), "0 1 2 3")
        self.assertEqual(self.ranks.nccl_rings(reverse=True), "0 1 2 3|3 2 1 0")
        # A job that keeps its own numbering (gpuN is its rank N-1) gets the ring in it.
        own = {f"gpu{i}": i - 1 for i in range(1, 5)}
        self.assertEqual(self.ranks.nccl_rings(own), "0 2 1 3")
        with self.assertRaises(ValueError) as caught:
            self.ranks.nccl_rings({"gpu1": 0})
        self.assertIn("rank_of has no rank for gpu3, gpu2, gpu4", str(caught.exception))
        from fleet.v1 import topology_pb2
        chain = self.fleet.Ranks.of(response(*INTERLEAVED, order=topology_pb2.RANK_ORDER_CHAIN))
        with self.assertRaises(ValueError) as caught:
            chain.nccl_rings()
        self.assertIn("is ordered CHAIN, not RING", str(caught.exception))

    def test_a_malformed_answer_is_refused(self) -> None:
        ranks, hosts = INTERLEAVED
        with self.assertRaises(ValueError) as caught:
            self.fleet.Ranks.of(response(ranks, [("server1", [0, 2]), ("server2", [1])]))
        self.assertIn("not each of ranks 0..3 once", str(caught.exception))


class RanksTest(FleetTestCase):
    """Topology.ranks() against the demo (python.ranks)."""

    def attach(self) -> list:
        """Attaches the ring's GPUs to two servers for the test's length (one port each; the
        ring and its phases use the other); their Topologies."""
        from fleet.v1 import topology_pb2
        attached = []
        for host, devices in ATTACH.items():
            topo = self.client.topology(topology_pb2.TopologySpec(attach=topology_pb2.AttachSpec(
                host=host, devices=topology_pb2.MemberSet(devices=devices))), lease=60)
            self.addCleanup(topo.release)
            topo.wait_ready(timeout=WAIT)
            attached.append(topo)
        return attached

    def test_an_attach_ranks_the_attached_devices_not_the_hosts_cpus(self) -> None:
        server1 = self.attach()[0]
        # Its members hold server1's CPU whose O-NIC ports the GPUs land on; no rank runs there.
        self.assertGreater(len(server1.members), 2, server1.members)
        ranks = server1.ranks()
        self.assertEqual((ranks.order, ranks.devices), ("MEMBERS", ("gpu1", "gpu2")))
        self.assertEqual([(h.host, h.ranks) for h in ranks.hosts], [("server1", (0, 1))])
        self.assertTrue(all(r.pcie_address for r in ranks), ranks.table())
        self.assertEqual(ranks.hostfile(), "server1 slots=2\n")
        env = ranks.torch_env("server1", 1)
        self.assertEqual((env["RANK"], env["WORLD_SIZE"], env["FLEET_DEVICE"]), ("1", "2", "gpu2"))

    def test_ring_order_with_interleaved_hosts(self) -> None:
        self.attach()
        phases = {"dp": self.fleet.ring(RING, bidirectional=False),
                  "tp": self.fleet.links([("gpu1", "gpu3"), ("gpu2", "gpu4")], duplex=True)}
        with self.client.topology(phases=phases, lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            ranks = topo.ranks()
            self.assertIsInstance(ranks, self.fleet.Ranks)
            self.assertEqual((ranks.allocation_id, ranks.phase, ranks.order),
                             (topo.id, "dp", "RING"))
            self.assertEqual(ranks.devices, tuple(RING))
            self.assertEqual([(r.host, r.local_rank) for r in ranks],
                             [("server1", 0), ("server2", 0), ("server1", 1), ("server2", 1)])
            self.assertEqual([(h.host, h.node_rank, h.ranks) for h in ranks.hosts],
                             [("server1", 0, (0, 2)), ("server2", 1, (1, 3))])
            for r in ranks:
                self.assertTrue(r.pcie_address, r)  # Attached: the host sees it on PCIe.
            self.assertEqual(ranks.hostfile(), "server1 slots=2\nserver2 slots=2\n")
            self.assertEqual(ranks.torch_env("server2", 1)["RANK"], "3")
            # Rank r+1 is where rank r's light goes.
            circuits = {(c.source.onic.split("-")[0], c.destination.onic.split("-")[0])
                        for c in topo.allocation.circuits if c.phase == "dp"}
            for r in range(4):
                self.assertIn((ranks.devices[r], ranks.devices[(r + 1) % 4]), circuits)
            # Another phase's order, by name; the active one is untouched.
            tp = topo.ranks("tp")
            self.assertEqual(tp.phase, "tp")
            self.assertEqual(sorted(tp.devices), sorted(RING))
            self.assertEqual(topo.active_phase, "dp")
            with self.assertRaises(self.fleet.NotFound) as caught:
                topo.ranks("no-such-phase")
            self.assertIn("no-such-phase", caught.exception.message)
            with self.assertRaises(ValueError):
                topo.ranks("")

    def test_pooled_ring_has_no_hosts(self) -> None:
        with self.client.topology(ring=["gpu5", "gpu6", "gpu7", "gpu8"], lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            ranks = topo.ranks()
            self.assertEqual((ranks.order, ranks.phase), ("RING", ""))
            self.assertEqual(sorted(ranks.devices), ["gpu5", "gpu6", "gpu7", "gpu8"])
            self.assertEqual(ranks.devices[0], "gpu5")  # Rank 0 is member 0.
            self.assertEqual([(h.host, h.ranks) for h in ranks.hosts], [("", (0, 1, 2, 3))])
            with self.assertRaises(ValueError):
                ranks.hostfile()
            self.assertEqual(ranks.hostfile(no_host="localhost"), "localhost slots=4\n")

    def test_the_asyncio_client_reads_the_same_order(self) -> None:
        self.attach()
        with self.client.topology(ring=RING, bidirectional=False, lease=60) as topo:
            topo.wait_ready(timeout=WAIT)
            expected = topo.ranks()

            async def read() -> Any:
                import fleet.aio
                async with fleet.aio.Client(self.demo.grpc, tenant=TENANT,
                                            config=self.demo.config,
                                            context=JOB_CONTEXT) as client:
                    opened = await client.open(topo.id)
                    return await opened.ranks()

            got = asyncio.run(read())
            self.assertEqual(got, expected)
            self.assertEqual(got.response, expected.response)


GROUPS = {"ranks": [RanksUnitTest, RanksTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
