#!/usr/bin/env python3
"""Checks of the deployment files under deploy/ (systemd units, Dockerfiles, Prometheus
config and alerts, Grafana dashboard) against the binaries and the metric contract
(docs/metrics.md). Run by ctest (tests/deploy/CMakeLists.txt); each subcommand is one test.

Exit codes: 0 passed, 1 failed (every problem is printed), 77 skipped because a tool the
check needs is not installed (ctest's SKIP_RETURN_CODE).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
SANITIZER_RUNTIME = re.compile(r"^lib(asan|ubsan|lsan|tsan|hwasan)\d*$")

# PromQL functions, aggregations and keywords an expression may use; any other identifier
# is taken as a metric name.
PROMQL_FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count", "count_over_time", "count_values", "delta",
    "deriv", "floor", "histogram_quantile", "idelta", "increase", "irate", "label_join",
    "label_replace", "last_over_time", "max", "max_over_time", "min", "min_over_time",
    "predict_linear", "quantile", "quantile_over_time", "rate", "resets", "round", "scalar",
    "sort", "sort_desc", "stddev", "stdvar", "sum", "sum_over_time", "time", "timestamp",
    "topk", "vector",
}
PROMQL_KEYWORDS = {"and", "or", "unless", "offset", "bool", "inf", "nan"}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
SELECTOR = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)\s*(\{[^}]*\})?")
IDENTIFIER = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)")
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__interval_ms",
                    "__range_s", "__range_ms"}
# Labels every scraped series carries.
TARGET_LABELS = {"instance", "job"}


class Problems:
    def __init__(self):
        self.items = []

    def add(self, message):
        self.items.append(message)

    def finish(self, what):
        if self.items:
            print(f"FAILED: {what}: {len(self.items)} problem(s)")
            for item in self.items:
                print(f"  - {item}")
            return 1
        print(f"ok: {what}")
        return 0


def skip(message):
    print(f"SKIPPED: {message}")
    return SKIP


def load_yaml(path):
    import yaml  # Debian: python3-yaml (deploy/quickstart/install-deps.sh)
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


# --- docs/metrics.md ---------------------------------------------------------------------

def read_contract(metrics_md):
    """Returns ({metric: (type, {labels})}, [(alert, fires_when)]) from docs/metrics.md."""
    metrics, alerts = {}, []
    section = None
    with open(metrics_md, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                section = "alerts" if line.startswith("## Alerts") else "metrics"
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|") or len(cells) < 2:
                continue
            name = re.fullmatch(r"`([A-Za-z_:][\w:]*)`", cells[0])
            if not name:
                continue
            if section == "metrics" and len(cells) >= 4:
                labels = set(re.findall(r"`(\w+)`", cells[2]))
                metrics[name.group(1)] = (cells[1], labels)
            elif section == "alerts":
                alerts.append((name.group(1), cells[1]))
    if not metrics or not alerts:
        raise SystemExit(f"{metrics_md}: no metric or alert tables found")
    return metrics, alerts


def series_names(metrics):
    """Every series name the contract exports, with its base metric: histograms as their
    _bucket, _sum and _count series (a histogram's bare name is no series)."""
    names = {}
    for name, (kind, labels) in metrics.items():
        if kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                names[name + suffix] = (name, labels | ({"le"} if suffix == "_bucket" else set()))
        else:
            names[name] = (name, labels)
    return names


# --- PromQL ------------------------------------------------------------------------------

def check_promql(expr, series, problems, where, extra_series=(), extra_labels=()):
    """Checks that every metric `expr` reads is a series of the contract (or one of
    `extra_series`, e.g. Prometheus' own `up`) and that every label it matches or groups by
    is one those metrics carry. Returns the metric names read."""
    known = dict(series)
    for name in extra_series:
        known[name] = (name, set())
    allowed_labels = TARGET_LABELS | set(extra_labels)
    text = re.sub(r"\$\{?(\w+)\}?", lambda m: "5m" if m.group(1) in GRAFANA_BUILTINS else "x",
                  expr)
    text = re.sub(r"\[[^\]]*\]", "", text)
    grouping = []
    for m in GROUPING.finditer(text):
        grouping += [label.strip() for label in m.group(2).split(",") if label.strip()]
    text = GROUPING.sub(" ", text)
    used, labels_of_used, unknown = [], set(), False
    for m in SELECTOR.finditer(text):
        name, matchers = m.group(1), m.group(2) or ""
        rest = text[m.end():].lstrip()
        if name in PROMQL_KEYWORDS or re.fullmatch(r"\d+[smhdwy]?", name):
            continue
        if rest.startswith("(") and not matchers:
            if name not in PROMQL_FUNCTIONS:
                problems.add(f"{where}: unknown PromQL function '{name}' in: {expr}")
            continue
        if name not in known:
            unknown = True
            problems.add(f"{where}: metric '{name}' is not in docs/metrics.md"
                         + (" (a histogram is read through _bucket, _sum or _count)"
                            if name + "_bucket" in known else "") + f": {expr}")
            continue
        used.append(name)
        metric_labels = known[name][1]
        labels_of_used |= metric_labels
        body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', matchers)
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", body):
            if label not in metric_labels | allowed_labels:
                problems.add(f"{where}: '{name}' has no label '{label}' "
                             f"(it has {sorted(metric_labels) or 'none'}): {expr}")
    for label in grouping:
        if not unknown and label not in labels_of_used | allowed_labels:
            problems.add(f"{where}: grouping by '{label}', a label none of "
                         f"{sorted(set(used))} carries: {expr}")
    # Identifiers the selector scan could not place (e.g. a metric after a comma).
    for m in IDENTIFIER.finditer(re.sub(r"\{[^}]*\}", "", text)):
        name = m.group(1)
        if (name not in known and name not in PROMQL_FUNCTIONS and name not in PROMQL_KEYWORDS
                and name != "x" and not re.fullmatch(r"e\d*", name)):
            if f"metric '{name}'" not in " ".join(problems.items):
                problems.add(f"{where}: unknown identifier '{name}' in: {expr}")
    return used


# --- dashboard ---------------------------------------------------------------------------

REQUIRED_DASHBOARD_SERIES = [
    "fleet_circuits", "fleet_allocations", "fleet_reconfiguration_stage_duration_seconds_bucket",
    "fleet_rpc_requests_total", "fleet_switch_commands_total", "fleet_switch_command_errors_total",
    "fleet_switch_command_duration_seconds_bucket", "fleet_switch_up", "fleet_agents_connected",
    "fleet_port_rx_power_dbm", "fleet_drift_found_total", "fleet_drift_repaired_total",
    "fleet_link_retrains_total",
]


def all_panels(panels):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


LABEL_VALUES = re.compile(r"\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*")


def variable_query(var):
    return var.get("definition") or var.get("query", {}).get("query", "")


def cmd_dashboard(args):
    problems = Problems()
    metrics, _ = read_contract(args.metrics_md)
    series = series_names(metrics)
    try:
        with open(args.dashboard, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        problems.add(f"{args.dashboard}: not valid JSON: {e}")
        return problems.finish("dashboard")
    if dash.get("title") != "FLEET fabric overview":
        problems.add(f"title is {dash.get('title')!r}, not 'FLEET fabric overview'")
    if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 37:
        problems.add(f"schemaVersion {dash.get('schemaVersion')!r} is older than 37")
    inputs = {i.get("name"): i for i in dash.get("__inputs", [])}
    if inputs.get("DS_PROMETHEUS", {}).get("pluginId") != "prometheus":
        problems.add("no __inputs entry DS_PROMETHEUS for a prometheus datasource")
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    used_series, ids, quantiles, heatmaps = set(), set(), set(), set()

    def check_vars(text, where):
        for var in re.findall(r"\$\{?(\w+)\}?", text):
            if var not in variables and var not in GRAFANA_BUILTINS and var != "DS_PROMETHEUS":
                problems.add(f"{where}: uses ${var}, which is no dashboard variable")

    for name, var in variables.items():
        if var.get("type") != "query":
            continue
        query = variable_query(var)
        m = LABEL_VALUES.fullmatch(query)
        if not m:
            problems.add(f"variable {name}: query {query!r} is not label_values(METRIC, LABEL)")
            continue
        where = f"variable {name}"
        check_vars(query, where)
        for metric in check_promql(m.group(1), series, problems, where):
            if m.group(2) not in series[metric][1] | TARGET_LABELS:
                problems.add(f"{where}: '{metric}' has no label '{m.group(2)}'")
    for panel in all_panels(dash.get("panels", [])):
        title = panel.get("title", "?")
        where = f"panel '{title}'"
        if panel.get("id") in ids:
            problems.add(f"{where}: id {panel.get('id')} is used twice")
        ids.add(panel.get("id"))
        if "gridPos" not in panel:
            problems.add(f"{where}: no gridPos")
        if panel.get("type") == "row":
            continue
        if panel.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
            problems.add(f"{where}: datasource is not ${{DS_PROMETHEUS}}")
        if panel.get("repeat") and panel["repeat"] not in variables:
            problems.add(f"{where}: repeats over ${panel['repeat']}, which is no variable")
        check_vars(title, where)
        targets = panel.get("targets", [])
        if not targets:
            problems.add(f"{where}: no queries")
        for target in targets:
            expr = target.get("expr", "")
            if not expr:
                problems.add(f"{where}: target {target.get('refId')} has no expr")
                continue
            check_vars(expr, where)
            used = check_promql(expr, series, problems, where)
            used_series.update(used)
            if "histogram_quantile" in expr:
                quantiles.update(used)
            if panel.get("type") == "heatmap":
                heatmaps.update(used)
                if target.get("format") != "heatmap":
                    problems.add(f"{where}: a heatmap query needs format 'heatmap'")
    for name in REQUIRED_DASHBOARD_SERIES:
        if name not in used_series:
            problems.add(f"no panel shows {name}")
    stage = "fleet_reconfiguration_stage_duration_seconds_bucket"
    if stage not in heatmaps:
        problems.add(f"no heatmap panel of {stage}")
    if stage not in quantiles:
        problems.add(f"no histogram_quantile over {stage}")
    print(f"dashboard reads {len(used_series)} series: {', '.join(sorted(used_series))}")
    return problems.finish("dashboard")


# --- alerts ------------------------------------------------------------------------------

def parse_minutes(text):
    m = re.search(r"(\d+) minutes?", text) or re.search(r"(a) minute", text)
    if not m:
        return None
    return 1 if m.group(1) == "a" else int(m.group(1))


def cmd_alerts(args):
    problems = Problems()
    metrics, contract = read_contract(args.metrics_md)
    series = series_names(metrics)
    rules = load_yaml(args.alerts)
    tests = load_yaml(args.tests)
    config = load_yaml(args.config)
    # Labels the scrape config adds (e.g. host from the agent's target name).
    relabeled = {rc.get("target_label") for job in config.get("scrape_configs", [])
                 for rc in job.get("relabel_configs", []) if rc.get("target_label")}
    if args.alerts_name not in config.get("rule_files", []):
        problems.add(f"{args.config}: rule_files does not load {args.alerts_name}")
    jobs = {job["job_name"]: job for job in config.get("scrape_configs", [])}
    for job, port in (("fleetd", "9464"), ("fleet-onic-agent", "9465")):
        targets = [t for sc in jobs.get(job, {}).get("static_configs", [])
                   for t in sc.get("targets", [])]
        if not targets or not all(t.endswith(":" + port) for t in targets):
            problems.add(f"{args.config}: job {job} does not scrape targets on port {port}")

    alerts = {}
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            if "alert" in rule:
                if rule["alert"] in alerts:
                    problems.add(f"alert {rule['alert']} is defined twice")
                alerts[rule["alert"]] = rule
    wanted = {name for name, _ in contract}
    for name in sorted(set(alerts) - wanted):
        problems.add(f"alert {name} is not in docs/metrics.md")
    for name in sorted(wanted - set(alerts)):
        problems.add(f"alert {name} of docs/metrics.md is missing")

    for name, fires_when in contract:
        rule = alerts.get(name)
        if rule is None:
            continue
        where = f"alert {name}"
        expr = " ".join(rule["expr"].split())
        used = check_promql(expr, series, problems, where, extra_series=["up"],
                            extra_labels=relabeled)
        if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            problems.add(f"{where}: severity label is not critical, warning or info")
        annotations = rule.get("annotations", {})
        for key in ("summary", "description"):
            if not str(annotations.get(key, "")).strip():
                problems.add(f"{where}: no {key} annotation")
        carried = TARGET_LABELS | relabeled
        for metric in used:
            carried |= series.get(metric, (None, set()))[1]
        for key, text in annotations.items():
            for label in re.findall(r"\$labels\.(\w+)", str(text)):
                if label not in carried:
                    problems.add(f"{where}: {key} names $labels.{label}, which its series "
                                 "do not carry")
        # The contract's own words: quoted conditions appear in the expression, "for N
        # minutes" is the rule's `for`, "in the last N minutes" its window.
        for fragment in re.findall(r"`([^`]*)`", fires_when):
            if re.search(r"[<>=]", fragment) and " ".join(fragment.split()) not in expr:
                problems.add(f"{where}: expression does not test `{fragment}`: {expr}")
        minutes = parse_minutes(fires_when)
        if "in the last" in fires_when:
            if f"[{minutes}m]" not in expr:
                problems.add(f"{where}: expression has no [{minutes}m] window: {expr}")
            if "for" in rule:
                problems.add(f"{where}: a count in a window needs no `for`")
        elif minutes is not None and rule.get("for") != f"{minutes}m":
            problems.add(f"{where}: for is {rule.get('for')!r}, docs/metrics.md says "
                         f"{minutes}m")

    # Each alert is tested firing and not firing.
    firing, silent = set(), set()
    for test in tests.get("tests", []):
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case.get("alertname"))
    for name in sorted(wanted):
        if name not in firing:
            problems.add(f"{args.tests}: no test of {name} firing")
        if name not in silent:
            problems.add(f"{args.tests}: no test of {name} not firing")
    return problems.finish("alerts")


# --- the series the dashboard and the alerts read -------------------------------------------

def dashboard_queries(dash):
    """(where, PromQL) of every query of a dashboard: each query variable's label_values()
    selector and each panel target's expr."""
    for var in dash.get("templating", {}).get("list", []):
        m = LABEL_VALUES.fullmatch(variable_query(var)) if var.get("type") == "query" else None
        if m:
            yield f"variable {var.get('name')}", m.group(1)
    for panel in all_panels(dash.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield f"panel '{panel.get('title', '?')}'", target["expr"]


def alert_queries(rules):
    """(where, PromQL) of every alerting rule."""
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            if "alert" in rule:
                yield f"alert {rule['alert']}", " ".join(rule["expr"].split())


def equality_matchers(expr):
    """(metric, label, value) of every `label="value"` matcher with a literal value (no
    Grafana variable) in a selector of `expr`."""
    for m in SELECTOR.finditer(re.sub(r"\[[^\]]*\]", "", expr)):
        for label, value in re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', m.group(2) or ""):
            if "$" not in value:
                yield m.group(1), label, value


def series_read(metrics_md, dashboard, alerts):
    """What the dashboard's and the alerts' queries read: {series: [where]}, named by
    check_promql as the contract checks name them (Prometheus' own `up` included);
    {(series, label, value): [where]} of their literal equality matchers; and the Problems of
    names outside docs/metrics.md."""
    problems = Problems()
    series = series_names(read_contract(metrics_md)[0])
    with open(dashboard, encoding="utf-8") as f:
        queries = list(dashboard_queries(json.load(f)))
    queries += alert_queries(load_yaml(alerts))
    read, matched = {}, {}
    for where, expr in queries:
        for name in check_promql(expr, series, problems, where, extra_series=["up"]):
            if where not in read.setdefault(name, []):
                read[name].append(where)
        for key in equality_matchers(expr):
            if where not in matched.setdefault(key, []):
                matched[key].append(where)
    return read, matched, problems


# --- systemd units -----------------------------------------------------------------------

def read_unit(path):
    """{section: {key: [values]}} of a unit file (keys may repeat)."""
    unit, section = {}, None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = unit.setdefault(line.strip("[]"), {})
                continue
            key, _, value = line.partition("=")
            section.setdefault(key.strip(), []).append(value.strip())
    return unit


UNIT_HARDENING = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                  "PrivateTmp": "yes", "ConfigurationDirectory": "fleet",
                  "Restart": "on-failure", "ProtectKernelModules": "yes",
                  "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes",
                  "LockPersonality": "yes", "SystemCallArchitectures": "native"}


def cmd_unit_contract(args):
    problems = Problems()
    unit = read_unit(args.unit)
    service = unit.get("Service", {})
    name = os.path.basename(args.unit)

    def one(key):
        values = service.get(key, [])
        return values[-1] if values else None

    expected_exec = f"/usr/bin/{args.daemon} --config /etc/fleet/{args.daemon}.yaml"
    if service.get("ExecStart") != [expected_exec]:
        problems.add(f"ExecStart is {service.get('ExecStart')}, not [{expected_exec!r}]")
    for key, value in UNIT_HARDENING.items():
        if one(key) != value:
            problems.add(f"{key}={one(key)}, want {key}={value}")
    if one("KillSignal") not in (None, "SIGTERM"):
        problems.add(f"KillSignal={one('KillSignal')}: the daemons drain on SIGTERM")
    if "multi-user.target" not in unit.get("Install", {}).get("WantedBy", []):
        problems.add("not WantedBy=multi-user.target")
    # Every flag of ExecStart is one the built binary takes.
    try:
        help_text = subprocess.run([args.binary, "--help"], capture_output=True, text=True,
                                   timeout=30).stdout
    except OSError as e:
        problems.add(f"cannot run {args.binary} --help: {e}")
        help_text = ""
    for flag in re.findall(r"(--[\w-]+)", expected_exec):
        if flag not in help_text:
            problems.add(f"{args.binary} --help does not list {flag}")

    if args.daemon == "fleetd":
        if one("User") != "fleet" or one("Group") != "fleet":
            problems.add(f"User={one('User')} Group={one('Group')}, want fleet and fleet")
        if one("StateDirectory") != "fleet":
            problems.add(f"StateDirectory={one('StateDirectory')}, want fleet")
        state_dir = load_yaml(args.config).get("state_dir")
        if state_dir != "/var/lib/fleet":
            problems.add(f"{args.config}: state_dir {state_dir} is not StateDirectory's "
                         "/var/lib/fleet")
        if one("CapabilityBoundingSet") != "":
            problems.add("fleetd needs no capability: CapabilityBoundingSet= should be empty")
        if one("ProtectKernelTunables") != "yes":
            problems.add("fleetd should have ProtectKernelTunables=yes")
    else:
        # The agent writes sysfs as root (see the unit's comments).
        if one("User") not in (None, "root"):
            problems.add(f"User={one('User')}: the pcie-sysfs backend needs root")
        if one("ProtectKernelTunables") in ("yes", "true", "on", "1"):
            problems.add("ProtectKernelTunables=yes makes /sys read-only: the agent's sysfs "
                         "writes (unbind, remove, rescan, config) would fail")
        if one("PrivateUsers") in ("yes", "true", "on", "1"):
            problems.add("PrivateUsers=yes: CAP_SYS_ADMIN would not count for sysfs config "
                         "reads")
        if "CAP_SYS_ADMIN" not in (one("CapabilityBoundingSet") or "").split():
            problems.add("CapabilityBoundingSet lacks CAP_SYS_ADMIN (config space reads)")
        for key in ("ReadOnlyPaths", "InaccessiblePaths"):
            for value in service.get(key, []):
                for path in value.split():
                    path = path.lstrip("-+")
                    if path in ("/sys", "/sys/bus", "/sys/bus/pci", "/sys/devices") or \
                            path.startswith(("/sys/bus/pci/", "/sys/devices/")):
                        problems.add(f"{key} covers {path}, where the agent writes")
        sysfs_root = load_yaml(args.config).get("sysfs_root")
        if sysfs_root != "/sys":
            problems.add(f"{args.config}: sysfs_root {sysfs_root}, want /sys")
    return problems.finish(f"{name} contract")


def cmd_verify_unit(args):
    tool = shutil.which("systemd-analyze")
    if not tool:
        return skip("systemd-analyze not found (Debian package systemd)")
    # systemd-analyze exits 0 on unknown keys and bad values (it only warns): any output is a
    # failure.
    result = subprocess.run([tool, "verify", "--man=no", args.unit], capture_output=True,
                            text=True)
    output = (result.stdout + result.stderr).strip()
    print(f"$ systemd-analyze verify --man=no {args.unit}\n{output or '(no output)'}")
    if result.returncode != 0 or output:
        print(f"FAILED: exit {result.returncode}")
        return 1
    security = subprocess.run([tool, "security", "--offline=yes",
                               f"--threshold={args.max_exposure}", args.unit],
                              capture_output=True, text=True)
    summary = [l for l in security.stdout.splitlines() if "Overall exposure" in l]
    print(f"$ systemd-analyze security --offline=yes --threshold={args.max_exposure}\n"
          + ("\n".join(summary) or security.stdout + security.stderr))
    if security.returncode != 0:
        print(f"FAILED: exposure above {args.max_exposure / 10}; the hardening weakened:")
        print("\n".join(l for l in security.stdout.splitlines() if l.startswith("✗")))
        return 1
    print("ok")
    return 0


# --- tools -------------------------------------------------------------------------------

def cmd_tool(args):
    tool = shutil.which(args.argv[0])
    if not tool:
        return skip(f"{args.argv[0]} not found; install Debian's {args.package} package "
                    "(deploy/quickstart/install-deps.sh does)")
    print("$ " + " ".join(args.argv))
    sys.stdout.flush()
    return subprocess.run([tool] + args.argv[1:]).returncode


# --- Docker ------------------------------------------------------------------------------

def dockerfile_stages(path):
    stages, current = [], None
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"\\\n", " ", f.read())
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction.upper() == "FROM":
            current = {"from": rest, "lines": []}
            stages.append(current)
        elif current is not None:
            current["lines"].append((instruction.upper(), rest.strip()))
    return stages


