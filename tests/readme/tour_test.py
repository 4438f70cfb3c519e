#!/usr/bin/env python3
"""The README's tour, run as written against a real `fleetd --demo`, so that what the README
says the commands print cannot drift from what they print.

Which blocks run: every ```sh block of README.md with `<!-- tour -->` on the line before its
fence, in order, against one demo. In such a block:
  - `build/bin/fleetd ...` is started as written (in the build named by FLEET_BIN_DIR) and
    the `# NAME: VALUE` lines under it name what it prints: each NAME must be printed, and
    each VALUE written there stands for what this run printed wherever the README uses it
    (an address, the state directory);
  - `export A=B ...` sets the environment of the commands after it;
  - every other line that is not a comment is a command, run with bash from the source tree
    with build/bin first on PATH; a comment on its line, and comment lines indented under it,
    are what it prints: each `quoted` fragment there must appear in its output (stdout and
    stderr). It must exit 0; 1 when its comment begins with "refused"; N when it says
    "(exit N". One whose comment says "until Ctrl-C" gets SIGINT after a few seconds. A read
    (get, describe, health) is asked again for up to 30 s until its fragments appear, as a
    person would look again while the agents connect.
  - an allocation id the README writes as `a2` or `ID` (in a quoted fragment, `ID` followed
    by a word, as in `ID ready`) stands for the allocation the latest `topology request`
    made (its `ID pending` line).
Exits 77 (skipped) only when the binaries are not built.
"""
import ctypes
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SOURCE = os.environ.get("FLEET_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("FLEET_BIN_DIR") or os.path.join(SOURCE, "build", "bin")
COMMAND_TIMEOUT = 60
FOLLOW_SECONDS = 5


def die_with_parent():
    """In the child before exec: SIGKILL when this test dies, so fleetd and the demo's children
    (which die with fleetd) never outlive a test that ctest killed."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def tour_blocks(readme):
    """The lines of each ```sh block marked <!-- tour -->, with their README line numbers."""
    lines = readme.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "<!-- tour -->" and i + 1 < len(lines) and lines[i + 1].startswith("```sh"):
            j = i + 2
            block = []
            while j < len(lines) and not lines[j].startswith("```"):
                block.append((j + 1, lines[j]))
                j += 1
            blocks.append(block)
            i = j
        i += 1
    return blocks


def split_comment(line):
    """(command, comment) of a shell line: the comment is what follows the first ` # `
    outside quotes."""
    quote = None
    for k, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (k == 0 or line[k - 1] == " "):
            return line[:k].rstrip(), line[k + 1:].strip()
    return line.rstrip(), ""


def commands(block):
    """Each (line number, command, comment) of a block, continuation comments joined."""
    out = []
    for number, line in block:
        if not line.strip():
            continue
        command, comment = split_comment(line)
        if not command.strip():
            if out and line.startswith(" "):  # A comment indented under the command.
                n, c, previous = out[-1]
                out[-1] = (n, c, (previous + " " + comment).strip())
            elif out and out[-1][1].startswith("build/bin/fleetd"):
                n, c, previous = out[-1]
                out[-1] = (n, c, previous + "\n" + comment)
            continue
        out.append((number, command.strip(), comment))
    return out


class Tour:
    def __init__(self):
        self.failures = []
        self.substitutions = {}  # README text → this run's value.
        self.env = dict(os.environ)
        self.env["PATH"] = BIN + os.pathsep + self.env.get("PATH", "")
        self.env.pop("FLEET_CONTEXT", None)
        self.env["NO_COLOR"] = "1"
        self.allocation = None
        self.fleetd = None
        self.lines = []
        self.cv = threading.Condition()

    def fail(self, number, what):
        self.failures.append(f"README.md:{number}: {what}")

    def substitute(self, text, fragment=False):
        for readme_value, value in sorted(self.substitutions.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(readme_value, value)
        if self.allocation:
            # In a quoted fragment ID stands for the allocation only before a word (`ID ready`),
            # so that a table's ID column can still be quoted.
            text = re.sub(r"\ba2\b|\bID(?= )" if fragment else r"\b(a2|ID)\b",
                          self.allocation, text)
        return text

    # --- fleetd ---
    def start_fleetd(self, number, command, comment):
        argv = shlex.split(command)
        argv[0] = os.path.join(BIN, "fleetd")
        self.state = tempfile.mkdtemp(prefix="tour-state-")
        argv += ["--state-dir", self.state]
        self.stderr = open(os.path.join(self.state, "fleetd.stderr"), "w+")
        self.fleetd = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.stderr,
                                       text=True, cwd=SOURCE, start_new_session=True,
                                       preexec_fn=die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        for expected in comment.split("\n"):
            m = re.match(r"(\S+): (\S+)", expected)
            if not m:
                continue
            name, readme_value = m.group(1), m.group(2)
            value = self.wait_line(name + ": ")
            if value is None:
                self.fail(number, f"fleetd printed no '{name}: ' line")
                continue
            value = value.split(" ")[0]
            self.substitutions[readme_value] = value
            # An address is also written HOST PORT, as nc takes it.
            if re.fullmatch(r"[\d.]+:\d+", readme_value) and ":" in value:
                self.substitutions[readme_value.replace(":", " ")] = value.replace(":", " ")
        # The README's state directory is the one in the demo's paths.
        config = self.substitutions.get("/tmp/fleet-demo.Ab12Cd/fleetctl.yaml")
        if config:
            self.substitutions["/tmp/fleet-demo.Ab12Cd"] = os.path.dirname(config)

    def _read(self):
        for line in self.fleetd.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()

    def wait_line(self, prefix, timeout=60):
        deadline = time.time() + timeout
        with self.cv:
            while True:
                for line in self.lines:
                    if line.startswith(prefix):
                        return line[len(prefix):]
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def stop_fleetd(self):
        if not self.fleetd:
            return
        if self.fleetd.poll() is None:
            os.killpg(self.fleetd.pid, signal.SIGTERM)
            try:
                self.fleetd.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.fleetd.pid, signal.SIGKILL)
                self.fleetd.wait()
        if self.failures:
            self.stderr.seek(0)
            print("---- fleetd stderr:\n" + self.stderr.read()[-20000:])
        self.stderr.close()
        shutil.rmtree(self.state, ignore_errors=True)

    # --- commands ---
    def run(self, number, command, comment):
        if command.startswith("bash deploy/quickstart/build.sh"):
            return  # Built already: this test runs from the build.
        if command.startswith("build/bin/fleetd"):
            self.start_fleetd(number, command, comment)
            return
        if command.startswith("export "):
            for assignment in shlex.split(self.substitute(command))[1:]:
                name, _, value = assignment.partition("=")
                self.env[name] = value
            return
        text = self.substitute(command)
        follow = "until Ctrl-C" in comment
        read = re.match(r"fleetctl (get|describe|health)\b", text) and not follow
        exit_said = re.search(r"\(exit (\d)", comment)
        expected_exit = int(exit_said.group(1)) if exit_said else (
            1 if comment.startswith("refused") else 0)
        deadline = time.time() + 30
        while True:
            code, out = self.execute(text, follow)
            if code is None and not follow:
                self.fail(number, f"`{text}` did not end within {COMMAND_TIMEOUT}s")
                return
            if re.search(r"\btopology request\b", text) and "--dry-run" not in text:
                made = re.search(r"^(\S+) pending$", out, re.MULTILINE)
                self.allocation = made.group(1) if made else None
            missing = [f for f in re.findall(r"`([^`]+)`", comment)
                       if self.substitute(f, fragment=True) not in out]
            if not (read and missing) or time.time() > deadline:
                break
            time.sleep(1)
        if not follow and code != expected_exit:
            self.fail(number, f"`{text}` exited {code}, not {expected_exit}:\n{out}")
        for fragment in missing:
            self.fail(number,
                      f"`{text}` printed no `{self.substitute(fragment, True)}`:\n{out}")
        if re.search(r"\btopology request\b", text) and "--dry-run" not in text and \
                not self.allocation:
            self.fail(number, f"`{text}` printed no `ID pending` line:\n{out}")

    def execute(self, text, follow):
        """(exit code, output) of `text` under bash; exit None when it had to be stopped."""
        proc = subprocess.Popen(["bash", "-c", text], cwd=SOURCE, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=FOLLOW_SECONDS if follow else COMMAND_TIMEOUT)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            return None, out


def main():
    if not os.path.exists(os.path.join(BIN, "fleetd")) or not os.path.exists(
            os.path.join(BIN, "fleetctl")):
        print(f"skipped: no fleetd and fleetctl in {BIN}")
        return 77
    with open(os.path.join(SOURCE, "README.md")) as f:
        blocks = tour_blocks(f.read())
    tour = Tour()
    if not blocks:
        print("README.md has no block marked <!-- tour -->")
        return 1
    ran = 0
    try:
        for block in blocks:
            for number, command, comment in commands(block):
                tour.run(number, command, comment)
                ran += 1
    finally:
        tour.stop_fleetd()
    for failure in tour.failures:
        print(failure, "\n")
    print(f"{ran - len(tour.failures)} passed, {len(tour.failures)} failed")
    return 1 if tour.failures else 0


if __name__ == "__main__":
    sys.exit(main())
