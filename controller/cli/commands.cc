#include "controller/cli/commands.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "controller/base/flags.h"
#include "controller/base/grpc_status.h"
#include "controller/cli/topology_spec.h"
#include "controller/inventory/inventory.h"
#include "fleet/v1/names.h"

#ifndef FLEET_VERSION
#define FLEET_VERSION "unknown"
#endif

namespace fleet::cli {
namespace {

// Prints a command-line problem with a pointer to the verb's help; returns kExitUsage.
int UsageError(std::ostream& err, absl::string_view verb, absl::string_view problem) {
  err << "error: " << problem << "\n";
  if (verb.empty()) {
    err << "Run 'fleetctl --help' for usage.\n";
  } else {
    err << "Run 'fleetctl " << verb << " --help' for usage.\n";
  }
  return kExitUsage;
}

int PrintMessage(const Session& s, const google::protobuf::Message& message) {
  absl::StatusOr<std::string> text = FormatMessage(s.format, message);
  if (!text.ok()) return s.Failed(ToGrpcStatus(text.status()));
  *s.out << *text;
  return kExitOk;
}

// Runs a List RPC (`rpc(context, &response)`) and prints the response: as a table for
// people, or as the whole message for scripts.
template <typename Response, typename Rpc, typename MakeTable>
int PrintList(const Session& s, absl::string_view kind, Rpc rpc, MakeTable make_table) {
  Response response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  Table table = make_table(response);
  // Like kubectl: the note goes to stderr so a pipe sees an empty list, not a sentence.
  if (table.empty()) {
    *s.err << "no " << kind << " found\n";
  } else {
    *s.out << table.Render();
  }
  return kExitOk;
}

// A kind's two names; every verb accepts either ("switches" or "switch").
struct KindName {
  absl::string_view plural;
  absl::string_view singular;
};

// The singular name of the kind `text` names, or "" when it names none of `kinds`.
template <size_t N>
absl::string_view Singular(const KindName (&kinds)[N], absl::string_view text) {
  for (const KindName& k : kinds) {
    if (text == k.plural || text == k.singular) return k.singular;
  }
  return "";
}

template <size_t N>
std::string Singulars(const KindName (&kinds)[N]) {
  std::vector<absl::string_view> names;
  for (const KindName& k : kinds) names.push_back(k.singular);
  return absl::StrJoin(names, ", ");
}

// ---------------------------------------------------------------------------------------
// get

int GetSwitches(const Session& s, const GetArgs&) {
  return PrintList<v1::ListSwitchesResponse>(
      s, "switches",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListSwitches(c, {}, r); },
      SwitchesTable);
}

int GetPorts(const Session& s, const GetArgs& args) {
  v1::ListPortsRequest request;
  request.set_switch_id(args.switch_id);
  return PrintList<v1::ListPortsResponse>(
      s, "ports",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->inventory->ListPorts(c, request, r);
      },
      PortsTable);
}

int GetHosts(const Session& s, const GetArgs&) {
  return PrintList<v1::ListHostsResponse>(
      s, "hosts",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListHosts(c, {}, r); },
      HostsTable);
}

int GetAgents(const Session& s, const GetArgs&) {
  return PrintList<v1::ListAgentsResponse>(
      s, "agents",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListAgents(c, {}, r); },
      [&](const v1::ListAgentsResponse& r) { return AgentsTable(r, s.clock->Now()); });
}

int GetDevices(const Session& s, const GetArgs& args) {
  v1::ListDevicesRequest request;
  request.set_host(args.host);
  if (!args.kind_filter.empty()) {
    std::optional<v1::DeviceKind> kind = v1::Parse<v1::DeviceKind>(args.kind_filter);
    if (!kind) {
      return UsageError(*s.err, "get",
                        absl::StrCat("unknown device kind '", args.kind_filter, "'; kinds: ",
                                     absl::StrJoin(v1::Names<v1::DeviceKind>(), ", ")));
    }
    request.set_kind(*kind);
  }
  return PrintList<v1::ListDevicesResponse>(
      s, "devices",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->inventory->ListDevices(c, request, r);
      },
      DevicesTable);
}

