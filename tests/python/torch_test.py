#!/usr/bin/env python3
"""clients/python/examples/ring_allreduce.py against a real `fleetd --demo`: four
torch.distributed processes (gloo, CPU) numbered in FLEET's rank order all-reduce while rank 0
switches the fabric between phases dp and tp through the client; every sum is checked by
every rank.

Run by ctest as python.torch (tests/python/CMakeLists.txt):

    python3 torch_test.py --group torch [-k PATTERN]

with PYTHONPATH holding the built package, FLEET_BIN_DIR the built binaries and
FLEET_SOURCE_DIR the source tree. Exit 77 (skipped) only when python3-torch is absent (or, as
client_test.py, the Python gRPC packages); the reason is printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import JOB_CONTEXT, SKIP, FleetTestCase  # noqa: E402


def require_torch() -> None:
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: the PyTorch example needs python3-torch ({e}); install it with "
              "deploy/quickstart/install-deps.sh")
        sys.exit(SKIP)
    if not dist.is_available() or not dist.is_gloo_available():
        print(f"SKIP: this PyTorch ({torch.__version__}) has no torch.distributed gloo backend")
        sys.exit(SKIP)


class RingAllReduceTest(FleetTestCase):
    """examples/ring_allreduce.py (python.torch)."""

    def run_example(self, *extra: str) -> subprocess.CompletedProcess:
        example = os.path.join(os.environ.get("FLEET_SOURCE_DIR", ""),
                               "clients/python/examples/ring_allreduce.py")
        env = dict(os.environ, FLEET_CONFIG=self.demo.config, FLEET_CONTEXT=JOB_CONTEXT)
        return subprocess.run([sys.executable, example, *extra], env=env, capture_output=True,
                              text=True, timeout=280)

    def test_all_reduce_in_fleet_rank_order_across_phase_switches(self) -> None:
        before = {a.id for a in self.client.allocations()}
        run = self.run_example("--iterations", "4")
        out = run.stdout + run.stderr
        self.assertEqual(run.returncode, 0, out)
        # FLEET's order alternates the servers: local rank 1 on server1 is rank 2.
        rows = re.findall(r"^(\d)\s+(gpu\d)\s+(server\d)\s+(\d)\s", run.stdout, re.M)
        self.assertEqual(rows, [("0", "gpu1", "server1", "0"), ("1", "gpu3", "server2", "0"),
                                ("2", "gpu2", "server1", "1"), ("3", "gpu4", "server2", "1")],
                         out)
        self.assertIn("rank order RING over gpu1, gpu3, gpu2, gpu4", run.stdout)
        iterations = re.findall(r"^iteration (\d) phase (\w+): all-reduce over ranks "
                                r"\[([\d, ]+)\] = (\d+) \(checked\)(.*)$", run.stdout, re.M)
        self.assertEqual([(i, p, r, s) for i, p, r, s, _ in iterations],
                         [("0", "dp", "0, 1, 2, 3", "10"), ("1", "tp", "0, 1", "6"),
                          ("2", "dp", "0, 1, 2, 3", "30"), ("3", "tp", "0, 1", "12")], out)
        # Every iteration after the first waited for a switch rank 0 had started early.
        self.assertEqual([bool(re.search(r"switch [\d.]+ ms", rest))
                          for *_, rest in iterations], [False, True, True, True], out)
        for rank in range(4):
            self.assertRegex(run.stdout, rf"rank {rank} \(gpu\d, server\d local rank \d\): 4 "
                                         "all-reduces checked")
        self.assertIn("all 4 ranks done", run.stdout)
        # The phased ring and both attaches were released.
        allocation = re.search(r"allocation (\S+) released", run.stdout)
        assert allocation is not None, out
        self.assertEqual(self.client.allocation(allocation.group(1)).state,
                         "RELEASED")
        self.assertEqual({a.id for a in self.client.allocations()}, before)

    def test_bad_arguments_are_refused_before_fleetd(self) -> None:
        run = self.run_example("--iterations", "0")
        self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
        self.assertIn("--iterations 0: must be at least 1", run.stderr)


GROUPS = {"torch": [RingAllReduceTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    require_torch()
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
