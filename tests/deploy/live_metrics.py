#!/usr/bin/env python3
"""The metrics of a running `fleetd --demo` (fleetd and its seven emulated agents) against
the tools and files that consume them. Run by ctest (tests/deploy/CMakeLists.txt); each
subcommand is one test, on ports chosen at run time, polling with deadlines:

  promtool    `promtool check metrics` on fleetd's and an agent's live /metrics after a ring
              became READY: no lint problem.
  deploy      every series the Grafana dashboard and the alerting rules read is in the live
              scrape of fleetd or an agent, after allocations, a release, a reconciliation
              and a reconfiguration the switch refused (its first switch command error).
  prometheus  a real Prometheus server scrapes fleetd and the GPU pool's agent while three
              rings are requested and released with fleetctl; its query API returns the
              expected request, reconfiguration, stage, release, circuit and agent values.

Exit codes: 0 passed, 1 failed (every problem is printed), 77 skipped because promtool or
prometheus (Debian's prometheus package) is not installed.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import check_deploy

SKIP = 77
AGENTS = 7
GPU_POOL = "gpu-pool-1"  # The chassis of the ring's eight GPUs: its agent retrains them.
STAGES = ("plan", "persist", "quiesce", "program", "verify", "retrain")
SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class Failed(Exception):
    pass


def eventually(condition, timeout=20.0):
    """Polls `condition` until it returns a true value (returned) or `timeout` passes (None)."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def http(url, method="GET", body=None, timeout=10.0):
    """(status, body) of one HTTP request; status 0 when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


def parse_samples(text):
    """[(name, {label: value}, value)] of a text exposition."""
    samples = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and not line.startswith("#"):
            samples.append((m.group(1), dict(LABEL.findall(m.group(2) or "")),
                            float(m.group(3))))
    return samples


def value_of(samples, name, **labels):
    """The value of the one sample `name` with (at least) `labels`, or None."""
    for sample_name, sample_labels, value in samples:
        if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items()):
            return value
    return None


def tail(path, lines=40):
    """The last lines of a log file, for failure messages."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def terminate(proc):
    """SIGTERM and wait (SIGKILL after 30 s); returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class Demo:
    """`fleetd --demo` on ports chosen at run time, the addresses it printed, and fleetctl."""

    def __init__(self, args, workdir):
        self.args = args
        self.state = os.path.join(workdir, "state")
        self.stderr_path = os.path.join(workdir, "fleetd.stderr")
        self.lines = []
        self.cv = threading.Condition()
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                # No switch monitor: its reads would take the refusal injected for a request.
                [args.fleetd, "--insecure", "--demo", "--state-dir", self.state, "--grpc-port", "0",
                 "--metrics-port", "0", "--agent-heartbeat-ms", "100",
                 "--monitor-interval-ms", "0"],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, text=True)
        # Drained while fleetd runs, so it never blocks on a full pipe.
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.grpc = self.line("grpc: ")
        self.metrics = self.line("metrics: ")
        self.rest = self.line("rest: ")
        self.line("state: ")
        # agent-metrics: HOST:PORT PLACE, one per agent, printed after state:.
        if not self._wait(lambda: len(self._prefixed("agent-metrics: ")) >= AGENTS, 10):
            raise Failed(f"fleetd printed fewer than {AGENTS} agent-metrics lines:\n"
                         + "\n".join(self.lines))
        self.agents = {}
        for line in self._prefixed("agent-metrics: "):
            address, place = line.split()
            self.agents[place] = address
        if GPU_POOL not in self.agents:
            raise Failed(f"no agent-metrics line for {GPU_POOL}: {sorted(self.agents)}")

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def _prefixed(self, prefix):
        return [l[len(prefix):].strip() for l in self.lines if l.startswith(prefix)]

    def _wait(self, condition, timeout):
        deadline = time.monotonic() + timeout
        with self.cv:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return condition()
                self.cv.wait(min(left, 0.5))
            return True

    def line(self, prefix, timeout=30):
        if not self._wait(lambda: self._prefixed(prefix), timeout):
            raise Failed(f"fleetd printed no {prefix!r} line in {timeout}s (exit "
                         f"{self.proc.poll()}):\n{self.stderr_tail()}")
        return self._prefixed(prefix)[0]

    def scrape(self, address):
        status, body = http(f"http://{address}/metrics")
        if status != 200:
            raise Failed(f"GET http://{address}/metrics: status {status}")
        return body

    def wait_for_agents(self):
        """Until all agents have a control stream, so links train at the first try."""
        def connected():
            return value_of(parse_samples(self.scrape(self.metrics)),
                            "fleet_agents_connected") == AGENTS
        if not eventually(connected, 30):
            raise Failed(f"fleet_agents_connected never reached {AGENTS}:\n"
                         f"{self.stderr_tail()}")

    def fleetctl(self, *argv, ok=True):
        result = subprocess.run([self.args.fleetctl, "--insecure", "--server", self.grpc] + list(argv),
                                capture_output=True, text=True, timeout=60)
        if ok and result.returncode != 0:
            raise Failed(f"fleetctl {' '.join(argv)}: exit {result.returncode}\n"
                         f"{result.stdout}{result.stderr}")
        return result

    def request_ring(self, ok=True):
        """Requests the ring of eight GPUs and waits for it; returns (allocation id, result)."""
        result = self.fleetctl("topology", "request", "-f", self.args.ring, "--wait",
                               "-o", "json", ok=ok)
        if result.returncode != 0:
            return None, result
        try:
            allocation = json.loads(result.stdout)
        except json.JSONDecodeError:
            raise Failed(f"fleetctl topology request -o json printed no JSON:\n"
                         f"{result.stdout}{result.stderr}")
        allocation = allocation.get("allocation", allocation)
        if ok and "READY" not in allocation.get("state", ""):
            raise Failed(f"the ring is not READY: {result.stdout}")
        return allocation.get("id"), result

    def release(self, allocation_id):
        self.fleetctl("topology", "release", allocation_id, "--wait")

    def switch_faults(self, faults):
        """Sets (None: clears) the emulated switch's faults through its /sim/v1 side-channel."""
        url = f"http://{self.rest}/sim/v1/faults"
        status, body = http(url, "PUT", faults) if faults else http(url, "DELETE")
        if status // 100 != 2:
            raise Failed(f"{url}: status {status}: {body}")

    def stderr_tail(self):
        return tail(self.stderr_path)

    def stop(self):
        terminate(self.proc)
        self.reader.join(5)