int GetOnics(const Session& s, const GetArgs& args) {
  v1::ListOnicsRequest request;
  request.set_host(args.host);
  request.set_switch_id(args.switch_id);
  return PrintList<v1::ListOnicsResponse>(
      s, "onics",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->inventory->ListOnics(c, request, r);
      },
      OnicsTable);
}

int GetTrunks(const Session& s, const GetArgs&) {
  return PrintList<v1::ListTrunksResponse>(
      s, "trunks",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListTrunks(c, {}, r); },
      TrunksTable);
}

int GetCircuits(const Session& s, const GetArgs& args) {
  v1::ListCircuitsRequest request;
  request.set_switch_id(args.switch_id);
  request.set_allocation_id(args.allocation);
  return PrintList<v1::ListCircuitsResponse>(
      s, "circuits",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->inventory->ListCircuits(c, request, r);
      },
      CircuitsTable);
}

int GetAllocations(const Session& s, const GetArgs& args) {
  v1::ListAllocationsRequest request;
  request.set_tenant(args.tenant);
  return PrintList<v1::ListAllocationsResponse>(
      s, "allocations",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->topology->ListAllocations(c, request, r);
      },
      [&](const v1::ListAllocationsResponse& r) { return AllocationsTable(r, s.clock->Now()); });
}

int GetEvents(const Session& s, const GetArgs& args) {
  constexpr int64_t kMaxLimit = std::numeric_limits<uint32_t>::max();
  if (args.after < 0) {
    return UsageError(*s.err, "get", absl::StrCat("--after must be 0 or more, got ", args.after));
  }
  if (args.limit < 0 || args.limit > kMaxLimit) {
    return UsageError(
        *s.err, "get",
        absl::StrCat("--limit must be between 0 and ", kMaxLimit, ", got ", args.limit));
  }
  v1::ListEventsRequest request;
  request.set_after_sequence(args.after);
  request.set_limit(static_cast<uint32_t>(args.limit));
  request.set_object_kind(args.kind_filter);
  request.set_object_id(args.object);
  return PrintList<v1::ListEventsResponse>(
      s, "events",
      [&](grpc::ClientContext* c, auto* r) { return s.server->admin->ListEvents(c, request, r); },
      EventsTable);
}

struct GetKind {
  KindName name;
  std::vector<absl::string_view> filters;  // The flags that apply to this kind.
  absl::string_view filter_help;           // For `get --help`.
  int (*run)(const Session&, const GetArgs&);
};

const std::vector<GetKind>& GetKinds() {
  static const auto* kinds = new std::vector<GetKind>{
      {{"switches", "switch"}, {}, "", GetSwitches},
      {{"ports", "port"}, {"switch"}, "--switch", GetPorts},
      {{"hosts", "host"}, {}, "", GetHosts},
      {{"agents", "agent"}, {}, "", GetAgents},
      {{"devices", "device"}, {"host", "kind"}, "--host, --kind (a device kind)", GetDevices},
      {{"onics", "onic"}, {"host", "switch"}, "--host, --switch", GetOnics},
      {{"trunks", "trunk"}, {}, "", GetTrunks},
      {{"circuits", "circuit"}, {"switch", "allocation"}, "--switch, --allocation", GetCircuits},
      {{"allocations", "allocation"}, {"tenant"}, "--tenant", GetAllocations},
      {{"events", "event"},
       {"kind", "object", "after", "limit"},
       "--kind (an object kind), --object, --after, --limit",
       GetEvents},
  };
  return *kinds;
}

std::string GetKindList() {
  std::vector<absl::string_view> names;
  for (const GetKind& k : GetKinds()) names.push_back(k.name.plural);
  return absl::StrJoin(names, ", ");
}

// ---------------------------------------------------------------------------------------
// describe

