#!/usr/bin/python3
"""fleet_scale_bench: what one fleetd costs as the site grows (docs/scale.md).

For each S of --clusters (default 1,4,16), on real processes: generates the site of S scale
clusters (deploy/inventory/generate.py), starts it with fleet-demo-site (S polatis-emu
processes with their trunks joined; 32*S emulated agents, 64 to a process above 64 of them,
else one each; the throwaway PKI, mutual TLS on), then one `fleetd --config` against it,
and measures:

  start       fleetd start -> serving (inventory applied, every switch connected), and
              -> every agent registered
  idle        fleetd's RSS and CPU (switch monitor every 2 s, heartbeats at fleetd's default:
              every 1 s, longer above 500 agents) and the agent processes' CPU, over
              --idle-seconds with nothing asked, after --settle-seconds; the heartbeat
              interval fleetd settled on, and the agents it dropped for missed heartbeats
  re-apply    `fleetctl apply` of the same site: wall time, and that it changed nothing
  jobs        request -> READY (fleetctl --wait, wall) and the allocation's own plan and
              program stages, for a ring of 8 GPUs on one switch and one over 4 switches
  20 at once  20 rings of 3 GPUs requested at once, spread over the switches: wall until all
              are READY, and each one's request -> READY
  plan        the plan stage of rings of 64 GPUs (one switch), 512 (8 switches) and 1,024
              (16 switches), where the site has them
  full        one ring of all 64 GPUs on every switch held: fleetd's RSS, cross-connects held
  restart     SIGTERM, fleetd started again: start -> serving, -> every agent back, and the
              cross-connects the switches changed meanwhile (the emulators' own counters:
              a restart that agrees with the switches changes none)
  db          the state directory's size at the end

Prints one table per run (a column per S), writes the figures as JSON (--json), and draws
each whole-site cost against S (--plot FILE.png, with matplotlib). Never fails on a figure:
exits 1 when something cannot be started or a step fails outright, after the table of the
sites that ran, the failing one's column holding what it measured before (larger ones are
not tried).
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = "@CMAKE_SOURCE_DIR@"  # Set when the build copies this script next to fleetd.
if SOURCE_DIR.startswith("@"):
    SOURCE_DIR = os.path.normpath(os.path.join(HERE, "..", ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")
GPUS_PER_CLUSTER = 64
AGENTS_PER_CLUSTER = 32


class Failed(Exception):
    pass


class Child:
    """A process whose stdout is read line by line on a thread; stderr to a log file."""

    def __init__(self, argv, log_path):
        self.log_path = log_path
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log_path, "w"),
                                     text=True, start_new_session=True)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)
            self.cv.notify_all()

    def wait_line(self, prefix, timeout, nth=1):
        """The rest of the nth stdout line starting with prefix."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                found = [l[len(prefix):] for l in self.lines if l and l.startswith(prefix)]
                if len(found) >= nth:
                    return found[nth - 1]
                if None in self.lines:
                    raise Failed(f"{self.proc.args[0]} exited before printing '{prefix}' "
                                 f"(log {self.log_path})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failed(f"{self.proc.args[0]} printed no '{prefix}' in {timeout} s")
                self.cv.wait(left)

    def all_lines(self, prefix):
        with self.cv:
            return [l[len(prefix):] for l in self.lines if l and l.startswith(prefix)]

    def stop(self, grace=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def descendants(pid, name):
    """Pids below `pid` whose command name starts with `name`."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append((int(entry), comm))
    out, unvisited = [], [pid]
    while unvisited:
        for child, comm in children.get(unvisited.pop(), []):
            unvisited.append(child)
            if comm.startswith(name):
                out.append(child)
    return out


def dir_mib(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total / (1024.0 * 1024.0)


def torus_shape(s):
    """Rows x columns of the generator's torus (as square as S allows)."""
    rows = int(s ** 0.5)
    while s % rows:
        rows -= 1
    return rows, s // rows


def cluster_walk(s, n):
    """n cluster numbers (1-based) in an order where each is a torus neighbour of the next,
    the last of the first too: a 2x2 block for 4, else whole rows, snaking."""
    rows, cols = torus_shape(s)
    if n == 1:
        return [1]
    if n == 4 and rows >= 2 and cols >= 2:
        return [1, 2, cols + 2, cols + 1]
    if n % cols or n // cols > rows:
        raise Failed(f"no walk of {n} clusters on a {rows}x{cols} torus")
    walk = []
    for r in range(n // cols):
        row = [r * cols + c + 1 for c in range(cols)]
        walk += row if r % 2 == 0 else row[::-1]
    if n // cols > 2 and (n // cols) % 2:
        raise Failed(f"a snake over {n // cols} rows does not close")
    return walk


def gpus(cluster, first, count):
    return [f"c{cluster:02d}-gpu{g}" for g in range(first, first + count)]


class Site:
    """A generated site run by fleet-demo-site, and one fleetd against it."""

    def __init__(self, args, s, work):
        self.args, self.s, self.work = args, s, work
        self.bin = args.bin_dir
        self.site_file = os.path.join(work, "site.yaml")
        subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "deploy/inventory/generate.py"),
                        "--clusters", str(s), "--output", self.site_file], check=True)
        started = time.monotonic()
        self.site = Child([os.path.join(self.bin, "fleet-demo-site"), "--state-dir",
                           os.path.join(work, "site"), "--site", self.site_file,
                           "--etcd-members", "0", "--replicas", "1",
                           "--switch-ms", str(args.switch_ms),
                           "--training-ms", str(args.training_ms),
                           "--monitor-interval-ms", str(args.agent_monitor_ms)],
                          os.path.join(work, "fleet-demo-site.log"))
        try:
            self.site.wait_line("ready", 60 + 2 * s * AGENTS_PER_CLUSTER / 10)
        except Failed:
            self.site.stop()
            raise
        self.site_start = time.monotonic() - started
        self.config = self.site.wait_line("replica: ", 1).split(" ", 1)[1]
        self.fleetctl_config = self.site.wait_line("fleetctl-config: ", 1)
        self.inventory = os.path.join(work, "site", "inventory.yaml")
        self.rests = [line.split(" rest ")[1] for line in self.site.all_lines("switch: ")]
        self.fleetd = None
        self.runs = 0

    def start_fleetd(self):
        """Starts fleetd; returns (start -> serving, start -> every agent registered)."""
        self.runs += 1
        started = time.monotonic()
        self.fleetd = Child([os.path.join(self.bin, "fleetd"), "--config", self.config],
                            os.path.join(self.work, f"fleetd-{self.runs}.log"))
        self.fleetd.wait_line("grpc: ", 600)
        serving = time.monotonic() - started
        want = self.s * AGENTS_PER_CLUSTER
        deadline = time.monotonic() + 600
        while self.connected_agents() < want:
            if time.monotonic() > deadline:
                raise Failed(f"{self.connected_agents()} of {want} agents registered in 600 s")
            time.sleep(0.2)
        return serving, time.monotonic() - started

    def stop_fleetd(self):
        self.fleetd.stop()

    def stop(self):
        if self.fleetd:
            self.fleetd.stop()
        self.site.stop(grace=120)

    def fleetctl(self, *argv, check=True):
        done = subprocess.run([os.path.join(self.bin, "fleetctl"), "--config",
                               self.fleetctl_config, "--timeout", "300", *argv],
                              capture_output=True, text=True)
        if check and done.returncode != 0:
            raise Failed(f"fleetctl {' '.join(argv)}: {done.stderr.strip()}")
        return done

    def connected_agents(self):
        done = self.fleetctl("get", "agents", "-o", "json", check=False)
        if done.returncode != 0:
            return 0
        return sum(1 for a in json.loads(done.stdout).get("agents", []) if a.get("connected"))

    def request_ring(self, members, name):
        """Requests a ring, waits until READY; returns (wall s, allocation)."""
        spec = os.path.join(self.work, f"{name}.yaml")
        with open(spec, "w") as f:
            f.write("tenant: demo\ntopology:\n  template:\n    kind: ring_unidirectional\n"
                    f"    members: [{', '.join(members)}]\n")
        started = time.monotonic()
        done = self.fleetctl("topology", "request", "-f", spec, "--wait", "-o", "json")
        wall = time.monotonic() - started
        allocation = json.loads(done.stdout)["allocation"]
        if allocation.get("state") != "ALLOCATION_STATE_READY":
            raise Failed(f"{name}: {allocation.get('state')}: {allocation.get('reason')}")
        return wall, allocation

    def release(self, allocation):
        self.fleetctl("topology", "release", allocation["id"], "--wait")

    def counters(self):
        """Sum over the emulators of their counters."""
        total = {}
        for rest in self.rests:
            with urllib.request.urlopen(f"http://{rest}/sim/v1/counters", timeout=30) as r:
                for key, value in json.loads(r.read()).items():
                    total[key] = total.get(key, 0) + value
        return total


