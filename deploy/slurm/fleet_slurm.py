#!/usr/bin/python3
"""FLEET's Slurm hooks: PrologSlurmctld, EpilogSlurmctld and TaskProlog in one program.

Slurm runs its hooks without arguments, so the hook is chosen by the name the program is
installed under (or by the first argument, for tests and by hand):

  fleet-prolog-slurmctld   PrologSlurmctld: for a job submitted with --fleet=SPEC.yaml (the
                           spank_fleet plugin put the file's text in SPANK_FLEET_SPEC), fill
                           the spec for the job's nodes, request it from fleetd with fleetctl,
                           wait for READY, and store the allocation and its rank order in the
                           job's AdminComment. On any failure: release what was admitted, put
                           the reason in AdminComment, hold the job and exit 1, which makes
                           slurmctld requeue it, held, instead of starting it.
  fleet-epilog-slurmctld   EpilogSlurmctld: release the job's allocations, retrying with backoff;
                           a release that still fails is logged (the lease is the backstop).
  fleet-task-prolog        TaskProlog: print `export FLEET_...=...` from the AdminComment, so
                           every task (the batch script included) has them in its environment.

Configuration: /etc/fleet/slurm.yaml, or the file FLEET_SLURM_CONFIG names (deploy/slurm/
fleet-slurm.yaml is the annotated example). See deploy/slurm/README.md.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from fleet_slurm_spec import Refusal, fill_spec, load_spec, printable

STARTED = time.monotonic()  # The prolog's log reports its whole time, Python's start included.
STARTED_WALL = time.time()  # A marker the epilog left before this is of an earlier run.
RUN = f"{os.getpid()}@{STARTED_WALL:.6f}"  # This prolog run, in the record it leaves.
DEFAULT_CONFIG = "/etc/fleet/slurm.yaml"
COMMENT_READY = "fleet: ready"
COMMENT_PREFIX = "fleet:"
# What a value in the AdminComment (and so in `export NAME=value`) may hold: names of
# devices and hosts, ids, counts, comma lists. Anything else is not passed on.
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:,/@+-]*$")
SAFE_NAME = re.compile(r"^FLEET_[A-Z0-9_]+$")
# Job states in which the job may still use an allocation its prolog obtained.
ALIVE_STATES = {"CONFIGURING", "RUNNING", "SUSPENDED", "RESIZING"}
# The epilog: how long it waits for a prolog still running to let go of the job's lock, how
# long it keeps looking for an allocation a killed prolog's request may still create, and
# how long it spends at most on the whole.
EPILOG_LOCK_WAIT = 10.0
EPILOG_LOOKUP_WINDOW = 5.0
EPILOG_DEADLINE = 300.0
RELEASE_BACKOFF_CAP = 30.0
RANK_ORDERS = {
    "RANK_ORDER_RING": "ring", "RANK_ORDER_CHAIN": "chain", "RANK_ORDER_TORUS": "torus",
    "RANK_ORDER_MEMBERS": "members",
}


# ---------------------------------------------------------------------------------------
# Configuration


def parse_duration(value: Any, field: str) -> float:
    """Seconds from 300, "300", "90s", "5m", "1h", "1h30m"."""
    if isinstance(value, bool):
        raise Refusal(f"config {field}: {value!r} is not a duration (e.g. 300, 90s, 5m, 1h)")
    if isinstance(value, (int, float)):
        if value < 0:
            raise Refusal(f"config {field}: {value} must not be negative")
        return float(value)
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise Refusal(f"config {field}: '{text}' is not a duration (e.g. 300, 90s, 5m, 1h30m)")
    scale = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * scale[u] for n, u in parts)


class Config:
    KEYS = {"fleetctl", "fleetctl_config", "context", "slurm_conf", "scontrol", "tenant",
            "account_tenants", "allow_spec_tenant", "node_map", "node_map_file",
            "ready_timeout", "lease_slack", "max_lease", "state_dir",
            "log_file",
            "release_attempts", "release_backoff"}

    def __init__(self, path: str, data: Dict[str, Any]) -> None:
        unknown = sorted(set(data) - self.KEYS)
        if unknown:
            raise Refusal(f"config {path}: unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(self.KEYS))})")
        self.path = path
        self.fleetctl = str(data.get("fleetctl", "fleetctl"))
        self.fleetctl_config = data.get("fleetctl_config")
        self.context = data.get("context")
        self.slurm_conf = data.get("slurm_conf")
        self.scontrol = str(data.get("scontrol", "scontrol"))
        # squeue: next to the configured scontrol when that is a path.
        self.squeue: Optional[str] = None
        if os.sep in self.scontrol:
            self.squeue = os.path.join(os.path.dirname(self.scontrol), "squeue")
        self.tenant = data.get("tenant")
        self.account_tenants = data.get("account_tenants") or {}
        self.allow_spec_tenant = bool(data.get("allow_spec_tenant", False))
        self.ready_timeout = parse_duration(data.get("ready_timeout", "5m"), "ready_timeout")
        self.lease_slack = parse_duration(data.get("lease_slack", "10m"), "lease_slack")
        self.max_lease = parse_duration(data.get("max_lease", "168h"), "max_lease")
        self.state_dir = str(data.get("state_dir", "/var/lib/fleet-slurm"))
        self.log_file = data.get("log_file", "/var/log/fleet-slurm.log")
        attempts = data.get("release_attempts", 6)
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise Refusal(f"config {path}: release_attempts {attempts!r} must be a whole "
                          "number of at least 1")
        self.release_attempts = attempts
        self.release_backoff = parse_duration(data.get("release_backoff", 1), "release_backoff")
        if not isinstance(self.account_tenants, dict):
            raise Refusal(f"config {path}: account_tenants must map Slurm accounts to tenants")
        self.node_map: Dict[str, str] = {}
        node_map = data.get("node_map") or {}
        if not isinstance(node_map, dict):
            raise Refusal(f"config {path}: node_map must map Slurm node names to FLEET hosts")
        for node, host in node_map.items():
            self.node_map[str(node)] = str(host)
        if data.get("node_map_file"):
            self.node_map.update(read_node_map(str(data["node_map_file"])))

    def env(self) -> Dict[str, str]:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = str(self.slurm_conf)
        return env

    def fleetctl_argv(self, *args: str) -> List[str]:
        argv = [self.fleetctl, *args]
        if self.fleetctl_config:
            argv += ["--config", str(self.fleetctl_config)]
        if self.context:
            argv += ["--context", str(self.context)]
        return argv


def read_node_map(path: str) -> Dict[str, str]:
    """Lines "SLURM_NODE FLEET_HOST"; # starts a comment."""
    mapping: Dict[str, str] = {}
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                fields = line.split()
                if len(fields) != 2:
                    raise Refusal(f"node map {path}:{number}: '{line}' must be two names, "
                                  "the Slurm node and its FLEET host")
                mapping[fields[0]] = fields[1]
    except OSError as e:
        raise Refusal(f"node map {path}: {e.strerror}") from e
    return mapping