int DescribeSwitchVerb(const Session& s, const std::string& id) {
  v1::GetSwitchRequest request;
  request.set_id(id);
  v1::Switch sw;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->GetSwitch(c, request, &sw); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, sw);

  v1::ListPortsRequest ports_request;
  ports_request.set_switch_id(id);
  v1::ListPortsResponse ports;
  status = s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->ListPorts(c, ports_request, &ports);
  });
  if (!status.ok()) return s.Failed(status);
  *s.out << DescribeSwitch(sw, {ports.ports().begin(), ports.ports().end()});
  return kExitOk;
}

int DescribeHostVerb(const Session& s, const std::string& name) {
  v1::GetHostRequest request;
  request.set_name(name);
  v1::Host host;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->GetHost(c, request, &host); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, host);

  v1::ListDevicesRequest devices_request;
  devices_request.set_host(name);
  v1::ListDevicesResponse devices;
  status = s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->ListDevices(c, devices_request, &devices);
  });
  if (!status.ok()) return s.Failed(status);
  v1::ListAgentsResponse agents;
  status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->ListAgents(c, {}, &agents); });
  // A fleetd without an agent registry answers UNIMPLEMENTED: describe the host without it.
  if (!status.ok() && status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
    return s.Failed(status);
  }
  const v1::Agent* agent = nullptr;
  for (const v1::Agent& a : agents.agents()) {
    if (a.host() == name) agent = &a;
  }
  *s.out << DescribeHost(host, {devices.devices().begin(), devices.devices().end()}, agent);
  return kExitOk;
}

// ListAgents has no host filter, so the host's agent is picked out here.
int DescribeAgentVerb(const Session& s, const std::string& host) {
  v1::ListAgentsResponse agents;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->ListAgents(c, {}, &agents); });
  if (!status.ok()) return s.Failed(status);
  for (const v1::Agent& agent : agents.agents()) {
    if (agent.host() != host) continue;
    if (s.format != OutputFormat::kTable) return PrintMessage(s, agent);
    *s.out << DescribeAgent(agent, s.clock->Now());
    return kExitOk;
  }
  return s.Failed(grpc::Status(grpc::StatusCode::NOT_FOUND,
                               absl::StrCat("agent ", host, " has never connected")));
}

int DescribeDeviceVerb(const Session& s, const std::string& id) {
  v1::GetDeviceRequest request;
  request.set_id(id);
  v1::Device device;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->GetDevice(c, request, &device); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, device);

  std::vector<v1::Onic> onics;
  for (const std::string& onic_id : device.onics()) {
    v1::GetOnicRequest onic_request;
    onic_request.set_id(onic_id);
    v1::Onic onic;
    status = s.Call([&](grpc::ClientContext* c) {
      return s.server->inventory->GetOnic(c, onic_request, &onic);
    });
    if (!status.ok()) return s.Failed(status);
    onics.push_back(std::move(onic));
  }
  *s.out << DescribeDevice(device, onics);
  return kExitOk;
}

int DescribeOnicVerb(const Session& s, const std::string& id) {
  v1::GetOnicRequest request;
  request.set_id(id);
  v1::Onic onic;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->GetOnic(c, request, &onic); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, onic);

  // ListCircuits has no O-NIC filter, so the O-NIC's circuits are picked out here.
  v1::ListCircuitsResponse all;
  status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->ListCircuits(c, {}, &all); });
  if (!status.ok()) return s.Failed(status);
  std::vector<v1::Circuit> circuits;
  for (const v1::Circuit& circuit : all.circuits()) {
    if (circuit.source().onic() == id || circuit.destination().onic() == id) {
      circuits.push_back(circuit);
    }
  }
  *s.out << DescribeOnic(onic, circuits);
  return kExitOk;
}

int DescribeAllocationVerb(const Session& s, const std::string& id) {
  v1::GetAllocationRequest request;
  request.set_id(id);
  v1::Allocation allocation;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->GetAllocation(c, request, &allocation);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, allocation);
  *s.out << DescribeAllocation(allocation, s.clock->Now());
  return kExitOk;
}

