#!/usr/bin/env python3
"""Fails when a project #include crosses a layer the wrong way (docs/architecture.md, "Layers").

Each source folder may include headers only from the folders listed for it below; a folder not
listed is an error too, so a new folder must be placed in the layering on purpose. The build
enforces declared dependencies per target; this enforces the direction between folders.
Usage: check_layers.py [PROJECT_ROOT]
"""
import pathlib
import re
import sys

PROTO = "fleet/v1"
ETCD_PROTO = "proto/etcd"  # etcd's API, included as "etcd/..." (generated).
DRIVER = "switch_adapters"  # The abstract switch interface.
POLATIS = "switch_adapters/polatis"
EMULATOR = "switch_adapters/polatis/emulator"

# Folder → the folders its files may include (itself is always allowed). Lower layers first.
ALLOWED = {
    "common": set(),
    PROTO: set(),
    "scheduler": {"common", PROTO},
    DRIVER: {"common"},
    POLATIS: {"common", DRIVER},
    EMULATOR: {"common"},  # Shares no code with the driver it emulates.
    "onic_agent": {"common", PROTO},
    # The gate every effect of fleetd passes (store writes, switch and agent commands).
    "controller/commit_point": set(),
    # The client of an etcd cluster that replicated fleetd replicas share (docs/ha.md).
    "controller/etcd": {"common", ETCD_PROTO},
    "controller/store": {"common", PROTO, "controller/commit_point"},
    # The store's commit log on etcd's replicated log (docs/ha.md).
    "controller/replication": {"common", PROTO, "controller/commit_point", "controller/store",
                               "controller/etcd", ETCD_PROTO},
    "controller/metrics": {"common", PROTO, "controller/commit_point", "controller/store"},
    "controller/inventory": {"common", PROTO, "controller/commit_point", "controller/store"},
    # Who may call what; the gatekeeper counts its refusals in fleetd's metrics.
    "controller/auth": {"common", PROTO, "controller/commit_point", "controller/store",
                        "controller/metrics"},
    "controller/agent_registry": {"common", PROTO, "controller/commit_point", "controller/store",
                                  "controller/metrics"},
    "controller/switch_registry": {"common", PROTO, "controller/commit_point", DRIVER,
                                   "controller/metrics"},  # Vendor-free.
    "controller/engine": {"common", PROTO, "controller/commit_point", "scheduler", DRIVER,
                          "controller/store", "controller/auth", "controller/metrics",
                          "controller/agent_registry", "controller/switch_registry"},
    "controller/service": {"common", PROTO, "controller/commit_point", "scheduler", DRIVER,
                           "controller/store", "controller/auth", "controller/metrics",
                           "controller/agent_registry", "controller/switch_registry",
                           "controller/inventory", "controller/engine"},
    # fleetctl talks to fleetd over gRPC only; it reads inventory files with fleetd's parser.
    "controller/cli": {"common", PROTO, "controller/inventory"},
    # The composition root: builds every concrete part, so it may name them all.
    "controller/fleetd": {"common", PROTO, "controller/commit_point", "controller/etcd",
                          "controller/replication",
                          "scheduler", DRIVER, POLATIS,
                          "controller/store", "controller/auth",
                          "controller/metrics", "controller/agent_registry", "controller/switch_registry",
                          "controller/inventory", "controller/engine", "controller/service"},
}
UNCHECKED = ("tests", "fuzz", "build", "clients", "deploy", "docs", ".git", "testing")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def folder_of_header(path: str, root: pathlib.Path):
    """The source folder a project header belongs to, or None for a third-party header."""
    if path.startswith(PROTO + "/"):
        return PROTO
    if path.startswith("etcd/etcdserverpb/") or path.startswith("etcd/mvccpb/"):
        return ETCD_PROTO
    parent = str(pathlib.PurePosixPath(path).parent)
    return parent if (root / path).exists() else None


def allowed(folder: str, target: str) -> bool:
    return target == folder or target in ALLOWED[folder]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    errors = []
    for source in sorted(root.rglob("*")):
        if source.suffix not in (".h", ".cc") or not source.is_file():
            continue
        rel = source.relative_to(root)
        if rel.parts[0] in UNCHECKED or rel.parts[0].startswith("build"):
            continue
        folder = str(rel.parent)
        if folder == "proto/" + PROTO:
            folder = PROTO
        if folder not in ALLOWED:
            errors.append(f"{rel}: folder {folder} has no place in the layering (check_layers.py)")
            continue
        text = source.read_text()
        for m in INCLUDE.finditer(text):
            header = m.group(1)
            line_no = text.count("\n", 0, m.start()) + 1
            target = folder_of_header(header, root)
            if target is None or allowed(folder, target):
                continue
            errors.append(f"{rel}:{line_no}: includes {header}: {folder} may not depend on "
                          f"{target}")
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} include(s) cross a layer the wrong way")
        return 1
    print("layers ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
