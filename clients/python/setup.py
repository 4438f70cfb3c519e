"""Builds the fleet package with its fleet.v1 messages and gRPC stubs generated from the
repository's protos (pyproject.toml holds the metadata).

``build_py`` runs ``python3 -m grpc_tools.protoc`` (where the CMake build,
clients/python/CMakeLists.txt, runs the C++ build's protoc with grpc_python_plugin: the same
modules) on every ``fleet/v1/*.proto`` under the proto root:
``$FLEET_PROTO_DIR``, else ``../../proto`` next to this file. The generated modules go into the
build only. pip builds a local directory in place, so the build and egg-info directories
go to a scratch directory removed at exit: nothing is written to the source tree, and two
builds at once do not share one.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_root() -> str:
    """The directory holding fleet/v1/*.proto; a clear error when it does not."""
    root = os.environ.get("FLEET_PROTO_DIR") or os.path.join(HERE, "..", "..", "proto")
    root = os.path.normpath(root)
    if not glob.glob(os.path.join(root, "fleet", "v1", "*.proto")):
        where = "FLEET_PROTO_DIR" if os.environ.get("FLEET_PROTO_DIR") else "the repository"
        raise SystemExit(f"fleet-client: no fleet/v1/*.proto under {root} ({where}): build "
                         "from the FLEET repository (pip install ./clients/python) or set "
                         "FLEET_PROTO_DIR to its proto directory")
    return root


class BuildWithStubs(build_py):
    """build_py, then the fleet.v1 stubs into the build directory."""

    def run(self) -> None:
        super().run()
        root = proto_root()
        protos = sorted(os.path.relpath(p, root)
                        for p in glob.glob(os.path.join(root, "fleet", "v1", "*.proto")))
        out = os.path.abspath(self.build_lib)
        os.makedirs(os.path.join(out, "fleet", "v1"), exist_ok=True)
        command = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={root}",
                   f"--python_out={out}", f"--grpc_python_out={out}", *protos]
        self.announce(f"generating fleet.v1 stubs: {' '.join(command)}", level=2)
        try:
            subprocess.run(command, cwd=root, check=True)
        except FileNotFoundError as e:
            raise SystemExit(f"fleet-client: cannot run {sys.executable}: {e}") from e
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"fleet-client: grpc_tools.protoc failed (exit {e.returncode}); "
                             "it needs grpc_tools (Debian's python3-grpc-tools)") from e
        with open(os.path.join(out, "fleet", "v1", "__init__.py"), "w") as f:
            f.write('"""fleet.v1 messages and gRPC stubs, generated from proto/fleet/v1."""\n')


SCRATCH = tempfile.mkdtemp(prefix="fleet-client-build-")
atexit.register(shutil.rmtree, SCRATCH, True)

setup(cmdclass={"build_py": BuildWithStubs},
      options={"build": {"build_base": os.path.join(SCRATCH, "build")},
               "egg_info": {"egg_base": SCRATCH}})