def load_config() -> Config:
    path = os.environ.get("FLEET_SLURM_CONFIG", DEFAULT_CONFIG)
    import yaml  # python3-yaml; only the prolog and epilog need it.
    try:
        with open(path) as f:
            data = yaml.safe_load(f) or {}
    except OSError as e:
        raise Refusal(f"config {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise Refusal(f"config {path}: not YAML: {e}") from e
    if not isinstance(data, dict):
        raise Refusal(f"config {path}: must be a mapping of keys")
    return Config(path, data)


class Log:
    """Lines with a timestamp and the job to the configured file, and to stderr. Logging
    never fails the hook: whatever the message holds is escaped, and a log that cannot be
    written is skipped."""

    def __init__(self, hook: str, job: str, path: Optional[str]) -> None:
        self.prefix = f"{hook} job {job}"
        self.path = path

    def __call__(self, message: str) -> None:
        line = printable(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.prefix}: {message}",
                         8192)
        try:
            print(line, file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 (a closed or odd stderr)
            pass
        if self.path:
            try:
                with open(str(self.path), "a", encoding="utf-8", errors="backslashreplace") as f:
                    f.write(line + "\n")
            except Exception:  # noqa: BLE001
                pass


# ---------------------------------------------------------------------------------------
# Slurm


def scontrol(config: Config, *args: str, timeout: float = 30) -> str:
    run = subprocess.run([config.scontrol, *args], capture_output=True, text=True,
                         timeout=timeout, env=config.env())
    if run.returncode != 0:
        raise RuntimeError(f"scontrol {' '.join(args)}: {(run.stderr or run.stdout).strip()}")
    return run.stdout


def job_info(config: Config, job: str) -> Optional[Dict[str, str]]:
    """The job's state, time limit and submit time from squeue, one field each, between
    separators no field can hold; None when Slurm no longer knows the job. Not `scontrol show
    job`, whose NAME=VALUE text the job's name (-J) can forge."""
    run = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%l|%V"]
                         if config.squeue is None else
                         [config.squeue, "-h", "-t", "all", "-j", job, "-o", "%T|%l|%V"],
                         capture_output=True, text=True, timeout=30, env=config.env())
    lines = [l for l in run.stdout.splitlines() if l.strip()]
    if run.returncode != 0 or not lines:
        if "Invalid job id" in run.stderr or (run.returncode == 0 and not lines):
            return None
        raise RuntimeError(f"squeue -j {job}: {(run.stderr or run.stdout).strip()}")
    fields = lines[0].strip().split("|")
    if len(fields) != 3:
        raise RuntimeError(f"squeue -j {job}: unexpected line {lines[0]!r}")
    return {"state": fields[0], "time_limit": fields[1], "submit": fields[2]}


