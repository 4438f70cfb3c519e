"""The --fleet spec of a Slurm job, as FLEET's PrologSlurmctld (fleet_slurm.py) reads it.

The spec and its path come from the submitter (a program using libslurm can set any job
environment), so everything here treats them as hostile: one YAML document without anchors or
aliases, shown escaped, and only the job's own nodes as hosts. Installed beside fleet_slurm.py,
which imports it.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

# Control characters (C0, DEL, C1): never written to a file, a log line or AdminComment.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Refusal(Exception):
    """Why a job must not start; the message goes to AdminComment as it is."""


def printable(text: str, limit: int = 512) -> str:
    """Text from outside (a file name, an error) made safe to log, write or show: bytes that
    are not UTF-8 as \\x escapes, control characters (newlines included) as '?', at most
    `limit` characters."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = CONTROL.sub("?", text)
    return text if len(text) <= limit else text[:limit] + "..."


def load_spec(text: str, source: str) -> Any:
    """The spec's one YAML document. Anchors and aliases are refused: PyYAML shares an
    aliased node, but filling the spec in and writing it out copy it, so a few hundred bytes
    of nested aliases (a "billion laughs") would take the controller's memory."""
    import yaml

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):  # type: ignore[override]
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = event.start_mark
                raise Refusal(f"{source}: line {mark.line + 1}: YAML anchors and aliases "
                              "(&name, *name) are not allowed in a --fleet spec; write the "
                              "value out")
            return super().compose_node(parent, index)

    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as e:
        raise Refusal(f"{source}: not YAML: {' '.join(str(e).split())}") from e


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

    def job_host(host: Any, field: str) -> str:
        """A host the spec names: a Slurm node of the job (as its FLEET host) or the FLEET
        host of one; anything else is refused."""
        if str(host) in by_node:
            return by_node[str(host)]
        if str(host) in hosts:
            return str(host)
        raise Refusal(f"{source}: {field} '{printable(str(host), 64)}' is not one of the "
                      f"job's nodes ({', '.join(nodes)})")

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return [walk(item, f"{path}[{i}]") for i, item in enumerate(node)]
        if not isinstance(node, dict):
            return node
        out: Dict[str, Any] = {}
        for key, value in node.items():
            field = f"{path}.{key}" if path else str(key)
            if key == "count" and isinstance(value, list):
                entries = []
                for i, entry in enumerate(value):
                    if isinstance(entry, dict) and entry.get("host") not in (None, ""):
                        entry = dict(entry)
                        entry["host"] = job_host(entry["host"], f"{field}[{i}].host")
                    entries.append(walk(entry, f"{field}[{i}]"))
                out[key] = entries
                continue
            if key == "attach" and isinstance(value, dict):
                value = dict(value)
                host = value.get("host")
                if host is None or host == "":
                    value["host"] = hosts[0]
                elif str(host) in by_node:
                    value["host"] = by_node[str(host)]
                elif str(host) not in hosts:
                    raise Refusal(f"{source}: {field}.host '{printable(str(host), 64)}' is "
                                  f"not one of the job's "
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
