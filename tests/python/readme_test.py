#!/usr/bin/env python3
"""The READMEs' Python client commands, run exactly as written against a real `fleetd --demo`,
so that what an operator copies from README.md and clients/python/README.md works on a fresh
machine and cannot drift from what the build makes.

Each ```sh block of the two READMEs that runs Python is run as one bash script: its `export`
lines and the lines whose command is a Python interpreter (`/usr/bin/python3`, `python3`,
`venv/bin/python`, after any `NAME=value` prefixes), in order, continuation lines joined; the
other lines (starting fleetd, building, installing packages) are the harness's to do, not
run. The placeholders the READMEs use for what the demo prints are filled in: HOST:PORT with
its gRPC address and FILE with its fleetctl config. The scripts run

- from a directory laid out as the repository (each of its top-level entries a link into the
  source tree) with this build as `build/`, so relative paths mean what they mean to an
  operator at the repository's root;
- with only PATH, HOME (an empty directory) and FLEET_CONFIG (the demo's, as the top README's
  tour exports it) in the environment: nothing of the harness's PYTHONPATH;
- with a `python3` first on PATH that has no grpcio and says so, as pyenv's may: a command
  that trusts PATH's `python3` fails here on any machine.

Run by ctest as python.readme (tests/python/CMakeLists.txt):

    python3 readme_test.py --group readme [-k PATTERN]

with FLEET_BIN_DIR the built binaries, FLEET_BUILD_DIR the build and FLEET_SOURCE_DIR the source
tree. Exit 77 (skipped) only when the Python gRPC packages are absent; a block that needs
python3-torch or pip where they are absent is skipped by itself, saying so.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_test  # noqa: E402  (the shared fleetd --demo harness)
from client_test import FleetTestCase  # noqa: E402

SOURCE = os.environ.get("FLEET_SOURCE_DIR", "")
READMES = ("README.md", "clients/python/README.md")

# The `python3` the commands must not rely on: first on PATH, without grpcio.
FAKE_PYTHON3 = """#!/bin/sh
echo "python3 from PATH: this one has no grpcio (name Debian's /usr/bin/python3)" >&2
exit 1
"""

# What each example prints last when it worked.
DONE = {"train_step.py": re.compile(r"^phase switches: \d+, median", re.M),
        "ring_allreduce.py": re.compile(r"^all 4 ranks done", re.M)}


@dataclasses.dataclass
class Block:
    """The lines of one ```sh block that the test runs."""

    readme: str
    line: int  # Of the block's first line, 1-based.
    commands: List[str]

    @property
    def script(self) -> str:
        return "\n".join(self.commands)


def runs_python(command: str) -> bool:
    """Whether the command's program, after any NAME=value prefixes, is a Python."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return False
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return bool(words) and re.search(r"(^|/)python3?$", words[0]) is not None


def blocks(readme: str) -> List[Block]:
    """The ```sh blocks of `readme` (relative to the source tree) that run Python."""
    with open(os.path.join(SOURCE, readme), encoding="utf-8") as f:
        lines = f.read().splitlines()
    found: List[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```sh":
            i += 1
            continue
        start = i + 1
        commands: List[str] = []
        pending = ""
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            line = pending + lines[i]
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1]
            else:
                commands.append(line)
            i += 1
        chosen = [c for c in commands if runs_python(c)]
        if chosen:
            exports = [c for c in commands if c.startswith("export ")]
            ordered = [c for c in commands if c in chosen or c in exports]
            found.append(Block(readme, start + 1, ordered))
        i += 1
    return found


def fill(command: str, grpc: str, config: str) -> str:
    """The README's placeholders for what the demo printed, filled in."""
    return re.sub(r"\bFILE\b", config, command.replace("HOST:PORT", grpc))


def missing_for(block: Block) -> str:
    """What Debian's python3 lacks for the block, or ''."""
    needs = []
    if "ring_allreduce.py" in block.script:
        needs.append(("torch", "python3-torch"))
    if "pip install" in block.script:
        needs += [("pip", "python3-pip"), ("setuptools", "python3-setuptools")]
    return ", ".join(package for module, package in needs
                     if importlib.util.find_spec(module) is None)


class ReadmeTest(FleetTestCase):
    """The READMEs' Python commands as written (python.readme)."""

    def setUp(self) -> None:
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="fleet-readme-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def layout(self) -> str:
        """A fresh directory laid out as the repository, with this build as build/."""
        root = tempfile.mkdtemp(prefix="repo-", dir=self.dir)
        for entry in os.listdir(SOURCE):
            if entry != "build" and not entry.startswith("."):
                os.symlink(os.path.join(SOURCE, entry), os.path.join(root, entry))
        os.symlink(os.environ["FLEET_BUILD_DIR"], os.path.join(root, "build"))
        return root

    def environment(self) -> dict:
        shim = os.path.join(self.dir, "path-first")
        os.makedirs(shim, exist_ok=True)
        fake = os.path.join(shim, "python3")
        with open(fake, "w") as f:
            f.write(FAKE_PYTHON3)
        os.chmod(fake, 0o755)
        home = os.path.join(self.dir, "home")
        os.makedirs(home, exist_ok=True)
        return {"PATH": f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": home,
                "FLEET_CONFIG": self.demo.config}

    def test_the_readmes_find_their_python_commands(self) -> None:
        # A parser that found nothing would pass every README: both hold the example.
        for readme in READMES:
            scripts = "\n".join(b.script for b in blocks(readme))
            self.assertIn("clients/python/examples/train_step.py", scripts, readme)
            self.assertIn("clients/python/examples/ring_allreduce.py", scripts, readme)
        self.assertTrue(any("pip install" in b.script for b in blocks(READMES[1])))

    def test_the_readmes_python_commands_work_as_written(self) -> None:
        env = self.environment()
        ran = 0
        for readme in READMES:
            for block in blocks(readme):
                with self.subTest(readme=readme, line=block.line):
                    missing = missing_for(block)
                    if missing:
                        self.skipTest(f"{readme}:{block.line} needs {missing}")
                    script = "set -eu\n" + "\n".join(
                        fill(c, self.demo.grpc, self.demo.config) for c in block.commands)
                    run = subprocess.run(["bash", "-c", script], cwd=self.layout(), env=env,
                                         capture_output=True, text=True, timeout=240)
                    out = f"{readme}:{block.line}:\n{script}\n---\n{run.stdout}{run.stderr}"
                    self.assertEqual(run.returncode, 0, out)
                    for example, done in DONE.items():
                        if example in block.script:
                            self.assertRegex(run.stdout, done, out)
                    ran += 1
        self.assertGreaterEqual(ran, 1)

    def test_a_command_trusting_path_python3_fails_here(self) -> None:
        # The environment above is one where the README's earlier `python3 …` did not work.
        run = subprocess.run(
            ["bash", "-c", "PYTHONPATH=build/clients/python python3 -c 'import fleet'"],
            cwd=self.layout(), env=self.environment(), capture_output=True, text=True,
            timeout=60)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("has no grpcio", run.stderr)


GROUPS = {"readme": [ReadmeTest]}


if __name__ == "__main__":
    args = client_test.arguments(__doc__.splitlines()[0], list(GROUPS))
    sys.exit(client_test.run(GROUPS[args.group], args.patterns))