def prolog_timeout(config: Config) -> Optional[float]:
    """slurm.conf's PrologEpilogTimeout in seconds (it also bounds PrologSlurmctld); None
    when unset."""
    for line in scontrol(config, "show", "config").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "PrologEpilogTimeout":
            value = value.strip().split()[0] if value.strip() else ""
            if value.isdigit() and 0 < int(value) < 65534:  # 65534: Slurm's "not set".
                return float(value)
    return None


def time_limit_seconds(text: str) -> Optional[float]:
    """Slurm's TimeLimit ([D-]HH:MM:SS, MM:SS, MM); None when UNLIMITED or unknown."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", text)
    if match:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
        return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)
    if re.fullmatch(r"\d+", text):
        return float(int(text) * 60)
    return None


def set_admin_comment(config: Config, job: str, comment: str, log: Log) -> bool:
    for attempt in range(3):
        try:
            scontrol(config, "update", f"JobId={job}", f"AdminComment={comment}")
            return True
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            log(f"setting AdminComment failed (attempt {attempt + 1}): {e}")
            time.sleep(0.2 * (attempt + 1))
    return False


def hold(config: Config, job: str, log: Log) -> bool:
    """Holds the job (Priority=0), retrying: a failed PrologSlurmctld requeues the job, and
    without the hold Slurm would run the prolog again and again."""
    for attempt in range(4):
        try:
            scontrol(config, "hold", job)
            return True
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            log(f"holding the job failed (attempt {attempt + 1} of 4): {e}")
            time.sleep(0.5 * (attempt + 1))
    log(f"HOLD FAILED: job {job} is requeued without a hold, and its prolog will run again "
        f"(scontrol hold {job} stops that)")
    return False


def expand_nodes(config: Config, nodelist: str) -> List[str]:
    if not nodelist:
        return []
    return scontrol(config, "show", "hostnames", nodelist).split()


# ---------------------------------------------------------------------------------------
# The tenant


def tenant_for(config: Config, spec: dict, account: str, source: str) -> str:
    """The tenant the site gives the job's account; the spec may only repeat it unless the
    site allows the spec to choose."""
    site = config.account_tenants.get(account) or config.tenant
    wanted = spec.get("tenant")
    if wanted and site and str(wanted) != str(site) and not config.allow_spec_tenant:
        raise Refusal(f"{source}: tenant '{wanted}' is not this job's tenant '{site}' "
                      f"(account '{account or '(none)'}'); leave tenant out")
    tenant = wanted if (wanted and (config.allow_spec_tenant or not site)) else site
    if not tenant:
        raise Refusal(f"{source}: no tenant: give tenant: in the spec or tenant/account_tenants "
                      f"in {config.path}")
    return str(tenant)


# ---------------------------------------------------------------------------------------
# fleetctl


def fleetctl_error(run: subprocess.CompletedProcess) -> str:
    """fleetctl's `error: ...` lines, or its last words."""
    text = (run.stderr or "") + (run.stdout or "")
    errors = [l[len("error: "):].strip() for l in text.splitlines() if l.startswith("error: ")]
    if errors:
        return "; ".join(errors)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else f"fleetctl exited {run.returncode}"