constexpr KindName kDescribeKinds[] = {{"switches", "switch"}, {"hosts", "host"},
                                       {"agents", "agent"},    {"devices", "device"},
                                       {"onics", "onic"},      {"allocations", "allocation"}};

// The kinds DeleteObject accepts (see DeleteObjectRequest).
constexpr KindName kDeleteKinds[] = {{"switches", "switch"},
                                     {"hosts", "host"},
                                     {"devices", "device"},
                                     {"onics", "onic"},
                                     {"trunks", "trunk"}};

// ---------------------------------------------------------------------------------------
// The command line

struct GlobalOptions {
  std::string server;
  std::string output = "table";
  int64_t timeout_seconds = 10;
};

// Every verb's arguments; each verb declares flags only for its own fields.
struct CommandLine {
  GetArgs get;
  ApplyArgs apply;
  std::vector<std::string> positional;
};

struct Verb {
  absl::string_view name;
  absl::string_view usage;
  absl::string_view summary;  // One line, for the overview.
  std::string description;
  void (*declare)(FlagSet& flags, CommandLine& line);
  // Checks the positional arguments and runs.
  int (*run)(const Session& session, const CommandLine& line);
};

void NoFlags(FlagSet&, CommandLine&) {}

std::string Joined(const std::vector<std::string>& words) {
  return absl::StrCat("'", absl::StrJoin(words, " "), "'");
}

