"""Where the client dials fleetd and with what credentials, read as fleetctl reads them.

fleetd requires mutual TLS: the site CA that signed its certificate, and a certificate and
key of the caller's own (docs/security.md). Each setting comes from the first of:

1. the argument (``server``, ``ca``, ``cert``, ``key``, ``insecure``, ``context``);
2. the environment: ``FLEET_SERVER``, ``FLEET_CA``, ``FLEET_CERT``, ``FLEET_KEY``,
   ``FLEET_INSECURE``, ``FLEET_CONTEXT``;
3. a context of the client config file (``config``, else ``$FLEET_CONFIG``, else
   ``$XDG_CONFIG_HOME/fleet/config.yaml``, else ``~/.config/fleet/config.yaml``): the one
   named by ``context`` / ``FLEET_CONTEXT``, else the file's ``current-context``;
4. the default server ``localhost:50051``, and TLS.

Whether to dial with TLS or in plaintext is decided by the first of those that says anything
about it (``insecure``, or any of the three files), so files given as arguments override an
insecure context and ``insecure=True`` ignores a context's files. Plaintext is only for a
fleetd started with ``--insecure``; there the caller is named by the ``x-fleet-principal``
metadata instead of a certificate. The file's format is fleetctl's (``fleetctl config view``);
relative paths in it are relative to its folder.

A server may name several fleetd replicas, comma-separated (docs/ha.md): the channel goes to
the one whose gRPC health check says the ``fleet.v1.Leader`` service is SERVING, as fleetctl
chooses.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import grpc
from google.protobuf import wrappers_pb2

DEFAULT_SERVER = "localhost:50051"

# The health-check service a replicated fleetd serves SERVING on its leader only (and a single
# fleetd always): common/leader_health.h.
LEADER_HEALTH_SERVICE = "fleet.v1.Leader"
# gRPC's grpc.health.v1.Health/Check. Its request (field 1, the service name, a string) and
# response (field 1, the status, an enum) have the wire format of protobuf's StringValue and
# Int32Value, so those encode them: Debian's python3-grpcio ships no health-check stubs.
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_SERVING = 1

_CONTEXT_KEYS = ("name", "server", "ca", "cert", "key", "insecure")


class CredentialsError(ValueError):
    """The credentials are missing, contradictory, or a file cannot be read; the message says
    which setting, where it came from and what to give."""


@dataclasses.dataclass(frozen=True)
class Connection:
    """How to dial fleetd: TLS with the three PEM files, or plaintext when ``insecure``."""

    server: str
    ca: str = ""
    cert: str = ""
    key: str = ""
    insecure: bool = False
    context: str = ""  # The config context used, "" for none.

    def credentials(self) -> grpc.ChannelCredentials:
        """The channel credentials for TLS; raises CredentialsError naming an unreadable file."""
        if self.insecure:
            raise CredentialsError("a plaintext connection has no channel credentials")
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca, "CA bundle"),
            private_key=_read(self.key, "client key"),
            certificate_chain=_read(self.cert, "client certificate"))

    def _channel_to(self, endpoint: str) -> grpc.Channel:
        if self.insecure:
            return grpc.insecure_channel(endpoint)
        return grpc.secure_channel(endpoint, self.credentials())

    def endpoint(self, timeout: float = 1.0) -> str:
        """The endpoint to dial: ``server``, or of several the leader (the first in order whose
        health check says ``fleet.v1.Leader`` is SERVING), else the first that answered (a
        follower: reads work, and a change is refused naming the leader), else the first.
        Every endpoint is asked at once; this takes at most ``timeout`` seconds."""
        endpoints = [e.strip() for e in self.server.split(",") if e.strip()]
        if len(endpoints) <= 1:
            return endpoints[0] if endpoints else self.server
        probes = []
        for endpoint in endpoints:
            channel = self._channel_to(endpoint)
            check = channel.unary_unary(
                _HEALTH_CHECK, request_serializer=wrappers_pb2.StringValue.SerializeToString,
                response_deserializer=wrappers_pb2.Int32Value.FromString)
            probes.append((endpoint, channel, check.future(
                wrappers_pb2.StringValue(value=LEADER_HEALTH_SERVICE), timeout=timeout)))
        answered = None
        chosen = None
        for endpoint, channel, future in probes:
            try:
                status = future.result().value
            except grpc.RpcError:
                status = None
            finally:
                channel.close()
            if status == _SERVING and chosen is None:
                chosen = endpoint
            if status is not None and answered is None:
                answered = endpoint
        return chosen or answered or endpoints[0]

    def channel(self) -> grpc.Channel:
        """A new channel to ``server`` (of several replicas, the leader's: :meth:`endpoint`)."""
        return self._channel_to(self.endpoint())

    def aio_channel(self) -> "grpc.aio.Channel":
        """A new asyncio channel to ``server`` (of several, the leader's: :meth:`endpoint`,
        which blocks up to a second) for :mod:`fleet.aio`; make it on the event loop that will
        use it."""
        endpoint = self.endpoint()
        if self.insecure:
            return grpc.aio.insecure_channel(endpoint)
        return grpc.aio.secure_channel(endpoint, self.credentials())


@dataclasses.dataclass
class Config:
    """The client config file as read: ``exists`` is False for a missing file."""

    path: str
    exists: bool = False
    current_context: str = ""
    contexts: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    def find(self, name: str) -> Optional[Dict[str, Any]]:
        return next((c for c in self.contexts if c.get("name") == name), None)

    def names(self) -> str:
        return ", ".join(str(c.get("name")) for c in self.contexts) or "(none)"

    def resolve(self, file: str) -> str:
        """``file`` as the context means it: relative to the config file's folder."""
        if not file or os.path.isabs(file):
            return file
        return os.path.join(os.path.dirname(self.path), file)


def config_path(config: Optional[str] = None,
                environ: Optional[Mapping[str, str]] = None) -> str:
    """The client config file's path, or "" when nothing says where it is."""
    env = os.environ if environ is None else environ
    if config:
        return config
    if env.get("FLEET_CONFIG"):
        return env["FLEET_CONFIG"]
    if env.get("XDG_CONFIG_HOME"):
        return os.path.join(env["XDG_CONFIG_HOME"], "fleet", "config.yaml")
    if env.get("HOME"):
        return os.path.join(env["HOME"], ".config", "fleet", "config.yaml")
    return ""


_TOP_KEYS = ("contexts", "current-context")
# The spellings yaml-cpp reads as booleans, as fleetctl does.
_TRUE = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
_FALSE = {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}


def read_config(path: str) -> Config:
    """Reads and checks the config file as fleetctl does; a missing file is an empty config.
    Every problem is listed in one CredentialsError, a line each, ``FILE:LINE: ...`` naming
    the key, the value and the rule."""
    if not path or not os.path.exists(path):
        return Config(path=path)
    try:
        import yaml
    except ImportError as e:
        raise CredentialsError(f"reading {path} needs PyYAML (Debian's python3-yaml): {e}") from e
    try:
        with open(path, encoding="utf-8") as f:
            root = yaml.compose(f)
    except OSError as e:
        raise CredentialsError(f"cannot read client config file {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise CredentialsError(f"{path}: not YAML: {e}") from e
    config = Config(path=path, exists=True)
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        return config
    problems: List[str] = []

    def problem(node: Any, what: str) -> None:
        problems.append(f"{path}:{node.start_mark.line + 1}: {what}")

    if not isinstance(root, yaml.MappingNode):
        problem(root, "the client config must be a mapping (current-context, contexts)")
        raise CredentialsError(problems[0])

    def scalar(node: Any, key: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            problem(node, f"{key} must be a string")
            return ""
        return node.value

    current_node = None
    first_line: Dict[str, int] = {}
    for key_node, value in root.value:
        key = key_node.value
        if key not in _TOP_KEYS:
            problem(key_node, f"unknown key '{key}'; known: {', '.join(_TOP_KEYS)}")
        elif key == "current-context":
            current_node = value
            config.current_context = scalar(value, key)
        elif not (isinstance(value, yaml.SequenceNode) or
                  (isinstance(value, yaml.ScalarNode) and value.tag.endswith(":null"))):
            problem(value, "contexts must be a list of contexts")
        elif isinstance(value, yaml.SequenceNode):
            for node in value.value:
                context = _read_context(node, problem, scalar)
                if context is None:
                    continue
                name = context["name"]
                line = node.start_mark.line + 1
                if name in first_line:
                    problem(node, f"context '{name}' is named twice (first at line "
                                  f"{first_line[name]}); names must be unique")
                    continue
                first_line[name] = line
                config.contexts.append(context)
    if config.current_context and config.find(config.current_context) is None:
        problem(current_node, f"current-context '{config.current_context}' is not a context; "
                              f"contexts: {config.names()}")
    if problems:
        raise CredentialsError("\n".join(problems))
    return config


def _read_context(node: Any, problem: Callable[[Any, str], None],
                  scalar: Callable[[Any, str], str]) -> Optional[Dict[str, Any]]:
    """One context of the file, checked; None when it has no name or is not a mapping."""
    import yaml
    if not isinstance(node, yaml.MappingNode):
        problem(node, "a context must be a mapping (name, server, ca, cert, key, insecure)")
        return None
    context: Dict[str, Any] = {"insecure": False}
    for key_node, value in node.value:
        key = key_node.value
        if key not in _CONTEXT_KEYS:
            problem(key_node, f"unknown key '{key}' in a context; known: "
                              f"{', '.join(sorted(_CONTEXT_KEYS))}")
        elif key == "insecure":
            text = value.value if isinstance(value, yaml.ScalarNode) else None
            if text in _TRUE or text in _FALSE:
                context["insecure"] = text in _TRUE
            else:
                shown = text if text is not None else "a collection"
                problem(value, f"insecure must be true or false, got '{shown}'")
        else:
            context[key] = scalar(value, key)
    name = context.get("name", "")
    if not name:
        problem(node, "a context needs a name")
        return None
    files = [k for k in ("ca", "cert", "key") if context.get(k)]
    if context["insecure"] and files:
        problem(node, f"context '{name}' is insecure and has ca/cert/key: a context is either "
                      "insecure (plaintext) or TLS")
    elif 0 < len(files) < 3:
        missing = [k for k in ("ca", "cert", "key") if not context.get(k)]
        problem(node, f"context '{name}' has no {' and '.join(missing)}: ca, cert and key go "
                      "together")
    return context


def _boolean(text: str, name: str) -> bool:
    value = text.lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise CredentialsError(f"{name}='{text}' is not a boolean: 1 (plaintext) or 0 (TLS)")


def resolve(server: Optional[str] = None, *, ca: Optional[str] = None,
            cert: Optional[str] = None, key: Optional[str] = None,
            insecure: Optional[bool] = None, context: Optional[str] = None,
            config: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
            default_server: str = DEFAULT_SERVER) -> Connection:
    """Applies the precedence in this module's docstring; raises CredentialsError as fleetctl
    refuses (a named context not in the file, FLEET_INSECURE not a boolean, plaintext and
    files from one source, some of ca/cert/key missing, or no credentials at all)."""
    env = os.environ if environ is None else environ
    cfg = read_config(config_path(config, env))
    if context:
        name, named_by = context, "context"
    elif env.get("FLEET_CONTEXT"):
        name, named_by = env["FLEET_CONTEXT"], "FLEET_CONTEXT"
    else:
        name, named_by = cfg.current_context, "current-context"
    chosen: Optional[Dict[str, Any]] = None
    if name:
        chosen = cfg.find(name)
        if chosen is None:
            where = cfg.path or "any config file (no FLEET_CONFIG, XDG_CONFIG_HOME or HOME)"
            known = f"; contexts: {cfg.names()}" if cfg.exists else " (no such file)"
            raise CredentialsError(f"context '{name}' ({named_by}) is not in {where}{known}")

    address = (server or env.get("FLEET_SERVER") or (chosen or {}).get("server")
               or default_server)

    # (where, ca, cert, key, insecure, how plaintext is asked, how files are given)
    Source = Tuple[str, str, str, str, Optional[bool], str, str]
    sources: List[Source] = [
        ("the arguments", ca or "", cert or "", key or "", insecure, "insecure=True",
         "ca/cert/key"),
        ("the environment", env.get("FLEET_CA", ""), env.get("FLEET_CERT", ""),
         env.get("FLEET_KEY", ""),
         _boolean(env["FLEET_INSECURE"], "FLEET_INSECURE") if env.get("FLEET_INSECURE") else None,
         "FLEET_INSECURE", "FLEET_CA/FLEET_CERT/FLEET_KEY"),
    ]
    if chosen is not None:
        sources.append((f"context {name}", cfg.resolve(chosen.get("ca", "")),
                        cfg.resolve(chosen.get("cert", "")), cfg.resolve(chosen.get("key", "")),
                        True if chosen.get("insecure") else None, "insecure: true",
                        "ca/cert/key"))

    plaintext: Optional[bool] = None
    for where, s_ca, s_cert, s_key, s_insecure, insecure_by, files_by in sources:
        has_files = bool(s_ca or s_cert or s_key)
        if s_insecure is True and has_files:
            raise CredentialsError(f"{insecure_by} and {files_by} both come from {where}: "
                                   "plaintext or TLS, not both")
        if s_insecure is not None or has_files:
            plaintext = bool(s_insecure)
            break
    if plaintext:
        return Connection(server=address, insecure=True, context=name)

    files = {"ca": "", "cert": "", "key": ""}
    for _, s_ca, s_cert, s_key, _, _, _ in sources:
        for field, value in (("ca", s_ca), ("cert", s_cert), ("key", s_key)):
            files[field] = files[field] or value
    if not any(files.values()):
        raise CredentialsError(
            f"no credentials for {address}: give ca, cert and key (or FLEET_CA, FLEET_CERT, "
            "FLEET_KEY), or a context (fleetctl config use-context NAME); insecure=True for a "
            "fleetd started with --insecure")
    for field, what, variable in (("ca", "CA bundle", "FLEET_CA"),
                                  ("cert", "client certificate", "FLEET_CERT"),
                                  ("key", "client key", "FLEET_KEY")):
        if not files[field]:
            raise CredentialsError(f"no {what} for {address}: give {field} or {variable} "
                                   "(TLS needs ca, cert and key)")
    return Connection(server=address, ca=files["ca"], cert=files["cert"], key=files["key"],
                      context=name)


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CredentialsError(f"cannot read {what} {path}: {e.strerror}") from e
    if not data:
        raise CredentialsError(f"{what} {path} is empty")
    return data