def fleetctl(config: Config, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(config.fleetctl_argv(*args), capture_output=True, text=True,
                          timeout=timeout, env=config.env())


def job_allocations(config: Config, name: str, key: str) -> List[dict]:
    """The live allocations of this job: named `name`, with a request_id that is `key` or
    `key.RESTARTS`. Nothing else is ever released for the job, whatever a file says."""
    run = fleetctl(config, "get", "allocations", "-o", "json")
    if run.returncode != 0:
        raise RuntimeError(f"listing allocations: {fleetctl_error(run)}")
    data = json.loads(run.stdout or "{}")
    return [a for a in data.get("allocations", [])
            if a.get("name") == name and owned_by(a, key)
            and a.get("state") not in ("ALLOCATION_STATE_RELEASED",
                                       "ALLOCATION_STATE_RELEASING")]


def owned_by(allocation: dict, key: str) -> bool:
    """The request_id is the job's key, or the key of one of its requeued runs (key.rN)."""
    request_id = str((allocation.get("request") or {}).get("request_id", ""))
    return re.fullmatch(re.escape(key) + r"(\.r\d+)?", request_id) is not None


def release(config: Config, allocation: str, log: Log,
            deadline: Optional[float] = None) -> bool:
    """Releases with retries and doubling backoff (at most RELEASE_BACKOFF_CAP apart, and
    none started after `deadline`, a time.monotonic()); True once it is released or gone."""
    delay = config.release_backoff
    for attempt in range(1, config.release_attempts + 1):
        try:
            run = fleetctl(config, "topology", "release", allocation, "--wait", "--timeout",
                           "60", timeout=90)
            error = fleetctl_error(run)
            if run.returncode == 0 or "NOT_FOUND" in error or "was released" in error:
                log(f"released {allocation}")
                return True
        except subprocess.TimeoutExpired:
            error = "fleetctl did not return in 90s"
        except OSError as e:
            error = f"cannot run {config.fleetctl}: {e.strerror}"
        log(f"release of {allocation} failed (attempt {attempt} of "
            f"{config.release_attempts}): {error}")
        if attempt < config.release_attempts:
            if deadline is not None and time.monotonic() + delay > deadline:
                log(f"the epilog's {int(EPILOG_DEADLINE)}s are up: no more attempts")
                break
            time.sleep(delay)
            delay = min(delay * 2, RELEASE_BACKOFF_CAP)
    log(f"LEAK WARNING: {allocation} is not released; its lease will release it")
    return False


def foreign_members(config: Config, allocation: dict, rank_hosts: Dict[str, str],
                    hosts: List[str]) -> List[str]:
    """Members of the allocation that belong to a host outside the job's nodes, whatever way
    the spec named them (pooled devices, with no host, are anyone's). The hosts are those of
    the rank order; an attach's members that are no ranks are its host's own devices
    (docs/ranks.md); any other member it does not cover is looked up in the inventory."""
    members = [str(m) for m in allocation.get("members") or []]
    host_of = dict(rank_hosts)
    attach = ((allocation.get("request") or {}).get("topology") or {}).get("attach") or {}
    if rank_hosts and attach.get("host"):
        for m in members:
            host_of.setdefault(m, str(attach["host"]))
    unknown = [m for m in members if m not in host_of]
    if unknown:
        run = fleetctl(config, "get", "devices", "-o", "json")
        if run.returncode != 0:
            raise Refusal(f"cannot check the hosts of the allocation's devices "
                          f"{', '.join(unknown)}: {fleetctl_error(run)}")
        for d in json.loads(run.stdout or "{}").get("devices", []):
            host_of.setdefault(str(d.get("id")), str(d.get("host") or ""))
    return [f"{m} (host {host_of[m]})" for m in members
            if host_of.get(m) and host_of[m] not in hosts]


def ranks_of(config: Config, allocation: dict) -> Tuple[Dict[str, str], Dict[str, str]]:
    """The FLEET_* variables of the rank order (fleetctl topology ranks, or the member order
    where this fleetctl has no ranks verb), and each ranked device's host."""
    alloc_id = allocation["id"]
    run = fleetctl(config, "topology", "ranks", alloc_id, "-o", "json")
    if run.returncode == 0:
        data = json.loads(run.stdout)
        ranks = data.get("ranks", [])
        env = {
            "FLEET_RANKS": ",".join(r.get("device", "") for r in ranks),
            "FLEET_RANK_ORDER": RANK_ORDERS.get(data.get("order", ""), "members"),
            "FLEET_WORLD_SIZE": str(len(ranks)),
        }
        hosts = [r.get("host", "") for r in ranks]
        if any(hosts):
            env["FLEET_RANK_HOSTS"] = ",".join(h or "-" for h in hosts)
        return env, {str(r.get("device", "")): str(r.get("host") or "") for r in ranks}
    if run.returncode == 2:  # This fleetctl has no `topology ranks`.
        members = allocation.get("members", [])
        return {"FLEET_RANKS": ",".join(members), "FLEET_RANK_ORDER": "members",
                "FLEET_WORLD_SIZE": str(len(members))}, {}
    raise Refusal(f"fleetd refused the rank order of {alloc_id}: {fleetctl_error(run)}")


# ---------------------------------------------------------------------------------------
# The hooks


class JobGone(Exception):
    """The job ended (cancelled, say) while its prolog ran: nothing to hold, nothing to keep."""


def job_key(job: str, info: Dict[str, str]) -> str:
    """The job's request_id: its id, the cluster's name and its submit time, so that a job id
    Slurm hands out again (a new StateSaveLocation, another cluster on the same fleetd) is
    another request, not a retry of an old one."""
    cluster = re.sub(r"[^A-Za-z0-9_-]", "", os.environ.get("SLURM_CLUSTER_NAME", ""))[:64]
    submit = re.sub(r"[^0-9T]", "", info.get("submit", ""))[:32]
    return ".".join(p for p in (f"slurm-job-{job}", cluster, submit) if p)


def slurm_duration(seconds: float) -> str:
    """D-HH:MM:SS, as --time takes it."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    return f"{days}-{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


class JobFiles:
    """The job's files in state_dir: the request as sent (job-ID.yaml), what the prolog
    ended with (job-ID.json), the epilog's "the job ended" marker (job-ID.ended) and the lock
    the prolog holds while it runs (job-ID.lock)."""

    def __init__(self, config: Config, job: str) -> None:
        os.makedirs(config.state_dir, exist_ok=True)
        base = os.path.join(config.state_dir, f"job-{job}")
        self.spec, self.record = base + ".yaml", base + ".json"
        self.marker, self.lock_path = base + ".ended", base + ".lock"
        self.lock_fd: Optional[int] = None

    def lock(self, wait: float) -> bool:
        """Takes the job's lock (not inherited by the commands the hook runs, so a killed
        hook's lock goes with it), waiting at most `wait` seconds."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.lock_fd = fd
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)

    def write_record(self, data: Dict[str, Any]) -> None:
        with open(self.record + ".tmp", "w") as f:
            json.dump({**data, "run": RUN}, f)
        os.replace(self.record + ".tmp", self.record)

    def read_record(self) -> Optional[Dict[str, Any]]:
        try:
            with open(self.record) as f:
                data = json.load(f)
            return data if isinstance(data, dict) else None
        except (OSError, ValueError):
            return None

    def ended_since(self, since: float) -> bool:
        try:
            return os.stat(self.marker).st_mtime >= since
        except OSError:
            return False

    def remove(self) -> None:
        for path in (self.spec, self.record, self.marker, self.lock_path):
            try:
                os.unlink(path)
            except OSError:
                pass


