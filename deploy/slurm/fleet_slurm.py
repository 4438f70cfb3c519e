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

import json
import os
import re
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

STARTED = time.monotonic()  # The prolog's log reports its whole time, Python's start included.
DEFAULT_CONFIG = "/etc/fleet/slurm.yaml"
COMMENT_READY = "fleet: ready"
COMMENT_PREFIX = "fleet:"
# What a value in the AdminComment (and so in `export NAME=value`) may hold: names of
# devices and hosts, ids, counts, comma lists. Anything else is not passed on.
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:,/@+-]*$")
SAFE_NAME = re.compile(r"^FLEET_[A-Z0-9_]+$")
RANK_ORDERS = {
    "RANK_ORDER_RING": "ring", "RANK_ORDER_CHAIN": "chain", "RANK_ORDER_TORUS": "torus",
    "RANK_ORDER_MEMBERS": "members",
}


class Refusal(Exception):
    """Why a job must not start; the message goes to AdminComment as it is."""


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
            "ready_timeout", "lease_slack", "unlimited_lease", "max_lease", "state_dir",
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
        self.tenant = data.get("tenant")
        self.account_tenants = data.get("account_tenants") or {}
        self.allow_spec_tenant = bool(data.get("allow_spec_tenant", False))
        self.ready_timeout = parse_duration(data.get("ready_timeout", "5m"), "ready_timeout")
        self.lease_slack = parse_duration(data.get("lease_slack", "10m"), "lease_slack")
        self.unlimited_lease = parse_duration(data.get("unlimited_lease", "24h"),
                                              "unlimited_lease")
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
    """Lines with a timestamp and the job to the configured file, and to stderr."""

    def __init__(self, hook: str, job: str, path: Optional[str]) -> None:
        self.prefix = f"{hook} job {job}"
        self.path = path

    def __call__(self, message: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.prefix}: {message}"
        print(line, file=sys.stderr, flush=True)
        if self.path:
            try:
                with open(self.path, "a") as f:
                    f.write(line + "\n")
            except OSError:
                pass


# ---------------------------------------------------------------------------------------
# Slurm


def scontrol(config: Config, *args: str, timeout: float = 30) -> str:
    run = subprocess.run([config.scontrol, *args], capture_output=True, text=True,
                         timeout=timeout, env=config.env())
    if run.returncode != 0:
        raise RuntimeError(f"scontrol {' '.join(args)}: {(run.stderr or run.stdout).strip()}")
    return run.stdout


def job_fields(config: Config, job: str) -> Dict[str, str]:
    """`scontrol show job` as NAME=VALUE; AdminComment and Comment up to the end of their
    line, since they may hold spaces."""
    text = scontrol(config, "show", "job", job)
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        for whole in ("AdminComment=", "Comment=", "Command=", "WorkDir="):
            if stripped.startswith(whole):
                fields[whole[:-1]] = stripped[len(whole):]
                break
        else:
            for token in stripped.split():
                if "=" in token:
                    name, value = token.split("=", 1)
                    fields.setdefault(name, value)
    return fields


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
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"setting AdminComment failed (attempt {attempt + 1}): {e}")
            time.sleep(0.2 * (attempt + 1))
    return False


def expand_nodes(config: Config, nodelist: str) -> List[str]:
    if not nodelist:
        return []
    return scontrol(config, "show", "hostnames", nodelist).split()


# ---------------------------------------------------------------------------------------
# The spec


def fill_spec(spec: Any, nodes: List[str], hosts: List[str], source: str) -> Any:
    """The user's spec made concrete for the job's nodes: an `attach` without `host` gets the
    first node's host (Slurm's batch host), one that names a node gets its host, and a
    `per_node:` entry of a member list becomes one counted entry per node, pinned to its
    host, in Slurm's node order."""
    if not isinstance(spec, dict):
        raise Refusal(f"{source}: the spec must be a mapping (tenant, topology or phases, ...), "
                      f"not {type(spec).__name__}")
    if "topology" not in spec and "phases" not in spec:
        raise Refusal(f"{source}: the spec needs a topology: or phases: key "
                      "(see deploy/examples/)")
    by_node = dict(zip(nodes, hosts))

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return [walk(item, f"{path}[{i}]") for i, item in enumerate(node)]
        if not isinstance(node, dict):
            return node
        out: Dict[str, Any] = {}
        for key, value in node.items():
            field = f"{path}.{key}" if path else str(key)
            if key == "attach" and isinstance(value, dict):
                value = dict(value)
                host = value.get("host")
                if host is None or host == "":
                    value["host"] = hosts[0]
                elif str(host) in by_node:
                    value["host"] = by_node[str(host)]
                elif str(host) not in hosts:
                    raise Refusal(f"{source}: {field}.host '{host}' is not one of the job's "
                                  f"nodes ({', '.join(nodes)}); leave it out to attach to "
                                  f"{nodes[0]}")
                out[key] = walk(value, field)
            elif key == "per_node":
                continue  # Expanded below, into `count`.
            else:
                out[key] = walk(value, field)
        if "per_node" in node:
            out["count"] = list(out.get("count") or []) + expand_per_node(
                node["per_node"], f"{path}.per_node" if path else "per_node", hosts, source)
        return out

    return walk(spec, "")


