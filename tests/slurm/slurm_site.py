#!/usr/bin/env python3
"""A throwaway Slurm cluster against fleetd --demo, for tests/slurm/slurm_test.py.

`Site()` starts, in a fresh temporary directory and on ports chosen at run time, fleetd --demo,
munged with its own key and socket, and slurmctld and two slurmd on 127.0.0.1 from a generated
slurm.conf with the spank_fleet plugin and the hooks of deploy/slurm/fleet_slurm.py; it
submits jobs, reads their state, environment and allocations, and stops everything it started
(also from an atexit handler). `require_slurm()` exits 77 when the Slurm packages are absent.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Callable, Dict, List, Optional

SKIP = 77
SOURCE_DIR = os.environ.get("FLEET_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BIN_DIR = os.environ.get("FLEET_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))
HOOKS = os.path.join(SOURCE_DIR, "deploy", "slurm", "fleet_slurm.py")
PLUGIN_SOURCE = os.path.join(SOURCE_DIR, "deploy", "slurm", "spank_fleet.c")
# The hooks run as SlurmUser and (TaskProlog) as the job's user: Debian's python3, which has
# python3-yaml, not whatever python3 runs this test.
HOOK_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
SBIN = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
WAIT = 60.0  # Seconds anything may take on a loaded machine.
# Every process this run starts carries this variable, so that processes Slurm starts for it
# (slurmstepd and the jobs) can be found and stopped at the end, and nobody else's.
MARKER = "FLEET_SLURM_TEST_RUN"


def which(name: str) -> Optional[str]:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", "")] + SBIN))


def require_slurm() -> None:
    """Exit 77 when the Slurm packages are absent."""
    wanted = {"munged": "munge", "munge": "munge", "slurmctld": "slurmctld",
              "slurmd": "slurmd", "sbatch": "slurm-client", "scontrol": "slurm-client",
              "squeue": "slurm-client", "scancel": "slurm-client"}
    missing = sorted({package for program, package in wanted.items() if not which(program)})
    if not os.environ.get("FLEET_SPANK_PLUGIN") and not os.path.exists(
            "/usr/include/slurm/spank.h"):
        missing.append("libslurm-dev")
    if missing:
        print(f"SKIP: the Slurm packages {', '.join(missing)} are not installed; install them "
              "with deploy/quickstart/install-deps.sh")
        sys.exit(SKIP)
    try:
        import yaml  # noqa: F401
    except ImportError:
        print("FAIL: the prolog needs python3-yaml (deploy/quickstart/install-deps.sh)")
        sys.exit(1)


def eventually(condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    """Polls `condition` until it holds or `timeout` passes."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def free_ports(count: int) -> List[int]:
    """Ports the kernel has just handed out, so free now; held together so they differ."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def die_with_parent(argv: List[str]) -> List[str]:
    """argv run so that it gets SIGKILL when this test dies, even by SIGKILL (ctest's timeout),
    and no daemon outlives the run: setpriv --pdeathsig (util-linux), not a preexec_fn, which
    is unsafe once the test has threads."""
    setpriv = which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


class Processes:
    """Daemons started in their own process groups; stop() ends the groups, then whatever
    else carries this run's marker (slurmstepd and job processes that left the groups)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.procs: List[subprocess.Popen] = []

    def start(self, argv: List[str], env: Dict[str, str], log: str,
              stdout=None) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(die_with_parent(argv), env=env, stdin=subprocess.DEVNULL,
                                    stdout=stdout if stdout is not None else out, stderr=out,
                                    start_new_session=True, text=stdout is not None)
        self.procs.append(proc)
        return proc

    def _marked(self) -> List[int]:
        """Processes with the marker in their environment, or with a file of this run's
        directory open (slurmstepd overwrites its environment with its title)."""
        pids = []
        needle = f"{MARKER}={self.marker}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        pids.append(int(entry))
                        continue
                for fd in os.listdir(f"/proc/{entry}/fd"):
                    if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(self.marker + "/"):
                        pids.append(int(entry))
                        break
            except OSError:
                pass
        return pids

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for proc in reversed(self.procs):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        for pid in self._marked():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not eventually(lambda: not self._marked(), 10):
            raise RuntimeError(f"processes of this run outlived it: {self._marked()}")


class Site:
    """fleetd --demo, munged, slurmctld and two slurmd, all of this run."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="fleet-slurm-")
        os.chmod(self.dir, 0o755)  # munged wants its socket's directories searchable.
        self.env = dict(os.environ)
        self.env[MARKER] = self.dir
        self.procs = Processes(self.dir)
        self.fleetctl = os.path.join(BIN_DIR, "fleetctl")
        self.ok = False
        self.stopped = False
        atexit.register(self.cleanup)  # Also when a signal ends the run before tearDownModule.
        try:
            self._start_fleetd()
            self._start_munge()
            self._write_slurm()
            self._start_slurm()
            self.ok = True
        finally:
            if not self.ok:
                print(self.logs(), file=sys.stderr)
                self.stop()

    # fleetd ---------------------------------------------------------------------------

    def _start_fleetd(self) -> None:
        fleetd = os.path.join(BIN_DIR, "fleetd")
        if not os.access(fleetd, os.X_OK):
            raise RuntimeError(f"{fleetd} is not built (set FLEET_BIN_DIR)")
        self._lines: List[str] = []
        self._cv = threading.Condition()
        self.fleetd = self.procs.start(
            [fleetd, "--demo", "--grpc-port", "0", "--metrics-port", "0", "--state-dir",
             os.path.join(self.dir, "fleet"), "--agent-heartbeat-ms", "100",
             # No switch monitor: its reads would take the latency injected for a request.
             "--monitor-interval-ms", "0"],
            self.env, os.path.join(self.dir, "fleetd.log"), stdout=subprocess.PIPE)
        threading.Thread(target=self._read_fleetd, daemon=True).start()
        self.rest = self._fleetd_line("rest: ")
        self.fleet_config = self._fleetd_line("fleetctl-config: ")
        if not eventually(lambda: self._agents_connected() >= 7):
            raise RuntimeError("the demo's agents did not connect")

    def _read_fleetd(self) -> None:
        for line in self.fleetd.stdout:
            with self._cv:
                self._lines.append(line.rstrip("\n"))
                self._cv.notify_all()

    def _fleetd_line(self, prefix: str) -> str:
        deadline = time.monotonic() + WAIT
        with self._cv:
            while True:
                for line in self._lines:
                    if line.startswith(prefix):
                        return line[len(prefix):].strip()
                if self.fleetd.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"fleetd printed no {prefix!r} line")
                self._cv.wait(0.5)

    def _agents_connected(self) -> int:
        run = self.fleet("get", "agents", "-o", "json", check=False)
        if run.returncode != 0:
            return 0
        return sum(1 for a in json.loads(run.stdout).get("agents", []) if a.get("connected"))

    def fleet(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """fleetctl as the demo's operator."""
        run = subprocess.run([self.fleetctl, *args, "--config", self.fleet_config, "--context",
                              "demo"], capture_output=True, text=True, timeout=WAIT)
        if check and run.returncode != 0:
            raise AssertionError(f"fleetctl {' '.join(args)}: {run.stdout}{run.stderr}")
        return run

    # munge and Slurm ----------------------------------------------------------------------

    def _start_munge(self) -> None:
        munge = os.path.join(self.dir, "munge")
        os.mkdir(munge, 0o755)
        key = os.path.join(munge, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        self.munge_socket = os.path.join(munge, "munge.socket")
        self.procs.start([which("munged"), "--foreground", "--force", f"--key-file={key}",
                          f"--socket={self.munge_socket}",
                          f"--pid-file={os.path.join(munge, 'munged.pid')}",
                          f"--seed-file={os.path.join(munge, 'munged.seed')}",
                          f"--log-file={os.path.join(munge, 'munged.log')}"],
                         self.env, os.path.join(munge, "munged.out"))
        if not eventually(lambda: os.path.exists(self.munge_socket), 20):
            raise RuntimeError("munged made no socket")

    def _write_slurm(self) -> None:
        d = self.dir
        for sub in ("state", "spool", "log", "fleet-state", "jobs"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        os.chmod(os.path.join(d, "jobs"), 0o1777)  # Jobs of an unprivileged user write here.
        self.conf = os.path.join(d, "slurm.conf")
        self.env["SLURM_CONF"] = self.conf
        plugin = os.environ.get("FLEET_SPANK_PLUGIN")
        if not plugin:
            plugin = os.path.join(d, "spank_fleet.so")
            subprocess.run([which("cc") or "gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra",
                            "-Werror", "-shared", "-fPIC", "-o", plugin, PLUGIN_SOURCE],
                           check=True)
        with open(os.path.join(d, "plugstack.conf"), "w") as f:
            f.write(f"required {plugin}\n")
        self.node_map = os.path.join(d, "nodes.map")
        with open(self.node_map, "w") as f:
            f.write("# Slurm node  FLEET host\nnode2 server2\n")
        self.hook_config = os.path.join(d, "fleet-slurm.yaml")
        self.write_hook_config()
        for hook in ("prolog", "epilog", "task-prolog"):
            path = os.path.join(d, f"fleet-{hook}")
            with open(path, "w") as f:
                f.write(f"#!/bin/sh\nexport FLEET_SLURM_CONFIG={self.hook_config} "
                        f"SLURM_CONF={self.conf}\nexec {HOOK_PYTHON} {HOOKS} {hook}\n")
            os.chmod(path, 0o755)
        ctld, node1, node2 = free_ports(3)
        host = socket.gethostname().split(".")[0]
        self.nodes = ["server1", "node2"]
        with open(self.conf, "w") as f:
            f.write(f"""# Generated by tests/slurm/slurm_test.py for one run.
ClusterName=fleettest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MinJobAge=600
PlugStackConfig={d}/plugstack.conf
PrologSlurmctld={d}/fleet-prolog
EpilogSlurmctld={d}/fleet-epilog
TaskProlog={d}/fleet-task-prolog
NodeName=server1 NodeHostname={host} NodeAddr=127.0.0.1 Port={node1} CPUs=2 State=UNKNOWN
NodeName=node2 NodeHostname={host} NodeAddr=127.0.0.1 Port={node2} CPUs=2 State=UNKNOWN
PartitionName=fleet Nodes=server1,node2 Default=YES MaxTime=INFINITE State=UP
""")

    def write_hook_config(self, **overrides) -> None:
        """The hooks' config (deploy/slurm/fleet-slurm.yaml's keys); read by every hook run,
        so a test may change it between jobs."""
        config = {
            "fleetctl": self.fleetctl, "fleetctl_config": self.fleet_config,
            # The demo's job identity of tenant team-a: what a site gives its controller.
            "context": "demo-job", "tenant": "team-a", "node_map_file": self.node_map,
            "ready_timeout": "60s", "lease_slack": "10m",
            "state_dir": os.path.join(self.dir, "fleet-state"),
            "log_file": os.path.join(self.dir, "log", "fleet-slurm.log"),
            "release_attempts": 4, "release_backoff": "0.2s",
        }
        config.update(overrides)
        with open(self.hook_config, "w") as f:
            json.dump(config, f, indent=1)  # JSON is YAML.

    def _start_slurm(self) -> None:
        log = os.path.join(self.dir, "log")
        self.procs.start([which("slurmctld"), "-D", "-f", self.conf], self.env,
                         os.path.join(log, "slurmctld.out"))
        if not eventually(lambda: self.slurm("scontrol", "ping", check=False).returncode == 0
                          and "UP" in self.slurm("scontrol", "ping", check=False).stdout):
            raise RuntimeError("slurmctld does not answer")
        for node in self.nodes:
            self.procs.start([which("slurmd"), "-D", "-f", self.conf, "-N", node], self.env,
                             os.path.join(log, f"slurmd-{node}.out"))

        def idle() -> bool:
            run = self.slurm("sinfo", "-h", "-N", "-o", "%N %t", check=False)
            states = dict(line.split() for line in run.stdout.splitlines() if line.strip())
            return all(states.get(n) == "idle" for n in self.nodes)

        if not eventually(idle):
            raise RuntimeError("the slurmd did not register idle")

    def slurm(self, *argv: str, check: bool = True, cwd: Optional[str] = None,
              timeout: float = WAIT) -> subprocess.CompletedProcess:
        run = subprocess.run([which(argv[0]), *argv[1:]], capture_output=True, text=True,
                             env=self.env, cwd=cwd or self.dir, timeout=timeout)
        if check and run.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, argv))}: {run.stdout}{run.stderr}")
        return run

    def logs(self) -> str:
        out = []
        for name in ("log/slurmctld.log", "log/fleet-slurm.log", "fleetd.log"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out.append(f"--- {name} (tail)\n" + "".join(f.readlines()[-40:]))
            except OSError:
                pass
        return "\n".join(out)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.cancel_all()
        self.procs.stop()

    def cancel_all(self) -> None:
        """Cancels every job of this site that has not ended."""
        try:
            jobs = self.slurm("squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.split()
            if jobs:
                self.slurm("scancel", *jobs, check=False, timeout=10)
        except (subprocess.TimeoutExpired, TypeError, AttributeError):
            pass

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def cleanup(self) -> None:
        self.stop()
        if os.environ.get("FLEET_KEEP_SLURM_TEST_DIR"):
            print(f"kept {self.dir}", file=sys.stderr)
        else:
            self.remove()

    # jobs ---------------------------------------------------------------------------------

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.dir, "jobs", name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def submit(self, spec: Optional[str], *sbatch_args, exit_code: int = 0,
               wait_for_go: bool = True, user: Optional[str] = None) -> str:
        """A batch job that records its FLEET_* environment (and an srun step's), then waits
        for the test's go file (at most WAIT*2 seconds); its id. --time=10 unless given."""
        jobs = os.path.join(self.dir, "jobs")
        lines = ["#!/bin/bash"]
        if spec is not None:
            lines.append(f"#SBATCH --fleet={spec}")  # Relative: read in sbatch's directory.
        lines += [
            f"#SBATCH --output={jobs}/%j.out",
            f"date +%s.%N > {jobs}/$SLURM_JOB_ID.started",
            f"env | grep ^FLEET_ | sort > {jobs}/$SLURM_JOB_ID.env.tmp",
            f"srun -n1 env | grep ^FLEET_ | sort > {jobs}/$SLURM_JOB_ID.srun",
            f"mv {jobs}/$SLURM_JOB_ID.env.tmp {jobs}/$SLURM_JOB_ID.env",
        ]
        if wait_for_go:
            lines.append(f"end=$((SECONDS + {int(WAIT * 2)}))")
            lines.append(f"while [ ! -e {jobs}/$SLURM_JOB_ID.go ] && [ $SECONDS -lt $end ]; "
                         "do sleep 0.05; done")
        lines.append(f"exit {exit_code}")
        script = self.write(f"job-{time.monotonic_ns()}.sh", "\n".join(lines) + "\n")
        if not any(str(a).startswith(("--time", "-t")) for a in sbatch_args):
            sbatch_args = ("--time=10", *sbatch_args)
        argv = ["sbatch", "--parsable", *sbatch_args, script]
        if user is not None:
            os.chmod(script, 0o755)
            argv = ["runuser", "-u", user, "--", which("sbatch"), *argv[1:]]
        run = self.slurm(*argv, cwd=jobs)
        return run.stdout.strip().split(";")[0]

    def job(self, job: str) -> Dict[str, str]:
        """`scontrol show job` as NAME=VALUE (AdminComment whole)."""
        text = self.slurm("scontrol", "show", "job", job).stdout
        fields: Dict[str, str] = {"_text": text}
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("AdminComment="):
                fields["AdminComment"] = stripped[len("AdminComment="):]
                continue
            for token in stripped.split():
                name, _, value = token.partition("=")
                fields.setdefault(name, value)
        return fields

    def job_env(self, job: str, suffix: str = "env") -> Dict[str, str]:
        path = os.path.join(self.dir, "jobs", f"{job}.{suffix}")
        with open(path) as f:
            return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)

    def go(self, job: str) -> None:
        open(os.path.join(self.dir, "jobs", f"{job}.go"), "w").close()

    def allocations(self, name: Optional[str] = None) -> List[dict]:
        allocations = json.loads(self.fleet("get", "allocations", "-o", "json").stdout or "{}")
        return [a for a in allocations.get("allocations", [])
                if name is None or a.get("name") == name]

    def live(self, name: str) -> List[dict]:
        return [a for a in self.allocations(name)
                if a.get("state") not in ("ALLOCATION_STATE_RELEASED",
                                          "ALLOCATION_STATE_RELEASING")]

    def circuits(self, allocation: str) -> List[dict]:
        circuits = json.loads(self.fleet("get", "circuits", "-o", "json").stdout or "{}")
        return [c for c in circuits.get("circuits", []) if c.get("allocation_id") == allocation]

    def switch_pairs(self) -> set:
        """The emulated switch's cross-connects, read over its own REST interface."""
        request = urllib.request.Request(
            f"http://{self.rest}/api/data/optical-switch:cross-connects",
            headers={"Authorization": "Basic YWRtaW46cm9vdA=="})  # admin:root
        with urllib.request.urlopen(request, timeout=10) as response:
            data = json.load(response)
        pairs = data.get("optical-switch:cross-connects", {}).get("pair", [])
        return {(p["ingress"], p["egress"]) for p in pairs}

    def switch_fault(self, faults: Optional[dict]) -> None:
        method, body = ("PUT", json.dumps(faults).encode()) if faults else ("DELETE", None)
        request = urllib.request.Request(f"http://{self.rest}/sim/v1/faults", data=body,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
