#include "controller/cli/admin_verbs.h"

#include <google/protobuf/struct.pb.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/version.h"
#include "controller/cli/descriptions.h"
#include "controller/cli/get_describe_verbs.h"
#include "controller/cli/object_text.h"
#include "controller/cli/printing.h"
#include "controller/cli/tables.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

// What a drain or undrain applies to (see DrainTarget).
constexpr KindName kDrainKinds[] = {{"ports", "port"}, {"onics", "onic"}, {"hosts", "host"}};

const std::vector<std::string>& LinkSubcommands() {
  static const auto* words = new std::vector<std::string>{"retrain", "status"};
  return *words;
}

// The thing `KIND NAME` names, for drain and undrain; false, having printed a usage error for
// `verb`, when it names none.
bool ParseDrainTarget(const Session& s, absl::string_view verb, const std::string& kind,
                      const std::string& name, v1::DrainTarget* target) {
  absl::string_view singular = Singular(kDrainKinds, kind);
  if (singular.empty()) {
    UsageError(*s.err, verb,
               absl::StrCat("unknown kind '", kind, "'; kinds: ", Singulars(kDrainKinds)));
    return false;
  }
  if (singular == "onic") {
    target->set_onic(name);
  } else if (singular == "host") {
    target->set_host(name);
  } else if (!ParseSwitchPort(name, target->mutable_switch_port())) {
    UsageError(*s.err, verb,
               absl::StrCat("a port is SWITCH/PORT, such as ocs1/5; got '", name, "'"));
    return false;
  }
  return true;
}

void DeclareDrainFlags(FlagTable& f, DrainArgs& a) {
  f.Bool("evict", &a.evict,
         "also move the allocations using it off it (their members there replaced by spares), "
         "failing those that cannot be moved");
  f.String("reason", &a.reason, "why, recorded in the event log");
}

int RunDrain(const Session& s, const DrainArgs& flags, const Positional& p) {
  if (p.size() != 2) {
    return UsageError(*s.err, "drain",
                      absl::StrCat("drain needs KIND and NAME (port SWITCH/PORT, onic ID "
                                   "or host NAME), got ",
                                   p.empty() ? "nothing" : Joined(p)));
  }
  DrainArgs args = flags;
  args.kind = p[0];
  args.name = p[1];
  return Drain(s, args);
}

int RunUndrain(const Session& s, const Positional& p) {
  if (p.size() != 2) {
    return UsageError(*s.err, "undrain",
                      absl::StrCat("undrain needs KIND and NAME (port SWITCH/PORT, onic "
                                   "ID or host NAME), got ",
                                   p.empty() ? "nothing" : Joined(p)));
  }
  return Undrain(s, p[0], p[1]);
}

void DeclareReconcileFlags(FlagTable& f, ReconcileArgs& a) {
  f.String("switch", &a.switch_id, "only this switch");
  f.Bool("adopt-unknown", &a.adopt_unknown, "record unknown cross-connects as manual circuits");
  f.Bool("remove-unknown", &a.remove_unknown, "take unknown cross-connects off the switch");
  f.Bool("dry-run", &a.dry_run, "report the drift; change nothing");
}

int RunReconcile(const Session& s, const ReconcileArgs& args, const Positional& p) {
  if (!p.empty()) {
    return UsageError(
        *s.err, "reconcile",
        absl::StrCat("unexpected argument ", Joined(p), "; a switch goes after --switch"));
  }
  return Reconcile(s, args);
}

void DeclareEventsFlags(FlagTable& f, EventsArgs& a) {
  f.Bool("follow", &a.follow, "keep printing new events as they are recorded");
  f.Int("after", &a.after,
        "only events after this sequence number (default: the whole log; with --follow, "
        "only events recorded from now on)",
        /*shown_default=*/"");
  f.String("since", &a.since,
           "only events of this last while, a duration such as 90s, 10m or 1h30m (with "
           "--follow: those, then every new one)");
  // `get events` calls it --kind; --object-kind was this verb's name for it.
  f.String("kind", &a.object_kind,
           "only events about this kind of object (switch, port, host, device, onic, "
           "allocation, circuit, agent)");
  f.Alias("object-kind", "kind");
  f.String("object", &a.object, "only events about this object id");
}

