#!/usr/bin/env python3
"""clients/python as a pip package: installed offline (``pip install --no-build-isolation
--no-index``) into a fresh venv made with ``--system-site-packages`` (gRPC and protobuf come
from Debian), then imported from there — not from the build tree — and used against a real
`fleetd --demo`: stubs generated at install time, type hints, errors mapped.

Run by ctest as python.package (tests/python/CMakeLists.txt):

    python3 package_test.py --group package [-k PATTERN]

with FLEET_BIN_DIR the built binaries and FLEET_SOURCE_DIR the source tree. Exit 77
(skipped) only when python3-pip, python3-setuptools or the Python gRPC packages are absent;
the reason is printed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import GPUS, JOB_CONTEXT, SKIP, TENANT, WAIT, FleetTestCase  # noqa: E402

SOURCE = os.path.join(os.environ.get("FLEET_SOURCE_DIR", ""), "clients", "python")

# Runs inside the venv, with the build tree off sys.path: prints what the test checks.
USE_IT = textwrap.dedent('''
    import asyncio, os, sys
    import fleet, fleet.aio
    from fleet.v1 import topology_pb2
    where = os.path.dirname(fleet.__file__)
    print("fleet from", where)
    print("py.typed", os.path.exists(os.path.join(where, "py.typed")))
    print("stubs", sorted(f for f in os.listdir(os.path.join(where, "v1")) if f.endswith(".py")))
    server, config, context, tenant, wait = sys.argv[1:6]
    wait = float(wait)
    with fleet.Client(server, tenant=tenant, config=config, context=context) as client:
        try:
            client.allocation("a-no-such")
        except fleet.NotFound as e:
            print("mapped", type(e).__name__, e.code.name)
        try:
            client.topology(ring=["gpu1", "gpu2"], lease=60, on_failure={"within": "25h"})
        except ValueError as e:
            print("refused before any RPC:", e)
        with client.topology(ring=sys.argv[6:], bidirectional=False, lease=60) as topo:
            topo.wait_ready(timeout=wait)
            print("ready", topo.id, topo.state, len(topo.circuits))
            print("ranks", topo.ranks().order, " ".join(topo.ranks().devices))

    async def use_aio():
        async with fleet.aio.Client(server, tenant=tenant, config=config,
                                    context=context) as client:
            return len(await client.allocations())

    print("aio allocations", asyncio.run(use_aio()))
''')


def require_tools() -> None:
    # Looked up, not imported: pip and setuptools imported into one process fight over
    # distutils.
    for module, package in (("pip", "python3-pip"), ("setuptools", "python3-setuptools"),
                            ("venv", "python3-venv")):
        if importlib.util.find_spec(module) is None:
            print(f"SKIP: installing the client with pip needs {package} (no module {module}); "
                  "install it with deploy/quickstart/install-deps.sh")
            sys.exit(SKIP)


class PackageTest(FleetTestCase):
    """pip install ./clients/python into a venv, then use it (python.package)."""

    def setUp(self) -> None:
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="fleet-package-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def venv_python(self) -> str:
        venv = os.path.join(self.dir, "venv")
        # Debian's pip from the system site-packages installs into the venv: no ensurepip.
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                        venv], check=True, capture_output=True, timeout=120)
        return os.path.join(venv, "bin", "python")

    def test_installs_offline_and_works_from_the_venv(self) -> None:
        python = self.venv_python()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
        env["PIP_NO_CACHE_DIR"] = "1"
        before = set(os.listdir(SOURCE))
        install = subprocess.run(
            [python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
             "--disable-pip-version-check", SOURCE],
            env=env, cwd=self.dir, capture_output=True, text=True, timeout=240)
        self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
        self.assertIn("Successfully installed fleet-client-0.1.0", install.stdout)
        # The build ran in a scratch directory: the source tree holds nothing new.
        self.assertEqual(set(os.listdir(SOURCE)), before)

        use = subprocess.run(
            [python, "-c", USE_IT, self.demo.grpc, self.demo.config, JOB_CONTEXT, TENANT,
             str(WAIT), *GPUS[:4]],
            env=env, cwd=self.dir, capture_output=True, text=True, timeout=240)
        out = use.stdout + use.stderr
        self.assertEqual(use.returncode, 0, out)
        site = os.path.join(self.dir, "venv", "lib")
        self.assertRegex(use.stdout, rf"fleet from {site}/python3\.\d+/site-packages/fleet\n")
        self.assertIn("py.typed True", use.stdout)
        for stub in ("topology_pb2.py", "topology_pb2_grpc.py", "admin_pb2_grpc.py",
                     "inventory_pb2.py", "common_pb2.py"):
            self.assertIn(f"'{stub}'", use.stdout)
        self.assertIn("mapped NotFound NOT_FOUND", use.stdout)
        self.assertIn("refused before any RPC: on_failure.within: '25h' is not a duration from "
                      "1ms to 24h", use.stdout)
        self.assertRegex(use.stdout, r"ready \S+ READY 4\n")
        self.assertIn("ranks RING gpu1 gpu2 gpu3 gpu4", use.stdout)
        self.assertRegex(use.stdout, r"aio allocations \d+\n")

    def test_a_missing_proto_root_is_named(self) -> None:
        python = self.venv_python()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["FLEET_PROTO_DIR"] = os.path.join(self.dir, "no-protos")
        install = subprocess.run(
            [python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
             "--disable-pip-version-check", SOURCE],
            env=env, cwd=self.dir, capture_output=True, text=True, timeout=240)
        self.assertNotEqual(install.returncode, 0)
        self.assertIn(f"no fleet/v1/*.proto under {env['FLEET_PROTO_DIR']} (FLEET_PROTO_DIR)",
                      install.stdout + install.stderr)


GROUPS = {"package": [PackageTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    require_tools()
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