def run_with_demo(args, body):
    """Runs body(demo, workdir) against a fresh demo; prints fleetd's stderr on failure."""
    workdir = tempfile.mkdtemp(prefix="fleet-live-metrics-")
    demo = None
    try:
        demo = Demo(args, workdir)
        demo.wait_for_agents()
        return body(demo, workdir)
    except Failed as e:
        print(f"FAILED: {e}")
        if demo is not None:
            print(f"---- fleetd stderr (last lines):\n{demo.stderr_tail()}")
        return 1
    finally:
        if demo is not None:
            demo.stop()
        shutil.rmtree(workdir, ignore_errors=True)


# --- promtool check metrics ------------------------------------------------------------------

def cmd_promtool(args):
    promtool = shutil.which("promtool")
    if not promtool:
        return check_deploy.skip("promtool not found; install Debian's prometheus package "
                                 "(deploy/quickstart/install-deps.sh does)")

    def body(demo, _):
        demo.request_ring()
        problems = check_deploy.Problems()
        for what, address in (("fleetd", demo.metrics),
                              (f"agent {GPU_POOL}", demo.agents[GPU_POOL])):
            text = demo.scrape(address)
            lint = subprocess.run([promtool, "check", "metrics"], input=text,
                                  capture_output=True, text=True, timeout=30)
            output = (lint.stdout + lint.stderr).strip()
            print(f"$ curl -s http://{address}/metrics | promtool check metrics   # {what}, "
                  f"{len(parse_samples(text))} samples\n{output or '(no output)'}")
            if lint.returncode != 0 or output:
                problems.add(f"{what}: promtool exit {lint.returncode}: "
                             + "; ".join(output.splitlines()))
        return problems.finish("promtool check metrics")

    return run_with_demo(args, body)


# --- the dashboard's and the alerts' series, live ----------------------------------------------