def expand_per_node(value: Any, field: str, hosts: List[str], source: str) -> List[dict]:
    entries = value if isinstance(value, list) else [value]
    counts: List[dict] = []
    for i, entry in enumerate(entries):
        where = f"{field}[{i}]" if isinstance(value, list) else field
        if not isinstance(entry, dict):
            raise Refusal(f"{source}: {where} must be a mapping like {{kind: cpu, count: 1}}")
        unknown = sorted(set(entry) - {"kind", "count"})
        if unknown:
            raise Refusal(f"{source}: {where}: unknown key(s) {', '.join(map(str, unknown))} "
                          "(per_node takes kind and count; the host is each node's)")
        if "kind" not in entry:
            raise Refusal(f"{source}: {where}.kind is missing (cpu, gpu, nvme, fpga, other)")
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise Refusal(f"{source}: {where}.count {count!r} must be a whole number of at "
                          "least 1")
    for host in hosts:
        for entry in entries:
            counts.append({"kind": entry["kind"], "count": entry.get("count", 1), "host": host})
    return counts


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


def live_allocations_named(config: Config, name: str) -> List[str]:
    run = fleetctl(config, "get", "allocations", "-o", "json")
    if run.returncode != 0:
        raise RuntimeError(f"listing allocations: {fleetctl_error(run)}")
    data = json.loads(run.stdout or "{}")
    return [a["id"] for a in data.get("allocations", [])
            if a.get("name") == name
            and a.get("state") not in ("ALLOCATION_STATE_RELEASED",
                                       "ALLOCATION_STATE_RELEASING")]


def release(config: Config, allocation: str, log: Log) -> bool:
    """Releases with retries and doubling backoff; True once it is released or gone."""
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
            time.sleep(delay)
            delay *= 2
    log(f"LEAK WARNING: {allocation} is not released; its lease will release it")
    return False


def ranks_of(config: Config, allocation: dict) -> Dict[str, str]:
    """The FLEET_* variables of the rank order: fleetctl topology ranks, or the member order
    where this fleetctl has no ranks verb."""
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
        return env
    if run.returncode == 2:  # This fleetctl has no `topology ranks`.
        members = allocation.get("members", [])
        return {"FLEET_RANKS": ",".join(members), "FLEET_RANK_ORDER": "members",
                "FLEET_WORLD_SIZE": str(len(members))}
    raise Refusal(f"fleetd refused the rank order of {alloc_id}: {fleetctl_error(run)}")


# ---------------------------------------------------------------------------------------
# The hooks


def prolog() -> int:
    text = os.environ.get("SPANK_FLEET_SPEC")
    if text is None:
        return 0  # Not a --fleet job: nothing to do, and quickly.
    job = os.environ.get("SLURM_JOB_ID", "?")
    source = os.environ.get("SPANK_FLEET_SPEC_FILE") or "--fleet spec"
    log = Log("prolog", job, None)
    config: Optional[Config] = None
    try:
        config = load_config()
        log = Log("prolog", job, config.log_file)
        return run_prolog(config, job, text, source, log)
    except Refusal as e:
        reason = str(e)
    except Exception as e:  # A bug or a broken site must still hold the job, saying why.
        reason = f"prolog error: {type(e).__name__}: {e}"
    log(f"job not started: {reason}")
    if config is not None:
        comment = f"{COMMENT_PREFIX} not started: {reason}"
        set_admin_comment(config, job, " ".join(comment.split())[:1000], log)
        try:
            # Held, so that the requeue slurmctld makes of a failed PrologSlurmctld does not
            # run this again and again; `scontrol release` retries once the cause is fixed.
            scontrol(config, "hold", job)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"holding the job failed: {e}")
    return 1