def job_ended(config: Config, job: str, files: JobFiles) -> Optional[str]:
    """Why the job will not run, if it ended while the prolog waited; None if it may."""
    if files.ended_since(STARTED_WALL):
        return "the job ended while its prolog ran (its epilog has run)"
    try:
        info = job_info(config, job)
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return None  # Unknown: should it have ended, its epilog releases what is recorded.
    if info is None:
        return "Slurm no longer knows the job"
    if info["state"] not in ALIVE_STATES:
        return f"the job is {info['state']} (it ended while its prolog ran)"
    return None


def start_guard(config: Config, job: str, name: str, key: str, files: JobFiles,
                lifetime: float, log: Log) -> None:
    """Starts the prolog's guard: a process of its own session, out of the reach of the
    SIGKILL slurmscriptd sends the prolog's process group when the job is cancelled (which
    in Slurm 22.05 can kill the job's EpilogSlurmctld as it starts, too). It waits for the
    job's lock; if the prolog then left no record of its own, it was killed, perhaps with a
    request on its way to fleetd: the guard releases the job's allocations unless the job
    still runs."""
    try:
        pid = os.fork()
    except OSError as e:
        log(f"cannot start the prolog's guard: {e}")
        return
    if pid != 0:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        # Nothing of the prolog's: not its lock, nor the pipes slurmscriptd reads to EOF.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, 1024)
        guard = Log("prolog-guard", job, config.log_file)
        if not files.lock(lifetime):
            guard(f"the prolog still runs after {int(lifetime)}s; giving up")
            os._exit(0)
        record = files.read_record() or {}
        if record.get("run") == RUN:
            if record.get("outcome") == "gone":
                files.remove()
            os._exit(0)
        until = time.monotonic() + EPILOG_LOOKUP_WINDOW
        while True:
            info = job_info(config, job)
            if info is not None and info["state"] in ALIVE_STATES:
                guard("the prolog was killed; the job runs: its epilog releases")
                os._exit(0)
            ids = [a["id"] for a in job_allocations(config, name, key)]
            if ids or time.monotonic() >= until:
                break
            time.sleep(0.5)
        if ids:
            guard(f"the prolog was killed and the job is "
                  f"{info['state'] if info else 'gone'}: releasing {', '.join(ids)}")
        if all([release(config, a, guard) for a in ids]):
            files.remove()
    except BaseException as e:  # noqa: BLE001
        try:
            Log("prolog-guard", job, config.log_file)(f"guard failed: {type(e).__name__}: {e}")
        except BaseException:  # noqa: BLE001
            pass
    os._exit(0)