# Series no scrape holds: Prometheus makes them for each target.
PROMETHEUS_SERIES = {"up": "Prometheus' own series of each scrape (the prometheus test reads it)"}


def cmd_deploy(args):
    read, matched, problems = check_deploy.series_read(args.metrics_md, args.dashboard,
                                                       args.alerts)

    def body(demo, _):
        live = {}  # name -> where it was first seen
        values = set()  # (name, label, value) of every live sample

        def scrape_all(when):
            for what, address in [("fleetd", demo.metrics)] + sorted(demo.agents.items()):
                for name, labels, _ in parse_samples(demo.scrape(address)):
                    live.setdefault(name, f"{what} {when}")
                    values.update((name, k, v) for k, v in labels.items())

        # A ring the switch refuses (its first switch command error and a failed
        # reconfiguration), a ring that becomes READY, reconciliation by the operator, a
        # scrape while the ring's ports have light, the release, and a scrape after it.
        demo.switch_faults({"deny_next": 1})
        _, refused = demo.request_ring(ok=False)
        if refused.returncode == 0 or "Injected fault" not in refused.stderr:
            raise Failed(f"a ring the switch refused did not fail with the switch's refusal:\n"
                         f"{refused.stdout}{refused.stderr}")
        # What the series say of it (docs/metrics.md): one refused apply, one failed
        # reconfiguration, and the switch still up, for it answered.
        samples = parse_samples(demo.scrape(demo.metrics))
        for name, labels, want in (
                ("fleet_switch_command_errors_total", {"operation": "apply"}, 1),
                ("fleet_switch_up", {}, 1),
                ("fleet_reconfigurations_total", {"outcome": "failed"}, 1)):
            got = value_of(samples, name, **labels)
            series = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
                             if labels else "")
            print(f"  after the refusal: {series} = {got}")
            if got != want:
                problems.add(f"after a refused ring, {series} is {got}, want {want}")
        demo.switch_faults(None)
        allocation, _ = demo.request_ring()
        demo.fleetctl("reconcile")
        # Agents report each port's power on their heartbeat after the retrain.
        if not eventually(lambda: value_of(parse_samples(demo.scrape(demo.metrics)),
                                           "fleet_port_rx_power_dbm") is not None, 10):
            raise Failed("no fleet_port_rx_power_dbm series while the ring is up")
        scrape_all("with a ring up")
        demo.release(allocation)
        scrape_all("after the release")

        for name in sorted(read):
            where = ", ".join(read[name])
            if name in PROMETHEUS_SERIES:
                print(f"  {name}: not scraped: {PROMETHEUS_SERIES[name]} ({where})")
            elif name in live:
                print(f"  {name}: in {live[name]} ({where})")
            else:
                problems.add(f"{name}, read by {where}, is in no live scrape of fleetd or "
                             "its agents")
        # A literal label value a query matches is one the series really takes.
        for (name, label, value), where in sorted(matched.items()):
            if name in PROMETHEUS_SERIES:
                continue
            if (name, label, value) in values:
                print(f'  {name}{{{label}="{value}"}}: live ({", ".join(where)})')
            else:
                taken = sorted(v for n, k, v in values if n == name and k == label)
                problems.add(f'{name}{{{label}="{value}"}}, read by {", ".join(where)}, is in '
                             f"no live scrape ({label} takes {taken or 'no value'})")
        print(f"{len(read)} series read by {args.dashboard} and {args.alerts}")
        return problems.finish("dashboard and alerts against the live metrics")

    return run_with_demo(args, body)