const std::vector<Verb>& Verbs() {
  static const auto* verbs = new std::vector<Verb>{
      {"get", "fleetctl get KIND [flags]", "List every object of one kind",
       [] {
         std::string d =
             "List every object of one kind, as a table or (-o json|yaml) as the List\n"
             "response.\n\nKinds, and the filters each takes:\n";
         for (const GetKind& k : GetKinds()) {
           std::string kind(k.name.plural);
           kind.resize(14, ' ');
           absl::StrAppend(&d, "  ", kind, k.filter_help.empty() ? "-" : k.filter_help, "\n");
         }
         absl::StrAppend(&d, "The singular forms (switch, port, ...) work too.");
         return d;
       }(),
       [](FlagSet& f, CommandLine& l) {
         f.String("switch", &l.get.switch_id, "only this switch's ports, O-NICs or circuits");
         f.String("host", &l.get.host, "only this host's devices or O-NICs");
         f.String("kind", &l.get.kind_filter,
                  absl::StrCat("devices: a device kind (",
                               absl::StrJoin(v1::Names<v1::DeviceKind>(), ", "),
                               "); events: an object kind"));
         f.String("tenant", &l.get.tenant, "only this tenant's allocations");
         f.String("allocation", &l.get.allocation, "only this allocation's circuits");
         f.String("object", &l.get.object, "events: only those about this object id");
         f.Int("after", &l.get.after, "events: only those after this sequence number");
         f.Int("limit", &l.get.limit, "events: at most this many (0: the server's default)");
       },
       [](const Session& s, const CommandLine& l) {
         if (l.positional.empty()) {
           return UsageError(*s.err, "get",
                             absl::StrCat("get needs a KIND; kinds: ", GetKindList()));
         }
         if (l.positional.size() > 1) {
           return UsageError(
               *s.err, "get",
               absl::StrCat("get takes one KIND, got ", Joined(l.positional),
                            "; to show one object use 'fleetctl describe KIND NAME'"));
         }
         GetArgs args = l.get;
         args.kind = l.positional[0];
         return Get(s, args);
       }},
      {"describe", "fleetctl describe KIND NAME [flags]", "Show one object in detail",
       absl::StrCat("Show one object and what belongs to it: a switch's port usage, a host's\n"
                    "devices and agent, an agent's connection, O-NICs and inventory mismatches\n"
                    "(by host name), a device's O-NICs with their ports and fibers, an O-NIC's\n"
                    "circuits, an allocation's members, circuits and stage timings. With -o json\n"
                    "or yaml, prints just the object.\n\nKinds: ",
                    Singulars(kDescribeKinds)),
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 2) {
           return UsageError(*s.err, "describe",
                             absl::StrCat("describe needs KIND and NAME, got ",
                                          l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         return Describe(s, l.positional[0], l.positional[1]);
       }},
      {"apply", "fleetctl apply -f FILE [--dry-run] [flags]",
       "Create or update the inventory from a file",
       "Read an inventory file (see docs/inventory.md), then create what is new and\n"
       "update what changed, in one transaction. Nothing is deleted. Prints the counts\n"
       "and one line per change.",
       [](FlagSet& f, CommandLine& l) {
         f.String("file,f", &l.apply.file, "the inventory file (YAML)");
         f.Bool("dry-run", &l.apply.dry_run,
                "validate and report what would change; store nothing");
       },
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "apply",
                             absl::StrCat("unexpected argument ", Joined(l.positional),
                                          "; the file goes after -f"));
         }
         if (l.apply.file.empty()) return UsageError(*s.err, "apply", "apply needs -f FILE");
         return Apply(s, l.apply);
       }},
      {"topology", "fleetctl topology request -f FILE [--dry-run] [flags]",
       "Plan (and request) a topology from a file",
       "Send a topology request file (see deploy/examples/) to fleetd and print the plan:\n"
       "the members, and each circuit with the cross-connect that makes it. With --dry-run\n"
       "nothing is stored or programmed. This fleetd plans links and rings; it does not\n"
       "program allocations yet, so requests without --dry-run are refused.",
       [](FlagSet& f, CommandLine& l) {
         f.String("file,f", &l.apply.file, "the topology request file (YAML)");
         f.Bool("dry-run", &l.apply.dry_run, "plan only; change nothing");
       },
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 1 || l.positional[0] != "request") {
           return UsageError(*s.err, "topology",
                             absl::StrCat("topology takes the subcommand 'request', got ",
                                          l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         if (l.apply.file.empty())
           return UsageError(*s.err, "topology", "topology request needs -f FILE");
         return RequestTopology(s, l.apply);
       }},
      {"delete", "fleetctl delete KIND NAME [flags]", "Delete one inventory object",
       absl::StrCat("Delete one object and what belongs only to it (a device's O-NICs and their\n"
                    "fibers). Refused while it is in use.\n\nKinds: ",
                    Singulars(kDeleteKinds)),
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 2) {
           return UsageError(*s.err, "delete",
                             absl::StrCat("delete needs KIND and NAME, got ",
                                          l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         return Delete(s, l.positional[0], l.positional[1]);
       }},
      {"link", "fleetctl link (retrain ONIC PORT | status ONIC) [flags]",
       "Retrain an O-NIC port, or show its ports' link state",
       "Operate on an O-NIC's optical links through the agent on its host.\n\n"
       "  retrain ONIC PORT  Retrain one port (1 or 2) and print its state afterwards.\n"
       "  status ONIC        Show both ports: status, PCIe speed and width, optical\n"
       "                     power, the peer seen on rx, and why a link is not up.\n\n"
       "With -o json or yaml, prints the LinkState (retrain) or the GetLinkStatus\n"
       "response (status).",
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         const std::vector<std::string>& p = l.positional;
         if (p.empty()) {
           return UsageError(*s.err, "link",
                             "link needs a subcommand: retrain ONIC PORT, or status ONIC");
         }
         if (p[0] == "retrain") {
           if (p.size() != 3) {
             return UsageError(*s.err, "link",
                               absl::StrCat("link retrain needs ONIC and PORT, got ", Joined(p)));
           }
           int64_t port = 0;
           if (!absl::SimpleAtoi(p[2], &port) || (port != 1 && port != 2)) {
             return UsageError(*s.err, "link",
                               absl::StrCat("PORT must be 1 or 2, got '", p[2], "'"));
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
         return UsageError(
             *s.err, "link",
             absl::StrCat("unknown link subcommand '", p[0], "'; subcommands: retrain, status"));
       }},
      {"health", "fleetctl health [flags]", "Show the health of fleetd and what it drives",
       "Show each component's state (store, switches, agents) and the overall state.", NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "health",
                             absl::StrCat("unexpected argument ", Joined(l.positional)));
         }
         return Health(s);
       }},
      {"version", "fleetctl version [flags]", "Show the client and server versions",
       "Print fleetctl's version and, if the server answers, fleetd's.", NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "version",
                             absl::StrCat("unexpected argument ", Joined(l.positional)));
         }
         return Version(s);
       }},
  };
  return *verbs;
}