def prolog() -> int:
    text = os.environ.get("SPANK_FLEET_SPEC")
    if text is None:
        return 0  # Not a --fleet job: nothing to do, and quickly.
    job = os.environ.get("SLURM_JOB_ID", "?")
    # The environment of a --fleet job is the submitter's to set (libslurm takes any
    # spank_job_env): the path is shown, escaped, never written raw.
    source = printable(os.environ.get("SPANK_FLEET_SPEC_FILE") or "--fleet spec", 256)
    log = Log("prolog", job, None)
    config: Optional[Config] = None
    files: Optional[JobFiles] = None
    try:
        config = load_config()
        log = Log("prolog", job, config.log_file)
        if not job.isdigit():
            raise Refusal(f"SLURM_JOB_ID '{printable(job, 32)}' is not a job id")
        files = JobFiles(config, job)
        if not files.lock(60):
            raise Refusal(f"another FLEET hook of job {job} holds {files.lock_path} "
                          "after 60s")
        return run_prolog(config, job, text, source, log, files)
    except JobGone as e:
        log(f"job not started: {e}; what it had is released")
        if files is not None:
            try:  # Its guard removes the job's files (the epilog may have run already).
                files.write_record({"outcome": "gone"})
            except OSError:
                pass
        return 1
    except Refusal as e:
        reason = str(e)
    except Exception as e:  # noqa: BLE001 (a bug or a broken site must still hold the job)
        reason = f"prolog error: {type(e).__name__}: {e}"
    log(f"job not started: {reason}")
    if config is None:
        # No config: plain scontrol still holds the job, so that it is not requeued and run
        # again and again, and says why.
        config = Config("(built-in defaults)", {})
    if files is not None:
        try:
            files.write_record({"outcome": "not started", "reason": printable(reason)})
        except OSError:
            pass
    comment = printable(" ".join(f"{COMMENT_PREFIX} not started: {reason}".split()), 1000)
    set_admin_comment(config, job, comment, log)
    # Held, so that the requeue slurmctld makes of a failed PrologSlurmctld does not run this
    # again and again; `scontrol release` retries once the cause is fixed.
    hold(config, job, log)
    return 1