# --- a real Prometheus --------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    INTERVAL = "250ms"

    def __init__(self, binary, workdir, fleetd, agent):
        self.dir = os.path.join(workdir, "prometheus")
        os.makedirs(self.dir)
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w", encoding="utf-8") as f:
            f.write(f"""global:
  scrape_interval: {self.INTERVAL}
  scrape_timeout: {self.INTERVAL}
scrape_configs:
  - job_name: fleetd
    static_configs:
      - targets: ["{fleetd}"]
  - job_name: fleet-onic-agent
    static_configs:
      - targets: ["{agent}"]
        labels: {{host: "{GPU_POOL}"}}
""")
        promtool = shutil.which("promtool")
        if promtool:
            check = subprocess.run([promtool, "check", "config", self.config],
                                   capture_output=True, text=True, timeout=30)
            if check.returncode != 0:
                raise Failed(f"promtool check config:\n{check.stdout}{check.stderr}")
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self.proc = None
        for _ in range(3):  # The port is free when picked; another process may take it.
            self.address = f"127.0.0.1:{free_port()}"
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [binary, f"--config.file={self.config}",
                     f"--web.listen-address={self.address}",
                     f"--storage.tsdb.path={os.path.join(self.dir, 'data')}"],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if eventually(lambda: self.proc.poll() is not None or
                          http(f"http://{self.address}/-/ready", timeout=2)[0] == 200, 30) \
                    and self.proc.poll() is None:
                return
            self.stop()
        raise Failed(f"prometheus did not become ready:\n{self.log_tail()}")

    def query(self, promql):
        """[(labels, value)] of an instant query."""
        url = (f"http://{self.address}/api/v1/query?"
               + urllib.parse.urlencode({"query": promql}))
        status, body = http(url)
        if status != 200:
            raise Failed(f"query {promql}: status {status}: {body}")
        reply = json.loads(body)
        if reply.get("status") != "success" or reply["data"]["resultType"] != "vector":
            raise Failed(f"query {promql}: {body}")
        return [(r["metric"], float(r["value"][1])) for r in reply["data"]["result"]]

    def log_tail(self):
        return tail(self.log_path)

    def stop(self):
        """SIGTERM, as systemd stops it; returns its exit code."""
        return terminate(self.proc) if self.proc is not None else None


def grafana_expanded(expr):
    """A dashboard query as Grafana would send it: its variables replaced by values (any
    instance, host and stage; a one-minute rate interval)."""
    return re.sub(r"\$\{?(\w+)\}?",
                  lambda m: "1m" if m.group(1) in check_deploy.GRAFANA_BUILTINS else ".*", expr)


