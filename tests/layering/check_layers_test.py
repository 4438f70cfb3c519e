#!/usr/bin/env python3
"""check_layers.py passes on the project and fails on a tree with an include that goes up."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
CHECK = HERE / "check_layers.py"
ROOT = pathlib.Path(sys.argv.pop(1)) if len(sys.argv) > 1 else HERE.parents[1]


def run(root):
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True, text=True)


def tree(files):
    """A throwaway project tree: {relative path: text}."""
    d = tempfile.TemporaryDirectory()
    for rel, text in files.items():
        p = pathlib.Path(d.name, rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


class CheckLayersTest(unittest.TestCase):
    def test_project_is_layered(self):
        result = run(ROOT)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_upward_include_is_refused_with_file_line_and_layers(self):
        with tree({"controller/engine/engine.h": "",
                   "scheduler/planner.cc": '#include <map>\n#include "controller/engine/engine.h"\n'}) as d:
            result = run(d)
        self.assertEqual(result.returncode, 1)
        self.assertIn("scheduler/planner.cc:2: includes controller/engine/engine.h: "
                      "scheduler may not depend on controller/engine", result.stdout)

    def test_emulator_may_not_include_the_driver(self):
        with tree({"switch_adapters/polatis/tl1_session.h": "",
                   "switch_adapters/polatis/emulator/x.cc":
                       '#include "switch_adapters/polatis/tl1_session.h"\n'}) as d:
            self.assertEqual(run(d).returncode, 1)

    def test_unknown_folder_is_refused(self):
        with tree({"newdir/a.cc": ""}) as d:
            result = run(d)
        self.assertEqual(result.returncode, 1)
        self.assertIn("newdir has no place in the layering", result.stdout)

    def test_allowed_and_third_party_includes_pass(self):
        with tree({"common/log.h": "", "controller/store/store.h": "",
                   "controller/engine/engine.cc":
                       '#include "common/log.h"\n#include "controller/store/store.h"\n'
                       '#include "absl/status/status.h"\n#include "fleet/v1/topology.pb.h"\n'}) as d:
            result = run(d)
        self.assertEqual(result.returncode, 0, result.stdout)


if __name__ == "__main__":
    unittest.main()