def run_prolog(config: Config, job: str, text: str, source: str, log: Log,
               files: JobFiles) -> int:
    import yaml
    spec = load_spec(text, source)
    nodes = expand_nodes(config, os.environ.get("SLURM_JOB_NODELIST", ""))
    if not nodes:
        raise Refusal("the job has no nodes (SLURM_JOB_NODELIST is empty)")
    hosts = [config.node_map.get(n, n) for n in nodes]
    info = job_info(config, job)
    if info is None:
        raise JobGone("Slurm no longer knows the job")
    account = os.environ.get("SLURM_JOB_ACCOUNT", "")
    if account == "(null)":
        account = ""
    tenant = tenant_for(config, spec if isinstance(spec, dict) else {}, account, source)
    filled = fill_spec(spec, nodes, hosts, source)
    restarts = os.environ.get("SLURM_JOB_RESTART_COUNT", "0")
    restarts = restarts if restarts.isdigit() else "0"
    name = f"slurm-job-{job}"
    key = job_key(job, info)
    # A requeued job is a new request: the first one's key names its released allocation.
    request_id = key if restarts == "0" else f"{key}.r{restarts}"
    # The lease must end: a job without a time limit, or with one beyond the longest lease,
    # would outlive it (or hold the devices for ever). Slurm's backfill shows an unlimited
    # job it started as 365 days.
    limit = time_limit_seconds(info["time_limit"])
    if limit is not None and limit >= 365 * 86400:
        limit = None
    longest = config.max_lease - config.lease_slack
    if limit is None:
        raise Refusal(f"the job has no time limit ({info['time_limit']}); a --fleet job needs "
                      f"one, since its FLEET lease (time limit plus lease_slack) must end: "
                      f"give --time of at most {slurm_duration(longest)}")
    if limit + config.lease_slack > config.max_lease:
        raise Refusal(f"time limit {info['time_limit']} plus lease_slack "
                      f"({int(config.lease_slack)}s) is longer than max_lease "
                      f"({int(config.max_lease)}s), the longest FLEET lease: give --time of "
                      f"at most {slurm_duration(longest)}")
    lease = limit + config.lease_slack
    # Slurm kills a PrologSlurmctld after PrologEpilogTimeout, which would leave the job
    # requeued without a hold or a reason: wait for READY only as long as fits.
    timeout = max(1, int(config.ready_timeout))
    slurm_timeout = prolog_timeout(config)
    if slurm_timeout is not None and timeout > slurm_timeout - 30:
        fitted = max(1, int(slurm_timeout) - 30)
        log(f"ready_timeout {timeout}s does not fit in PrologEpilogTimeout "
            f"{int(slurm_timeout)}s: waiting {fitted}s for READY")
        timeout = fitted
    filled.update({"tenant": tenant, "name": name, "request_id": request_id,
                   "lease": f"{int(lease)}s"})
    with open(files.spec, "w") as f:
        f.write(f"# From {json.dumps(source)} for Slurm job {job} on {','.join(nodes)}\n")
        yaml.safe_dump(filled, f, sort_keys=False, default_flow_style=None)
    start_guard(config, job, name, key, files, timeout + 120, log)
    log(f"requesting {name} (request_id {request_id}, tenant {tenant}, lease {int(lease)}s, "
        f"nodes {','.join(nodes)} -> hosts {','.join(hosts)}) from {files.spec}")

    try:
        run: Optional[subprocess.CompletedProcess] = fleetctl(
            config, "topology", "request", "-f", files.spec, "--wait", "--timeout",
            str(timeout), "-o", "json", timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        run = None
    if run is None or run.returncode != 0:
        why = (fleetctl_error(run) if run is not None
               else f"fleetctl did not return in {timeout + 30}s")
        # Admitted but not ready in time (or failed): nothing may stay behind for a job that
        # will not run. Nothing admitted: fleetd refused the request.
        admitted: List[str] = []
        try:
            admitted = [a["id"] for a in job_allocations(config, name, key)]
            for leftover in admitted:
                release(config, leftover, log)
        except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
            log(f"looking for a half-made {name} failed: {e}; its lease will release it")
        gone = job_ended(config, job, files)
        if gone:
            raise JobGone(gone)
        if admitted or run is None or "DEADLINE_EXCEEDED" in why:
            raise Refusal(f"{source}: allocation {','.join(admitted) or name} not READY "
                          f"within {timeout}s (released): {why}")
        raise Refusal(f"fleetd refused {source}: {why}")
    alloc_id = ""
    try:
        allocation = json.loads(run.stdout).get("allocation", {})
        got = (allocation.get("name"), (allocation.get("request") or {}).get("request_id"),
               allocation.get("tenant"))
        if got != (name, request_id, tenant):
            # Never released here: an allocation that is not this job's is someone else's.
            raise Refusal(f"fleetd answered {source} with allocation "
                          f"{printable(str(allocation.get('id')), 64)} (name "
                          f"{printable(str(got[0]), 64)}, request_id "
                          f"{printable(str(got[1]), 128)}, tenant {printable(str(got[2]), 64)}), "
                          f"not this job's {name} ({request_id}, tenant {tenant})")
        alloc_id = str(allocation.get("id") or "")
        if not alloc_id:
            raise Refusal(f"fleetctl printed no allocation id for {source}")
        # Recorded before anything else can fail: the epilog releases what is recorded.
        files.write_record({"outcome": "ready", "allocation": alloc_id, "name": name,
                            "request_id": request_id, "key": key})
        env = {"FLEET_ALLOCATION": alloc_id, "FLEET_TENANT": tenant}
        rank_env, rank_hosts = ranks_of(config, allocation)
        env.update(rank_env)
        foreign = foreign_members(config, allocation, rank_hosts, hosts)
        if foreign:
            raise Refusal(f"{source}: the allocation took devices of hosts that are not the "
                          f"job's ({', '.join(hosts)}): {', '.join(foreign)}; name only "
                          f"devices of the job's nodes, or pooled ones")
        bad = {k: v for k, v in env.items() if not SAFE_VALUE.match(v)}
        if bad:
            raise Refusal(f"fleetd's names cannot be passed as environment: {bad}")
        # A job cancelled while the prolog waited gets its epilog at once; the epilog may
        # have looked for the allocation before fleetd admitted it.
        gone = job_ended(config, job, files)
        if gone:
            raise JobGone(gone)
        comment = " ".join([COMMENT_READY] + [f"{k}={v}" for k, v in env.items()])
        if not set_admin_comment(config, job, comment, log):
            raise Refusal("could not store the allocation in the job's AdminComment")
    except BaseException:
        if alloc_id:
            release(config, alloc_id, log)
        else:
            try:
                for leftover in job_allocations(config, name, request_id):
                    release(config, leftover["id"], log)
            except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
                log(f"looking for {name} to release failed: {e}; its lease will release it")
        raise
    log(f"{alloc_id} ready in {time.monotonic() - STARTED:.2f}s: {comment}")
    return 0


def epilog() -> int:
    job = os.environ.get("SLURM_JOB_ID", "?")
    deadline = time.monotonic() + EPILOG_DEADLINE
    log = Log("epilog", job, None)
    try:
        config = load_config()
    except Exception as e:  # noqa: BLE001
        log(f"cannot release: {e}")
        return 1
    log = Log("epilog", job, config.log_file)
    if not job.isdigit():
        return 0
    try:
        files = JobFiles(config, job)
        record = files.read_record()
        if os.environ.get("SPANK_FLEET_SPEC") is None and record is None:
            return 0  # Not a --fleet job.
        # Tells a prolog still running that the job is over: it releases what it gets.
        with open(files.marker, "w"):
            pass
        locked = files.lock(EPILOG_LOCK_WAIT)
    except OSError as e:
        log(f"state_dir {config.state_dir}: {e}")
        files, record, locked = None, None, False
    if not locked:
        log("the prolog still runs: it releases what it gets once it sees the job ended")
    name = f"slurm-job-{job}"
    key = (record or {}).get("key")
    try:
        info = job_info(config, job)
        if info is not None:
            key = job_key(job, info)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        log(f"reading the job from Slurm failed: {e}")
    ids: List[str] = []
    if key:
        # A prolog that did not finish (killed as the job was cancelled) may have a request
        # on its way to fleetd: look again for a moment.
        finished = record is not None
        until = time.monotonic() + (0 if finished else EPILOG_LOOKUP_WINDOW)
        while True:
            try:
                ids = [a["id"] for a in job_allocations(config, name, str(key))]
                listed = True
            except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
                log(f"listing allocations named {name} failed: {e}")
                listed = False
            if ids or time.monotonic() >= until:
                break
            time.sleep(0.5)
        if not listed and record and record.get("allocation"):
            ids = [str(record["allocation"])]  # Checked by the prolog before it was recorded.
    else:
        log(f"cannot tell which allocations named {name} are this job's (no submit time); "
            "their leases will release them")
    ok = all([release(config, a, log, deadline) for a in ids])
    if ok and locked and files is not None:
        files.remove()
    return 0 if ok else 1


def task_prolog() -> int:
    """Prints `export NAME=value` lines, which slurmstepd puts in the task's environment."""
    job = os.environ.get("SLURM_JOB_ID")
    # FLEET_SPANK: spank_fleet marks the tasks of a --fleet job; SLURM_SPANK_FLEET_SPEC is
    # the control environment, for a site whose compute nodes lack the plugin.
    if not job or (os.environ.get("FLEET_SPANK") != "1"
                   and os.environ.get("SLURM_SPANK_FLEET_SPEC") is None):
        return 0  # Not a --fleet job: no lookup.
    try:
        run = subprocess.run([os.environ.get("FLEET_SCONTROL", "scontrol"), "show", "job", job],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        # The task runs all the same, without FLEET_*: failing it would fail the whole job
        # for a lookup; its script can test FLEET_ALLOCATION.
        print(f"print fleet: cannot read job {job}'s FLEET allocation: {e}")
        return 0
    comment = ""
    for line in run.stdout.splitlines():
        if line.strip().startswith("AdminComment="):
            comment = line.strip()[len("AdminComment="):]
    if not comment.startswith(COMMENT_READY):
        print(f"print fleet: no ready FLEET allocation for job {job} "
              f"(AdminComment: {comment or 'none'})")
        return 0
    for token in comment[len(COMMENT_READY):].split():
        name, _, value = token.partition("=")
        if SAFE_NAME.match(name) and SAFE_VALUE.match(value):
            print(f"export {name}={value}")
    return 0


HOOKS = {"prolog": prolog, "epilog": epilog, "task-prolog": task_prolog}
NAMES = {"fleet-prolog-slurmctld": "prolog", "fleet-epilog-slurmctld": "epilog",
         "fleet-task-prolog": "task-prolog"}


def main(argv: List[str]) -> int:
    hook = NAMES.get(os.path.basename(argv[0]))
    if hook is None and len(argv) > 1:
        hook = argv[1]
    if hook not in HOOKS:
        print(f"usage: {argv[0]} prolog|epilog|task-prolog (or install it as "
              f"{', '.join(NAMES)}), got {hook!r}", file=sys.stderr)
        return 2
    return HOOKS[hook]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