def cmd_prometheus(args):
    binary = shutil.which("prometheus")
    if not binary:
        return check_deploy.skip("prometheus not found; install Debian's prometheus package "
                                 "(deploy/quickstart/install-deps.sh does)")
    cycles = 3

    def body(demo, workdir):
        prometheus = Prometheus(binary, workdir, demo.metrics, demo.agents[GPU_POOL])
        problems = check_deploy.Problems()
        try:
            seen = {}

            def expect(promql, want, what=None, timeout=15.0):
                """Polls until the query returns one sample for which want(value) holds."""
                last = []

                def holds():
                    last[:] = prometheus.query(promql)
                    return len(last) == 1 and want(last[0][1])
                ok = eventually(holds, timeout)
                seen[promql] = [v for _, v in last]
                got = ", ".join(f"{v:.15g}" for _, v in last) or "no sample"
                print(f"  {promql} = {got}" + ("" if ok else f"   FAILED: want {what}"))
                if not ok:
                    problems.add(f"{promql}: {got}, want {what}")

            print(f"prometheus on {prometheus.address}, scraping every "
                  f"{Prometheus.INTERVAL}: fleetd {demo.metrics}, agent {GPU_POOL} "
                  f"{demo.agents[GPU_POOL]}")
            expect('up{job="fleetd"}', lambda v: v == 1, "1")
            expect('up{job="fleet-onic-agent"}', lambda v: v == 1, "1")
            expect("fleet_agents_connected", lambda v: v == AGENTS, AGENTS)
            for cycle in range(1, cycles + 1):
                allocation, _ = demo.request_ring()
                print(f"ring {cycle}: {allocation} READY")
                expect('fleet_circuits{state="active"}', lambda v: v == 8, "8 while a ring is up")
                demo.release(allocation)
                print(f"ring {cycle}: released")
                expect('fleet_circuits{state="active"}', lambda v: v == 0,
                       "0 after the release")
            # Every value below is final once both targets were scraped after the last
            # release: a value seen earlier could be one the next scrape would change.
            done = time.time()
            for job in ("fleetd", "fleet-onic-agent"):
                expect(f'timestamp(up{{job="{job}"}})', lambda v: v > done,
                       f"a scrape after the last release ({done:.3f})")
            n = cycles
            expect('fleet_rpc_requests_total{service="TopologyService",'
                   'method="RequestTopology",code="OK"}', lambda v: v == n, n)
            expect('fleet_reconfigurations_total{outcome="ready"}', lambda v: v == n, n)
            for outcome in ("degraded", "failed"):
                expect(f'fleet_reconfigurations_total{{outcome="{outcome}"}}',
                       lambda v: v == 0, 0)
            for stage in STAGES:
                expect(f'fleet_reconfiguration_stage_duration_seconds_count{{stage="{stage}"}}',
                       lambda v: v == n, n)
            expect("fleet_reconfiguration_duration_seconds_count", lambda v: v == n, n)
            expect('fleet_releases_total{reason="requested"}', lambda v: v == n, n)
            expect('fleet_allocations{state="released"}', lambda v: v == n, n)
            expect("fleet_agents_connected", lambda v: v == AGENTS, AGENTS)
            expect(f'fleet_agent_commands_total{{host="{GPU_POOL}",command="retrain",'
                   f'outcome="ok"}}', lambda v: v > 0, "> 0")
            # The ring's ports are all in the GPU pool: what fleetd counts as trained is what
            # that agent counts as retrained, and timed.
            retrained = seen.get(f'fleet_agent_commands_total{{host="{GPU_POOL}",'
                                 f'command="retrain",outcome="ok"}}', [None])[0]
            expect('fleet_link_retrains_total{outcome="trained"}', lambda v: v == retrained,
                   f"{retrained}, the agent's retrains")
            expect(f'fleet_agent_retrain_duration_seconds_count{{host="{GPU_POOL}"}}',
                   lambda v: v == retrained, f"{retrained}, the agent's retrains")
            expect(f'fleet_agent_connected{{host="{GPU_POOL}"}}', lambda v: v == 1, 1)
            expect('up{job="fleetd"}', lambda v: v == 1, "1")
            expect('up{job="fleet-onic-agent"}', lambda v: v == 1, "1")

            # Prometheus parses every dashboard and alert query (the contract checks only
            # scan them), and on this healthy fabric no alert's expression returns anything.
            with open(args.dashboard, encoding="utf-8") as f:
                queries = list(check_deploy.dashboard_queries(json.load(f)))
            for where, expr in queries:
                try:
                    prometheus.query(grafana_expanded(expr))
                except Failed as e:
                    problems.add(f"{where}: {e}")
            firing = []
            for where, expr in check_deploy.alert_queries(check_deploy.load_yaml(args.alerts)):
                try:
                    result = prometheus.query(expr)
                except Failed as e:
                    problems.add(f"{where}: {e}")
                    continue
                if result:
                    firing.append(where)
                    problems.add(f"{where} would fire on a healthy fabric: {result}")
            print(f"prometheus evaluated {len(queries)} dashboard queries; alert expressions "
                  f"returning series: {', '.join(firing) or 'none'}")
        finally:
            code = prometheus.stop()
            print(f"prometheus stopped: exit {code}")
            if code != 0:
                problems.add(f"prometheus exited {code} on SIGTERM:\n{prometheus.log_tail()}")
            elif problems.items:
                print(f"---- prometheus log (last lines):\n{prometheus.log_tail()}")
        return problems.finish("prometheus scraping fleetd and an agent")

    return run_with_demo(args, body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--fleetd", required=True)
    common.add_argument("--fleetctl", required=True)
    common.add_argument("--ring", required=True, help="deploy/examples/ring-8-gpus.yaml")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("promtool", parents=[common], help="promtool check metrics, live")
    p.set_defaults(func=cmd_promtool)

    p = sub.add_parser("deploy", parents=[common],
                       help="the dashboard's and the alerts' series in the live scrape")
    p.add_argument("--metrics-md", required=True)
    p.add_argument("--dashboard", required=True)
    p.add_argument("--alerts", required=True)
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("prometheus", parents=[common],
                       help="a real Prometheus scraping fleetd and an agent")
    p.add_argument("--dashboard", required=True)
    p.add_argument("--alerts", required=True)
    p.set_defaults(func=cmd_prometheus)

    args = parser.parse_args()
    for binary in (args.fleetd, args.fleetctl):
        if not os.access(binary, os.X_OK):
            print(f"FAILED: {binary} is not built")
            return 1
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