const Verb* FindVerb(absl::string_view name) {
  for (const Verb& verb : Verbs()) {
    if (verb.name == name) return &verb;
  }
  return nullptr;
}

std::string VerbList() {
  std::vector<absl::string_view> names;
  for (const Verb& verb : Verbs()) names.push_back(verb.name);
  names.push_back("help");
  return absl::StrJoin(names, ", ");
}

void DeclareGlobalFlags(FlagSet& flags, GlobalOptions& global) {
  flags.String("server", &global.server, "fleetd's address, HOST:PORT (env FLEET_SERVER)");
  flags.String("output,o", &global.output, "output format: table, json or yaml");
  flags.Int("timeout", &global.timeout_seconds, "deadline of each RPC, in seconds");
}

std::string OverviewHelp(const Environment& env) {
  std::string description =
      "The FLEET operator's command line: inspect and change the site's inventory,\n"
      "allocations and health through fleetd's gRPC API.\n\nCommands:\n";
  for (const Verb& verb : Verbs()) {
    std::string name(verb.name);
    name.resize(10, ' ');
    absl::StrAppend(&description, "  ", name, verb.summary, "\n");
  }
  absl::StrAppend(&description,
                  "  help      Show this, or a command's help: fleetctl help COMMAND\n",
                  "\nRun 'fleetctl COMMAND --help' for a command's arguments and flags.\n"
                  "The flags below are accepted anywhere on the line.");
  FlagSet flags("fleetctl COMMAND [ARGS] [flags]", description);
  GlobalOptions global{env.default_server};
  DeclareGlobalFlags(flags, global);
  return flags.Help();
}

std::string VerbHelp(const Verb& verb, const Environment& env) {
  FlagSet flags(std::string(verb.usage), verb.description);
  CommandLine line;
  GlobalOptions global{env.default_server};
  verb.declare(flags, line);
  DeclareGlobalFlags(flags, global);
  return flags.Help();
}

// The verb is the first argument that is neither a flag nor the value of a global flag.
// (A verb's own flags belong after the verb.)
std::optional<size_t> VerbIndex(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return i + 1 < args.size() ? std::optional<size_t>(i + 1) : std::nullopt;
    if (arg.size() > 1 && arg[0] == '-') {
      if (arg == "--server" || arg == "-o" || arg == "--output" || arg == "--timeout") ++i;
      continue;
    }
    return i;
  }
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Session

ServerStubs NewServerStubs(const std::shared_ptr<grpc::ChannelInterface>& channel) {
  return {v1::InventoryService::NewStub(channel), v1::TopologyService::NewStub(channel),
          v1::AdminService::NewStub(channel)};
}

grpc::Status Session::Call(const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  context.AddMetadata(kPrincipalMetadataKey, principal);
  return rpc(&context);
}

int Session::Failed(const grpc::Status& status) const {
  *err << "error: " << absl::StatusCodeToString(FromGrpcStatus(status).code()) << ": "
       << status.error_message() << "\n";
  return kExitFailed;
}

// ---------------------------------------------------------------------------------------
// Verbs