def parse_time(text):
    """Seconds since the epoch of an RFC 3339 timestamp as protobuf's JSON writes it."""
    day, clock = text.rstrip("Z").split("T")
    whole, _, fraction = clock.partition(".")
    moment = datetime.datetime.fromisoformat(f"{day}T{whole}+00:00").timestamp()
    return moment + (float("0." + fraction) if fraction else 0.0)


def fleetd_span_ms(allocation):
    """From the first stage's start to the last one's end: request -> READY inside fleetd,
    without fleetctl's own start and connection."""
    spans = []
    for t in allocation.get("stage_timings", []):
        start = parse_time(t["started"])
        spans.append((start, start + float(t.get("duration", "0s").rstrip("s"))))
    if not spans:
        return None
    return (max(e for _, e in spans) - min(b for b, _ in spans)) * 1000.0


def stage_ms(allocation, stage):
    for t in allocation.get("stageTimings", allocation.get("stage_timings", [])):
        if t.get("stage") == stage:
            return float(t.get("duration", "0s").rstrip("s")) * 1000.0
    return None


def metric(site, name):
    """A metric without labels from fleetd's /metrics; None when it is not there."""
    address = site.fleetd.wait_line("metrics: ", 1)
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def dropped_agents(site):
    """How many times this fleetd dropped an agent for missed heartbeats."""
    with open(site.fleetd.log_path) as log:
        return sum("heartbeats; dropped it" in line for line in log)