def run_prolog(config: Config, job: str, text: str, source: str, log: Log) -> int:
    import yaml
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise Refusal(f"{source}: not YAML: {' '.join(str(e).split())}") from e
    nodes = expand_nodes(config, os.environ.get("SLURM_JOB_NODELIST", ""))
    if not nodes:
        raise Refusal("the job has no nodes (SLURM_JOB_NODELIST is empty)")
    hosts = [config.node_map.get(n, n) for n in nodes]
    fields = job_fields(config, job)
    account = os.environ.get("SLURM_JOB_ACCOUNT", "")
    if account == "(null)":
        account = ""
    tenant = tenant_for(config, spec if isinstance(spec, dict) else {}, account, source)
    filled = fill_spec(spec, nodes, hosts, source)
    restarts = os.environ.get("SLURM_JOB_RESTART_COUNT") or fields.get("Restarts", "0")
    name = f"slurm-job-{job}"
    # A requeued job is a new request: the first one's key names its released allocation.
    request_id = name if restarts in ("", "0") else f"{name}.{restarts}"
    limit = time_limit_seconds(fields.get("TimeLimit", ""))
    # Slurm's backfill shows an unlimited job it started as 365 days.
    if limit is not None and limit >= 365 * 86400:
        limit = None
    lease = (limit + config.lease_slack) if limit is not None else config.unlimited_lease
    if lease > config.max_lease:
        log(f"time limit {fields.get('TimeLimit')} is longer than max_lease "
            f"{int(config.max_lease)}s: the lease ends first unless renewed "
            f"(fleetctl topology keepalive)")
        lease = config.max_lease
    filled.update({"tenant": tenant, "name": name, "request_id": request_id,
                   "lease": f"{int(lease)}s"})
    os.makedirs(config.state_dir, exist_ok=True)
    spec_path = os.path.join(config.state_dir, f"job-{job}.yaml")
    with open(spec_path, "w") as f:
        f.write(f"# From {source} for Slurm job {job} on {','.join(nodes)}\n")
        yaml.safe_dump(filled, f, sort_keys=False, default_flow_style=None)
    log(f"requesting {name} (request_id {request_id}, tenant {tenant}, lease {int(lease)}s, "
        f"nodes {','.join(nodes)} -> hosts {','.join(hosts)}) from {spec_path}")

    timeout = max(1, int(config.ready_timeout))
    try:
        run = fleetctl(config, "topology", "request", "-f", spec_path, "--wait", "--timeout",
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
            admitted = live_allocations_named(config, name)
            for leftover in admitted:
                release(config, leftover, log)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
            log(f"looking for a half-made {name} failed: {e}; its lease will release it")
        if admitted or run is None:
            raise Refusal(f"{source}: allocation {','.join(admitted) or name} not READY "
                          f"within {timeout}s (released): {why}")
        raise Refusal(f"fleetd refused {source}: {why}")
    allocation = json.loads(run.stdout).get("allocation", {})
    alloc_id = allocation.get("id", "")
    if not alloc_id:
        raise Refusal(f"fleetctl printed no allocation id for {source}")
    with open(os.path.join(config.state_dir, f"job-{job}.json"), "w") as f:
        json.dump({"allocation": alloc_id, "name": name, "request_id": request_id}, f)
    try:
        env = {"FLEET_ALLOCATION": alloc_id, "FLEET_TENANT": tenant}
        env.update(ranks_of(config, allocation))
        bad = {k: v for k, v in env.items() if not SAFE_VALUE.match(v)}
        if bad:
            raise Refusal(f"fleetd's names cannot be passed as environment: {bad}")
        comment = " ".join([COMMENT_READY] + [f"{k}={v}" for k, v in env.items()])
        if not set_admin_comment(config, job, comment, log):
            raise Refusal("could not store the allocation in the job's AdminComment")
    except BaseException:
        release(config, alloc_id, log)
        raise
    log(f"{alloc_id} ready in {time.monotonic() - STARTED:.2f}s: {comment}")
    return 0


def epilog() -> int:
    job = os.environ.get("SLURM_JOB_ID", "?")
    log = Log("epilog", job, None)
    try:
        config = load_config()
    except Refusal as e:
        log(f"cannot release: {e}")
        return 1
    log = Log("epilog", job, config.log_file)
    state = os.path.join(config.state_dir, f"job-{job}.json")
    ids: List[str] = []
    try:
        with open(state) as f:
            ids.append(json.load(f)["allocation"])
    except (OSError, ValueError, KeyError):
        pass
    # Also by name: a prolog killed between admission and writing its state leaves only that.
    if os.environ.get("SPANK_FLEET_SPEC") is not None or ids:
        try:
            ids += [a for a in live_allocations_named(config, f"slurm-job-{job}")
                    if a not in ids]
        except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
            log(f"listing allocations named slurm-job-{job} failed: {e}")
    if not ids:
        return 0
    ok = all([release(config, a, log) for a in ids])
    if ok:
        try:
            os.unlink(state)
        except OSError:
            pass
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