int Get(const Session& s, const GetArgs& args) {
  const GetKind* kind = nullptr;
  for (const GetKind& k : GetKinds()) {
    if (args.kind == k.name.plural || args.kind == k.name.singular) kind = &k;
  }
  if (kind == nullptr) {
    return UsageError(*s.err, "get",
                      absl::StrCat("unknown kind '", args.kind, "'; kinds: ", GetKindList()));
  }
  // A filter the kind does not take would silently list everything; say so instead.
  const std::pair<absl::string_view, bool> given[] = {{"switch", !args.switch_id.empty()},
                                                      {"host", !args.host.empty()},
                                                      {"kind", !args.kind_filter.empty()},
                                                      {"tenant", !args.tenant.empty()},
                                                      {"allocation", !args.allocation.empty()},
                                                      {"object", !args.object.empty()},
                                                      {"after", args.after != 0},
                                                      {"limit", args.limit != 0}};
  for (const auto& [flag, is_given] : given) {
    if (!is_given) continue;
    if (std::find(kind->filters.begin(), kind->filters.end(), flag) == kind->filters.end()) {
      return UsageError(*s.err, "get",
                        absl::StrCat("--", flag, " does not apply to ", kind->name.plural, "; ",
                                     kind->name.plural, " take ",
                                     kind->filter_help.empty() ? "no filters" : kind->filter_help));
    }
  }
  return kind->run(s, args);
}

int Describe(const Session& s, const std::string& kind, const std::string& name) {
  absl::string_view singular = Singular(kDescribeKinds, kind);
  if (singular.empty()) {
    return UsageError(
        *s.err, "describe",
        absl::StrCat("unknown kind '", kind, "'; kinds: ", Singulars(kDescribeKinds)));
  }
  if (singular == "switch") return DescribeSwitchVerb(s, name);
  if (singular == "host") return DescribeHostVerb(s, name);
  if (singular == "agent") return DescribeAgentVerb(s, name);
  if (singular == "device") return DescribeDeviceVerb(s, name);
  if (singular == "onic") return DescribeOnicVerb(s, name);
  return DescribeAllocationVerb(s, name);
}

int Apply(const Session& s, const ApplyArgs& args) {
  absl::StatusOr<v1::Inventory> inventory = inventory::ReadInventoryFile(args.file);
  if (!inventory.ok()) return s.Failed(ToGrpcStatus(inventory.status()));

  v1::ApplyInventoryRequest request;
  *request.mutable_inventory() = *std::move(inventory);
  request.set_dry_run(args.dry_run);
  v1::ApplyInventoryResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->ApplyInventory(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);

  if (args.dry_run) *s.out << "dry run: nothing was stored\n";
  *s.out << "created " << response.created() << ", updated " << response.updated() << ", unchanged "
         << response.unchanged() << "\n";
  for (const std::string& change : response.changes()) *s.out << change << "\n";
  return kExitOk;
}

int RequestTopology(const Session& s, const ApplyArgs& args) {
  absl::StatusOr<v1::RequestTopologyRequest> request = ReadTopologySpecFile(args.file);
  if (!request.ok()) return s.Failed(ToGrpcStatus(request.status()));
  request->set_dry_run(args.dry_run);
  v1::RequestTopologyResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->RequestTopology(c, *request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);

  const v1::Plan& plan = response.plan();
  *s.out << (args.dry_run ? "dry run: nothing was changed\n" : "")
         << "members: " << absl::StrJoin(plan.members(), ", ") << "\n"
         << plan.circuits_size() << " circuits, " << plan.add_size() << " cross-connects to make, "
         << plan.remove_size() << " to remove, " << plan.ports_used_size() << " O-NIC ports\n";
  Table table({"SOURCE", "DESTINATION", "CROSS-CONNECTS"});
  for (const v1::Circuit& c : plan.circuits()) {
    std::vector<std::string> hops;
    for (const v1::CrossConnect& x : c.cross_connects()) {
      hops.push_back(absl::StrCat(x.switch_id(), ":", x.ingress(), "→", x.egress()));
    }
    table.AddRow({absl::StrCat(c.source().onic(), "/", c.source().port()),
                  absl::StrCat(c.destination().onic(), "/", c.destination().port()),
                  absl::StrJoin(hops, ", ")});
  }
  *s.out << table.Render();
  return kExitOk;
}