def idle_cpu(site, seconds):
    """fleetd's and the agents' CPU (% of one core) and fleetd's RSS over `seconds` idle."""
    agents = descendants(site.site.proc.pid, "fleet-onic-agen")
    fleetd = site.fleetd.proc.pid
    before = (cpu_seconds(fleetd), sum(cpu_seconds(p) for p in agents), time.monotonic())
    time.sleep(seconds)
    after = (cpu_seconds(fleetd), sum(cpu_seconds(p) for p in agents), time.monotonic())
    span = after[2] - before[2]
    return (100.0 * (after[0] - before[0]) / span, 100.0 * (after[1] - before[1]) / span,
            rss_mib(fleetd), len(agents))


def run_one(args, s, r):
    """Measures site S into `r`, which keeps what was measured when a later step fails."""
    work = tempfile.mkdtemp(prefix=f"fleet-scale-{s}.", dir=args.work_dir)
    site = Site(args, s, work)  # Stops what it started when it cannot start.
    try:
        r["site_start_s"] = site.site_start
        r["serving_s"], r["agents_in_s"] = site.start_fleetd()
        time.sleep(args.settle_seconds)  # The last registrations' work and monitor passes.
        r["fleetd_cpu_idle_pct"], r["agents_cpu_idle_pct"], r["rss_idle_mib"], r[
            "agent_processes"] = idle_cpu(site, args.idle_seconds)
        r["heartbeat_interval_s"] = metric(site, "fleet_agent_heartbeat_interval_seconds")
        r["agents_dropped"] = dropped_agents(site)

        started = time.monotonic()
        out = site.fleetctl("apply", "-f", site.inventory).stdout
        r["reapply_s"] = time.monotonic() - started
        r["reapply_changed_nothing"] = "created 0, updated 0," in out

        wall, a = site.request_ring(gpus(1, 1, 8), "one-switch")
        r["one_switch_ready_ms"], r["one_switch_program_ms"] = wall * 1000, stage_ms(a, "program")
        r["one_switch_fleetd_ms"] = fleetd_span_ms(a)
        site.release(a)
        if s >= 4:
            members = []
            for c in cluster_walk(s, 4):
                members += gpus(c, 9, 2)
            wall, a = site.request_ring(members, "four-switch")
            r["four_switch_ready_ms"] = wall * 1000
            r["four_switch_program_ms"] = stage_ms(a, "program")
            r["four_switch_fleetd_ms"] = fleetd_span_ms(a)
            site.release(a)

        # 20 jobs at once, job j on cluster j mod S, three GPUs each.
        jobs = [gpus(j % s + 1, 1 + 3 * (j // s), 3) for j in range(20)]
        results = [None] * len(jobs)

        def one(j):
            try:
                results[j] = site.request_ring(jobs[j], f"job-{j}")
            except Failed as e:
                results[j] = e
        threads = [threading.Thread(target=one, args=(j,)) for j in range(len(jobs))]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        r["twenty_wall_ms"] = (time.monotonic() - started) * 1000
        failed = [x for x in results if isinstance(x, Exception)]
        if failed:
            raise Failed(f"20 at once: {failed[0]}")
        walls = sorted(x[0] * 1000 for x in results)
        r["twenty_median_ms"], r["twenty_max_ms"] = statistics.median(walls), walls[-1]
        inside = sorted(fleetd_span_ms(x[1]) or 0.0 for x in results)
        r["twenty_fleetd_median_ms"], r["twenty_fleetd_max_ms"] = statistics.median(inside), inside[-1]
        for _, a in results:
            site.release(a)

        for n in (64, 512, 1024):
            clusters = n // GPUS_PER_CLUSTER
            try:
                walk = cluster_walk(s, clusters) if clusters <= s else None
            except Failed:
                walk = None
            if walk is None:
                continue
            members = []
            for c in walk:
                members += gpus(c, 1, GPUS_PER_CLUSTER)
            wall, a = site.request_ring(members, f"ring-{n}")
            r[f"plan_{n}_ms"] = stage_ms(a, "plan")
            r[f"ring_{n}_ready_ms"] = wall * 1000
            site.release(a)

        # Every switch holding a ring of all its GPUs, then a restart.
        held = []
        for c in range(1, s + 1):
            held.append(site.request_ring(gpus(c, 1, GPUS_PER_CLUSTER), f"full-{c}")[1])
        r["rss_full_mib"] = rss_mib(site.fleetd.proc.pid)
        before = site.counters()
        r["cross_connects_held"] = before["cross_connects"]
        site.stop_fleetd()
        r["restart_serving_s"], r["restart_agents_in_s"] = site.start_fleetd()
        after = site.counters()
        r["restart_changed"] = after["cross_connects_changed"] - before["cross_connects_changed"]
        for a in held:
            site.release(a)
        r["db_mib"] = dir_mib(os.path.join(work, "site", "replica-1"))
    finally:
        site.stop()
    return r


ROWS = [
    ("agents", "agents (processes)", lambda r: f"{r['agents']} ({r.get('agent_processes', '?')})"),
    ("site_start_s", "site up (emulators, PKI, agents), s", "{:.1f}"),
    ("serving_s", "fleetd start -> serving, s", "{:.2f}"),
    ("agents_in_s", "fleetd start -> every agent registered, s", "{:.2f}"),
    ("rss_idle_mib", "fleetd RSS idle, MiB", "{:.0f}"),
    ("fleetd_cpu_idle_pct", "fleetd CPU idle (monitor, heartbeats), % core", "{:.1f}"),
    ("agents_cpu_idle_pct", "agents' CPU idle, % core", "{:.1f}"),
    ("heartbeat_interval_s", "heartbeat interval with these agents, s", "{:.1f}"),
    ("agents_dropped", "agents dropped for missed heartbeats (start, idle)", "{}"),
    ("reapply_s", "re-apply same inventory, s", "{:.2f}"),
    ("reapply_changed_nothing", "re-apply changed nothing", "{}"),
    ("one_switch_ready_ms", "ring of 8, 1 switch: request -> READY, ms", "{:.0f}"),
    ("one_switch_fleetd_ms", "  inside fleetd (first stage -> READY), ms", "{:.0f}"),
    ("one_switch_program_ms", "  its program stage, ms", "{:.1f}"),
    ("four_switch_ready_ms", "ring of 8, 4 switches: request -> READY, ms", "{:.0f}"),
    ("four_switch_fleetd_ms", "  inside fleetd (first stage -> READY), ms", "{:.0f}"),
    ("four_switch_program_ms", "  its program stage, ms", "{:.1f}"),
    ("twenty_wall_ms", "20 rings at once: all READY, ms", "{:.0f}"),
    ("twenty_median_ms", "  each, fleetctl's wall: median, ms", "{:.0f}"),
    ("twenty_max_ms", "  each, fleetctl's wall: max, ms", "{:.0f}"),
    ("twenty_fleetd_median_ms", "  each, inside fleetd: median, ms", "{:.0f}"),
    ("twenty_fleetd_max_ms", "  each, inside fleetd: max, ms", "{:.0f}"),
    ("plan_64_ms", "plan: ring of 64 (1 switch), ms", "{:.1f}"),
    ("plan_512_ms", "plan: ring of 512 (8 switches), ms", "{:.1f}"),
    ("plan_1024_ms", "plan: ring of 1,024 (16 switches), ms", "{:.1f}"),
    ("ring_1024_ready_ms", "ring of 1,024: request -> READY, ms", "{:.0f}"),
    ("rss_full_mib", "fleetd RSS, every switch holding 64 circuits, MiB", "{:.0f}"),
    ("cross_connects_held", "cross-connects held", "{}"),
    ("restart_serving_s", "restart: start -> serving, s", "{:.2f}"),
    ("restart_agents_in_s", "restart: start -> every agent back, s", "{:.2f}"),
    ("restart_changed", "restart: cross-connects changed", "{}"),
    ("db_mib", "state directory, MiB", "{:.2f}"),
]


def print_table(results, out):
    width = max(len(label) for _, label, _ in ROWS)
    out.write(" " * width + "".join(f"  S = {r['S']:<6}" for r in results) + "\n")
    for key, label, fmt in ROWS:
        cells = []
        for r in results:
            if callable(fmt):
                cells.append(fmt(r))
            elif r.get(key) is None:
                cells.append("-")
            else:
                cells.append(fmt.format(r[key]))
        out.write(label.ljust(width) + "".join(f"  {c:<10}" for c in cells) + "\n")


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: python3-matplotlib is not installed (apt-get install python3-matplotlib)")
        return
    xs = [r["S"] for r in results]
    panels = [
        ("start -> serving (s)", ["serving_s", "restart_serving_s"], ["first start", "restart"]),
        ("every agent registered (s)", ["agents_in_s", "restart_agents_in_s"],
         ["first start", "restart"]),
        ("fleetd RSS (MiB)", ["rss_idle_mib", "rss_full_mib"], ["idle", "64 circuits/switch"]),
        ("CPU idle (% of a core)", ["fleetd_cpu_idle_pct", "agents_cpu_idle_pct"],
         ["fleetd", "agents"]),
        ("re-apply (s)", ["reapply_s"], ["same inventory"]),
        ("request -> READY inside fleetd (ms)", ["one_switch_fleetd_ms", "twenty_fleetd_median_ms"],
         ["ring of 8, 1 switch", "20 at once, median"]),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (title, keys, labels) in zip(axes.flat, panels):
        for key, label in zip(keys, labels):
            pts = [(r["S"], r[key]) for r in results if r.get(key) is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_title(title)
        ax.set_xlabel("switches (S)")
        ax.set_xlim(left=0)  # A linear axis: a cost linear in S is a straight line.
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("fleet_scale_bench: one fleetd, S scale clusters (32 agents, 64 GPUs each)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"plot: {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", default="1,4,16", help="the S to run, comma-separated")
    parser.add_argument("--bin-dir", default=HERE, help="where fleetd and the others are")
    parser.add_argument("--work-dir", default=None, help="where each site's directory goes")
    parser.add_argument("--switch-ms", type=int, default=25)
    parser.add_argument("--training-ms", type=int, default=100)
    parser.add_argument("--agent-monitor-ms", type=int, default=1000,
                        help="how often the emulated agents read their up ports; all S agents "
                             "share this machine's cores, real ones each have a host")
    parser.add_argument("--idle-seconds", type=float, default=10)
    parser.add_argument("--settle-seconds", type=float, default=5,
                        help="wait after every agent registered, before the idle figures")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--plot", help="draw the curves into this PNG")
    args = parser.parse_args()
    results, failed = [], None
    for s in (int(x) for x in args.clusters.split(",")):
        print(f"== S = {s}", flush=True)
        r = {"S": s, "agents": s * AGENTS_PER_CLUSTER}
        try:
            run_one(args, s, r)
        except (Failed, subprocess.CalledProcessError, OSError) as e:
            # What was measured before is shown (the rest "-"); larger sites are not tried.
            failed = f"S = {s}: {e}"
            r["failed"] = str(e)
            print(f"fleet_scale_bench: {failed}", file=sys.stderr)
        results.append(r)
        print(json.dumps(r), flush=True)
        if failed:
            break
    print(f"\nfleet_scale_bench: switch {args.switch_ms} ms, training {args.training_ms} ms, "
          f"agents read their ports every {args.agent_monitor_ms} ms, {os.cpu_count()} cores")
    print_table(results, sys.stdout)
    if failed:
        print(f"S = {results[-1]['S']} stopped: {results[-1]['failed']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.plot:
        plot(results, args.plot)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