int RunEvents(const Session& s, const EventsArgs& args, const Positional& p) {
  if (!p.empty()) {
    return UsageError(*s.err, "events", absl::StrCat("unexpected argument ", Joined(p)));
  }
  return Events(s, args);
}

int RunLink(const Session& s, const Positional& p) {
  if (p.empty()) {
    return UsageError(*s.err, "link", "link needs a subcommand: retrain ONIC PORT, or status ONIC");
  }
  if (p[0] == "retrain") {
    if (p.size() != 3) {
      return UsageError(*s.err, "link",
                        absl::StrCat("link retrain needs ONIC and PORT, got ", Joined(p)));
    }
    int64_t port = 0;
    if (!absl::SimpleAtoi(p[2], &port) || (port != 1 && port != 2)) {
      return UsageError(*s.err, "link", absl::StrCat("PORT must be 1 or 2, got '", p[2], "'"));
    }
    return LinkRetrain(s, p[1], port);
  }
  if (p[0] == "status") {
    if (p.size() != 2) {
      return UsageError(*s.err, "link",
                        absl::StrCat("link status needs one ONIC, got ", Joined(p)));
    }
    return LinkStatus(s, p[1]);
  }
  return UsageError(*s.err, "link",
                    absl::StrCat("unknown link subcommand '", p[0],
                                 "'; subcommands: ", absl::StrJoin(LinkSubcommands(), ", ")));
}

int RunHealth(const Session& s, const Positional& p) {
  if (!p.empty()) {
    return UsageError(*s.err, "health", absl::StrCat("unexpected argument ", Joined(p)));
  }
  return Health(s);
}

int RunVersion(const Session& s, const Positional& p) {
  if (!p.empty()) {
    return UsageError(*s.err, "version", absl::StrCat("unexpected argument ", Joined(p)));
  }
  return Version(s);
}

}  // namespace