int Delete(const Session& s, const std::string& kind, const std::string& name) {
  absl::string_view singular = Singular(kDeleteKinds, kind);
  if (singular.empty()) {
    return UsageError(*s.err, "delete",
                      absl::StrCat("unknown kind '", kind, "'; kinds: ", Singulars(kDeleteKinds)));
  }
  v1::DeleteObjectRequest request;
  request.set_kind(std::string(singular));
  request.set_name(name);
  v1::DeleteObjectResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->inventory->DeleteObject(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);

  // `deleted` lists what went with the object; the server may or may not name the object
  // itself, so it is printed first and not repeated.
  const std::string object = absl::StrCat(singular, " ", name);
  *s.out << "deleted " << object << "\n";
  for (const std::string& line : response.deleted()) {
    absl::string_view what = absl::StripPrefix(line, "deleted ");
    if (what != object) *s.out << "deleted " << what << "\n";
  }
  return kExitOk;
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
  if (!table.empty()) *s.out << table.Render();
  std::string overall = v1::Name(response.overall());
  *s.out << "overall: " << (overall.empty() ? "unknown" : overall) << "\n";
  return kExitOk;
}

int Version(const Session& s) {
  *s.out << "fleetctl " << FLEET_VERSION << "\n";
  v1::HealthResponse response;
  grpc::Status status =
      s.Call([&](grpc::ClientContext* c) { return s.server->admin->Health(c, {}, &response); });
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

// ---------------------------------------------------------------------------------------
// The command line

int RunFleetctl(const std::vector<std::string>& args, const Environment& env,
                const Connector& connect, std::ostream& out, std::ostream& err) {
  std::optional<size_t> verb_index = VerbIndex(args);
  if (!verb_index) {
    for (const std::string& arg : args) {
      if (arg == "--help" || arg == "-h") {
        out << OverviewHelp(env);
        return kExitOk;
      }
    }
    return UsageError(err, "", absl::StrCat("missing command; commands: ", VerbList()));
  }
  const std::string& name = args[*verb_index];
  std::vector<std::string> rest = args;
  rest.erase(rest.begin() + *verb_index);

  if (name == "help") {
    std::vector<std::string> topics;
    for (const std::string& arg : rest) {
      if (arg.empty() || arg[0] != '-') topics.push_back(arg);
    }
    if (topics.empty()) {
      out << OverviewHelp(env);
      return kExitOk;
    }
    const Verb* verb = FindVerb(topics[0]);
    if (verb == nullptr) {
      return UsageError(err, "",
                        absl::StrCat("unknown command '", topics[0], "'; commands: ", VerbList()));
    }
    out << VerbHelp(*verb, env);
    return kExitOk;
  }

  const Verb* verb = FindVerb(name);
  if (verb == nullptr) {
    return UsageError(err, "",
                      absl::StrCat("unknown command '", name, "'; commands: ", VerbList()));
  }
  FlagSet flags(std::string(verb->usage), verb->description);
  CommandLine line;
  GlobalOptions global{env.default_server};
  verb->declare(flags, line);
  DeclareGlobalFlags(flags, global);
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(rest);
  if (!positional.ok()) {
    // FlagSet ends some messages with its own "see --help"; ours names the verb's help.
    return UsageError(err, verb->name,
                      absl::StripSuffix(positional.status().message(), "; see --help"));
  }
  if (flags.help_requested()) {
    out << flags.Help();
    return kExitOk;
  }
  line.positional = *std::move(positional);

  std::optional<OutputFormat> format = ParseOutputFormat(global.output);
  if (!format) {
    return UsageError(
        err, verb->name,
        absl::StrCat("unknown output format '", global.output, "'; formats: table, json, yaml"));
  }
  if (global.timeout_seconds <= 0) {
    return UsageError(err, verb->name,
                      absl::StrCat("--timeout must be a positive number of seconds, got ",
                                   global.timeout_seconds));
  }
  if (global.server.empty()) return UsageError(err, verb->name, "--server must not be empty");

  SystemClock system_clock;
  ServerStubs stubs = connect(global.server);
  Session session{&stubs,
                  *format,
                  absl::Seconds(global.timeout_seconds),
                  env.principal,
                  env.clock != nullptr ? env.clock : &system_clock,
                  &out,
                  &err};
  return verb->run(session, line);
}

}  // namespace fleet::cli