def apt_installs(stage):
    packages = []
    for instruction, rest in stage["lines"]:
        if instruction != "RUN":
            continue
        for command in re.split(r"&&|;", rest):
            words = command.split()
            if "apt-get" in words and "install" in words:
                packages += [w for w in words[words.index("install") + 1:]
                             if not w.startswith("-")]
    return packages


def cmd_docker(args):
    problems = Problems()
    for tool in ("ldd", "dpkg-query", "apt-cache"):
        if not shutil.which(tool):
            return skip(f"{tool} not found: needs a Debian system")
    stages = dockerfile_stages(args.dockerfile)
    if len(stages) < 2:
        problems.add("not a multi-stage build")
        return problems.finish(args.dockerfile)
    build, runtime = stages[0], stages[-1]
    for stage in stages:
        if not stage["from"].split()[0].startswith("debian:12"):
            problems.add(f"stage FROM {stage['from']}: not debian:12")
    with open(args.install_deps, encoding="utf-8") as f:
        deps_text = f.read()
    listed = re.search(r"PACKAGES=\(([^)]*)\)", deps_text, re.S).group(1)
    deps = set(re.sub(r"#[^\n]*", "", listed).split())
    for package in apt_installs(build):
        if package not in deps:
            problems.add(f"build stage installs {package}, which install-deps.sh does not")
    runtime_packages = apt_installs(runtime)
    instructions = {}
    for instruction, rest in runtime["lines"]:
        instructions.setdefault(instruction, []).append(rest)
    if not any(f"/usr/bin/{args.daemon}" in r for r in instructions.get("ENTRYPOINT", [])):
        problems.add(f"runtime ENTRYPOINT does not run /usr/bin/{args.daemon}")
    exposed = " ".join(instructions.get("EXPOSE", [])).split()
    for port in args.expose:
        if port not in exposed:
            problems.add(f"runtime stage does not EXPOSE {port}")
    if args.daemon == "fleetd":
        user = (instructions.get("USER") or ["root"])[-1].split(":")[0]
        if user in ("root", "0"):
            problems.add("fleetd's runtime stage runs as root: it needs no privilege")
        if not any("/var/lib/fleet" in v for v in instructions.get("VOLUME", [])):
            problems.add("no VOLUME for /var/lib/fleet")

    # Every shared library the built binary loads comes with the runtime stage's packages
    # (or what they depend on).
    ldd = subprocess.run(["ldd", args.binary], capture_output=True, text=True)
    if ldd.returncode != 0:
        problems.add(f"ldd {args.binary}: {ldd.stderr.strip()}")
        return problems.finish(args.dockerfile)
    libraries = re.findall(r"=>\s*(/\S+)", ldd.stdout)
    paths = sorted(set(libraries) | {os.path.realpath(p) for p in libraries})
    # One dpkg-query for all: it reads every package's file list each time it runs.
    owners = {}
    found = subprocess.run(["dpkg-query", "-S"] + paths, capture_output=True, text=True)
    for line in found.stdout.splitlines():
        packages, _, path = line.partition(": ")
        owners[path.strip()] = packages.split(",")[0].split(":")[0].strip()
    needed = set()
    for library in libraries:
        owner = owners.get(library) or owners.get(os.path.realpath(library))
        if owner is None:
            problems.add(f"{library} (needed by {args.daemon}) belongs to no Debian package")
        elif not SANITIZER_RUNTIME.match(owner):
            needed.add(owner)
    closure = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
         "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + runtime_packages,
        capture_output=True, text=True)
    if closure.returncode != 0:
        return skip(f"apt-cache cannot resolve the runtime packages (run apt-get update): "
                    f"{closure.stderr.strip()}")
    provided = {line.strip() for line in closure.stdout.splitlines()
                if line and not line[0].isspace()}
    for package in sorted(needed - provided):
        problems.add(f"{args.daemon} needs {package}, which the runtime stage does not install")
    print(f"{args.daemon} loads libraries of: {', '.join(sorted(needed))}")
    print(f"runtime stage installs: {', '.join(runtime_packages)}")
    return problems.finish(args.dockerfile)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("dashboard", help="the Grafana dashboard against docs/metrics.md")
    p.add_argument("--metrics-md", required=True)
    p.add_argument("dashboard")
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser("alerts", help="the alerting rules and their tests against the contract")
    p.add_argument("--metrics-md", required=True)
    p.add_argument("--config", required=True, help="prometheus.yml")
    p.add_argument("--tests", required=True, help="the promtool rule tests")
    p.add_argument("--alerts-name", default="fleet-alerts.yml")
    p.add_argument("alerts")
    p.set_defaults(func=cmd_alerts)

    p = sub.add_parser("unit-contract", help="a systemd unit's settings and flags")
    p.add_argument("--daemon", required=True, choices=["fleetd", "fleet-onic-agent"])
    p.add_argument("--binary", required=True)
    p.add_argument("--config", required=True, help="the daemon's example config")
    p.add_argument("unit")
    p.set_defaults(func=cmd_unit_contract)

    p = sub.add_parser("verify-unit", help="systemd-analyze verify and security")
    p.add_argument("--max-exposure", type=int, required=True,
                   help="systemd-analyze security threshold (exposure x 10)")
    p.add_argument("unit")
    p.set_defaults(func=cmd_verify_unit)

    p = sub.add_parser("tool", help="run a tool; skipped when it is not installed")
    p.add_argument("--package", required=True)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_tool)

    p = sub.add_parser("docker", help="a Dockerfile's stages and runtime libraries")
    p.add_argument("--daemon", required=True)
    p.add_argument("--binary", required=True)
    p.add_argument("--install-deps", required=True)
    p.add_argument("--expose", nargs="*", default=[])
    p.add_argument("dockerfile")
    p.set_defaults(func=cmd_docker)

    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