int Drain(const Session& s, const DrainArgs& args) {
  v1::DrainRequest request;
  if (!ParseDrainTarget(s, "drain", args.kind, args.name, request.mutable_target())) {
    return kExitUsage;
  }
  request.set_evict(args.evict);
  request.set_reason(args.reason);
  v1::DrainResponse response;
  grpc::Status status =
      s.Call([&](grpc::ClientContext* c) { return s.server->admin->Drain(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << DrainText(request, response);
  return kExitOk;
}

int Undrain(const Session& s, const std::string& kind, const std::string& name) {
  v1::UndrainRequest request;
  if (!ParseDrainTarget(s, "undrain", kind, name, request.mutable_target())) return kExitUsage;
  v1::UndrainResponse response;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->admin->Undrain(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << "undrained " << DrainTargetText(request.target()) << "\n";
  return kExitOk;
}

int Reconcile(const Session& s, const ReconcileArgs& args) {
  if (args.adopt_unknown && args.remove_unknown) {
    return UsageError(*s.err, "reconcile",
                      "--adopt-unknown and --remove-unknown exclude each other; give one at most");
  }
  v1::ReconcileRequest request;
  request.set_switch_id(args.switch_id);
  request.set_dry_run(args.dry_run);
  if (args.adopt_unknown) request.set_unknown(v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT);
  if (args.remove_unknown) request.set_unknown(v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE);
  v1::ReconcileResponse response;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->admin->Reconcile(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << ReconcileText(request, response);
  return kExitOk;
}

namespace {

// The sequence number the events shown come after, by the rules of EventsArgs; false, having
// printed why, when the flags are malformed or the server did not answer.
bool EventsStart(const Session& s, const EventsArgs& args, uint64_t* after, int* failed) {
  *failed = kExitUsage;
  const bool after_given = args.after != EventsArgs::kEventsAfterUnset;
  if (after_given && args.after < 0) {
    UsageError(*s.err, "events", absl::StrCat("--after must be 0 or more, got ", args.after));
    return false;
  }
  if (after_given && !args.since.empty()) {
    UsageError(*s.err, "events", "--after and --since exclude each other; give one at most");
    return false;
  }
  grpc::Status status;
  if (!args.since.empty()) {
    absl::Duration since;
    if (!absl::ParseDuration(args.since, &since) || since <= absl::ZeroDuration() ||
        since == absl::InfiniteDuration()) {
      UsageError(*s.err, "events",
                 absl::StrCat("--since: '", args.since,
                              "' is not a positive duration such as 90s, 10m or 1h30m"));
      return false;
    }
    status = LastEventBefore(s, s.clock->Now() - since, after);
  } else if (after_given) {
    *after = static_cast<uint64_t>(args.after);
  } else if (args.follow) {
    // Following is for what happens next; the log so far is `events` without --follow.
    status = LastEventSequence(s, after);
  } else {
    *after = 0;
  }
  if (!status.ok()) {
    *failed = s.Failed(status);
    return false;
  }
  return true;
}

}  // namespace

int Events(const Session& s, const EventsArgs& args) {
  uint64_t after = 0;
  if (int failed; !EventsStart(s, args, &after, &failed)) return failed;
  if (!args.follow) {
    GetArgs get;
    get.kind = "events";
    get.kind_filter = args.object_kind;
    get.object = args.object;
    get.after = static_cast<int64_t>(after);
    return Get(s, get);
  }
  v1::WatchEventsRequest request;
  request.set_after_sequence(after);
  request.set_object_kind(args.object_kind);
  request.set_object_id(args.object);
  EventStream stream(s, request);
  v1::Event event;
  bool header_printed = false;
  while (stream.Read(&event)) {
    if (s.format == OutputFormat::kTable) {
      // Printed with the first row, so a refused watch leaves no stray header on stdout.
      if (!header_printed) *s.out << EventsStreamHeader();
      header_printed = true;
      *s.out << EventsStreamRow(event);
    } else {
      absl::StatusOr<std::string> text = FormatStreamedMessage(s.format, event);
      if (!text.ok()) {
        stream.Abandon();
        return s.Failed(ToGrpcStatus(text.status()));
      }
      *s.out << *text;
    }
    // Each event is shown when it arrives, also through a pipe.
    s.out->flush();
  }
  return stream.Finish();
}

int LinkRetrain(const Session& s, const std::string& onic, int64_t port) {
  if (port != 1 && port != 2) {
    return UsageError(*s.err, "link", absl::StrCat("PORT must be 1 or 2, got '", port, "'"));
  }
  v1::RetrainLinkRequest request;
  request.set_onic(onic);
  request.set_port(static_cast<uint32_t>(port));
  v1::LinkState state;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->admin->RetrainLink(c, request, &state); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, state);
  // The line names the port asked for, should the agent leave it out of its answer.
  if (state.port() == 0) state.set_port(request.port());
  *s.out << LinkStateLine(onic, state) << "\n";
  return kExitOk;
}

int LinkStatus(const Session& s, const std::string& onic) {
  v1::GetLinkStatusRequest request;
  request.set_onic(onic);
  return PrintList<v1::GetLinkStatusResponse>(
      s, "link ports",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->admin->GetLinkStatus(c, request, r);
      },
      LinkStatusTable);
}

int Health(const Session& s) {
  v1::HealthResponse response;
  grpc::Status status =
      s.Call([&](grpc::ClientContext* c) { return s.server->admin->Health(c, {}, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  Table table = HealthTable(response);
  if (!table.empty()) *s.out << table.Render(s.color);
  std::string overall = v1::Name(response.overall());
  if (overall.empty()) overall = "unknown";
  *s.out << "overall: " << (s.color ? ColorState(overall) : overall) << "\n";
  return kExitOk;
}

int Version(const Session& s) {
  v1::HealthResponse response;
  grpc::Status status =
      s.Call([&](grpc::ClientContext* c) { return s.server->admin->Health(c, {}, &response); });
  if (s.format != OutputFormat::kTable) {
    // No proto holds both versions; a Struct prints through the same JSON mapping.
    google::protobuf::Struct versions;
    (*versions.mutable_fields())["client"].set_string_value(kVersion);
    if (status.ok()) (*versions.mutable_fields())["server"].set_string_value(response.version());
    return PrintMessage(s, versions);
  }
  *s.out << "fleetctl " << kVersion << "\n";
  if (status.ok()) {
    *s.out << "server " << (response.version().empty() ? "(no version)" : response.version())
           << "\n";
    return kExitOk;
  }
  // Still exit 0: the client's version, which was asked for, is printed.
  bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  *s.out << "server: " << (unreachable ? "unreachable" : "unknown") << " ("
         << absl::StatusCodeToString(FromGrpcStatus(status).code()) << ": "
         << status.error_message() << ")\n";
  return kExitOk;
}

Verb DrainVerb() {
  return {"drain",
          "fleetctl drain (port SWITCH/PORT | onic ID | host NAME) [--evict] [--reason TEXT] "
          "[flags]",
          "Refuse new circuits on a port, O-NIC or host",
          absl::StrCat(
              "Drain a switch port, an O-NIC or a host: no new circuit uses it. Existing circuits\n"
              "stay unless --evict, which moves each allocation using it off it by replacing\n"
              "its members there with spares, and fails with the reason one that cannot be\n"
              "moved. Prints the allocations using it, and what became of each.\n\nKinds: ",
              Singulars(kDrainKinds)),
          WithFlags<DrainArgs>(DeclareDrainFlags, RunDrain),
          SingularWords(kDrainKinds)};
}

Verb UndrainVerb() {
  return {"undrain",
          "fleetctl undrain (port SWITCH/PORT | onic ID | host NAME) [flags]",
          "Accept new circuits on a drained port, O-NIC or host",
          absl::StrCat("Undo a drain: new circuits may use it again.\n\nKinds: ",
                       Singulars(kDrainKinds)),
          WithoutFlags(RunUndrain),
          SingularWords(kDrainKinds)};
}

Verb ReconcileVerb() {
  return {"reconcile",
          "fleetctl reconcile [--switch ID] [--adopt-unknown | --remove-unknown] [--dry-run] "
          "[flags]",
          "Compare the switches with the desired circuits and repair",
          "Read every switch (or one), compare it with the desired circuits, resume or roll\n"
          "back interrupted transactions and make missing cross-connects. A cross-connect\n"
          "no circuit asked for is handled by the server's configured policy unless\n"
          "--adopt-unknown (record it as a manual circuit) or --remove-unknown (take it off\n"
          "the switch) says otherwise. Prints the drift (kind, switch, ingress, egress,\n"
          "circuit, what was done) and the counts.",
          WithFlags<ReconcileArgs>(DeclareReconcileFlags, RunReconcile),
          {}};
}

Verb EventsVerb() {
  return {"events",
          "fleetctl events [--follow] [--after N | --since DURATION] [--kind K] [--object ID] "
          "[flags]",
          "Show the event log, or follow it",
          "Show the append-only event and audit log, as 'fleetctl get events' does. With\n"
          "--follow, keep printing each event as it is recorded from now on (a table row, or\n"
          "with -o json one JSON object per line) until the server ends the stream or you\n"
          "interrupt; --timeout does not apply then. --since 10m starts ten minutes back,\n"
          "--after N after event N (--after 0: the whole log).",
          WithFlags<EventsArgs>(DeclareEventsFlags, RunEvents),
          {}};
}

Verb LinkVerb() {
  return {"link",
          "fleetctl link (retrain ONIC PORT | status ONIC) [flags]",
          "Retrain an O-NIC port, or show its ports' link state",
          "Operate on an O-NIC's optical links through the agent on its host.\n\n"
          "  retrain ONIC PORT  Retrain one port (1 or 2) and print its state afterwards.\n"
          "  status ONIC        Show both ports: status, PCIe speed and width, optical\n"
          "                     power, the peer seen on rx, and why a link is not up.\n\n"
          "With -o json or yaml, prints the LinkState (retrain) or the GetLinkStatus\n"
          "response (status).",
          WithoutFlags(RunLink),
          LinkSubcommands()};
}

Verb HealthVerb() {
  return {"health",
          "fleetctl health [flags]",
          "Show the health of fleetd and what it drives",
          "Show each component's state (store, switches, agents) and the overall state.",
          WithoutFlags(RunHealth),
          {}};
}

Verb VersionVerb() {
  return {"version",
          "fleetctl version [flags]",
          "Show the client and server versions",
          "Print fleetctl's version and, if the server answers, fleetd's.",
          WithoutFlags(RunVersion),
          {}};
}

}  // namespace fleet::cli
