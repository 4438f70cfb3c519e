#include "controller/cli/get_describe_verbs.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/cli/admin_verbs.h"
#include "controller/cli/descriptions.h"
#include "controller/cli/dot.h"
#include "controller/cli/output.h"
#include "controller/cli/printing.h"
#include "controller/cli/tables.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

int GetSwitches(const Session& s, const GetArgs& args) {
  return PrintList<v1::ListSwitchesResponse>(
      s, "switches",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListSwitches(c, {}, r); },
      SwitchesTable, args.watch);
}

int GetPorts(const Session& s, const GetArgs& args) {
  v1::ListPortsRequest request;
  request.set_switch_id(args.switch_id);
  return PrintList<v1::ListPortsResponse>(
      s, "ports",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->inventory->ListPorts(c, request, r);
      },
      PortsTable, args.watch);
}

int GetHosts(const Session& s, const GetArgs& args) {
  return PrintList<v1::ListHostsResponse>(
      s, "hosts",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListHosts(c, {}, r); },
      HostsTable, args.watch);
}

int GetAgents(const Session& s, const GetArgs& args) {
  return PrintList<v1::ListAgentsResponse>(
      s, "agents",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListAgents(c, {}, r); },
      AgentsTable, args.watch);
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
      DevicesTable, args.watch);
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
      OnicsTable, args.watch);
}

int GetTrunks(const Session& s, const GetArgs& args) {
  return PrintList<v1::ListTrunksResponse>(
      s, "trunks",
      [&](grpc::ClientContext* c, auto* r) { return s.server->inventory->ListTrunks(c, {}, r); },
      TrunksTable, args.watch);
}

// What a picture needs of the site, read with the caller's rights: a job, which may not
// read the inventory, gets a picture without switches and devices.
grpc::Status ReadDotSite(const Session& s, DotSite* site) {
  v1::ListSwitchesResponse switches;
  v1::ListDevicesResponse devices;
  v1::ListOnicsResponse onics;
  v1::ListTrunksResponse trunks;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->inventory->ListSwitches(c, {}, &switches); });
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) return grpc::Status::OK;
  if (status.ok()) {
    status = s.Call(
        [&](grpc::ClientContext* c) { return s.server->inventory->ListDevices(c, {}, &devices); });
  }
  if (status.ok()) {
    status = s.Call(
        [&](grpc::ClientContext* c) { return s.server->inventory->ListOnics(c, {}, &onics); });
  }
  if (status.ok()) {
    status = s.Call(
        [&](grpc::ClientContext* c) { return s.server->inventory->ListTrunks(c, {}, &trunks); });
  }
  if (!status.ok()) return status;
  site->switches.assign(switches.switches().begin(), switches.switches().end());
  site->devices.assign(devices.devices().begin(), devices.devices().end());
  site->onics.assign(onics.onics().begin(), onics.onics().end());
  site->trunks.assign(trunks.trunks().begin(), trunks.trunks().end());
  return grpc::Status::OK;
}

int GetCircuits(const Session& s, const GetArgs& args) {
  v1::ListCircuitsRequest request;
  request.set_switch_id(args.switch_id);
  request.set_allocation_id(args.allocation);
  if (s.format == OutputFormat::kDot) {
    if (args.watch) return UsageError(*s.err, "get", "-o dot draws once; it has no --watch");
    DotSite site;
    grpc::Status status = ReadDotSite(s, &site);
    v1::ListCircuitsResponse circuits;
    if (status.ok()) {
      status = s.Call([&](grpc::ClientContext* c) {
        return s.server->inventory->ListCircuits(c, request, &circuits);
      });
    }
    if (!status.ok()) return s.Failed(status);
    *s.out << SiteDot(site, {circuits.circuits().begin(), circuits.circuits().end()});
    return kExitOk;
  }
  return PrintList<v1::ListCircuitsResponse>(
      s, "circuits",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->inventory->ListCircuits(c, request, r);
      },
      CircuitsTable, args.watch);
}

int GetAllocations(const Session& s, const GetArgs& args) {
  v1::ListAllocationsRequest request;
  request.set_tenant(args.tenant);
  request.set_include_released(args.all);
  return PrintList<v1::ListAllocationsResponse>(
      s, "allocations",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->topology->ListAllocations(c, request, r);
      },
      AllocationsTable, args.watch);
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
  if (args.watch) {
    // The list of events changes with every event: watching it is following the log.
    if (args.limit != 0) {
      return UsageError(*s.err, "get",
                        "--limit does not apply with --watch, which shows every "
                        "new event");
    }
    EventsArgs follow;
    follow.follow = true;
    follow.after = args.after;
    follow.object_kind = args.kind_filter;
    follow.object = args.object;
    return Events(s, follow);
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
      {{"allocations", "allocation"}, {"tenant", "all"}, "--tenant, --all", GetAllocations},
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

std::vector<std::string> GetKindWords() {
  std::vector<std::string> names;
  for (const GetKind& k : GetKinds()) names.emplace_back(k.name.plural);
  return names;
}

std::string GetDescription() {
  std::string d =
      "List every object of one kind, as a table or (-o json|yaml) as the List\n"
      "response.\n\nKinds, and the filters each takes:\n";
  for (const GetKind& k : GetKinds()) {
    std::string kind(k.name.plural);
    kind.resize(14, ' ');
    absl::StrAppend(&d, "  ", kind, k.filter_help.empty() ? "-" : k.filter_help, "\n");
  }
  absl::StrAppend(&d,
                  "The singular forms (switch, port, ...) work too. `get circuits -o dot` draws\n"
                  "the whole site for Graphviz (dot -Tsvg): switches, O-NICs, circuits, trunks.");
  return d;
}

void DeclareGetFlags(FlagTable& f, GetArgs& a) {
  f.String("switch", &a.switch_id, "only this switch's ports, O-NICs or circuits");
  f.String("host", &a.host, "only this host's devices or O-NICs");
  f.String(
      "kind", &a.kind_filter,
      absl::StrCat("devices: a device kind (", absl::StrJoin(v1::Names<v1::DeviceKind>(), ", "),
                   "); events: an object kind"));
  f.String("tenant", &a.tenant, "only this tenant's allocations");
  f.Bool("all", &a.all,
         "allocations: the released ones too (failed ones are always listed); fleetd keeps "
         "ended allocations for its retention window, 30 days unless configured otherwise");
  f.String("allocation", &a.allocation, "only this allocation's circuits");
  f.String("object", &a.object, "events: only those about this object id");
  f.Int("after", &a.after, "events: only those after this sequence number");
  f.Int("limit", &a.limit, "events: at most this many (0: the server's default)");
  f.Bool("watch,w", &a.watch, "print the list again each time it changes, until interrupted");
}

int RunGet(const Session& s, const GetArgs& flags, const Positional& p) {
  if (p.empty()) {
    return UsageError(*s.err, "get", absl::StrCat("get needs a KIND; kinds: ", GetKindList()));
  }
  if (p.size() > 1) {
    return UsageError(*s.err, "get",
                      absl::StrCat("get takes one KIND, got ", Joined(p),
                                   "; to show one object use 'fleetctl describe KIND NAME'"));
  }
  GetArgs args = flags;
  args.kind = p[0];
  return Get(s, args);
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

// Whether `spec` attaches devices to `host`.
bool AttachesTo(const v1::TopologySpec& spec, const std::string& host) {
  return spec.has_attach() && spec.attach().host() == host;
}

// The live allocations that attach pooled devices to `host` (`host_devices` are its own, which
// an attach allocation holds too), read with the caller's rights: one who may not list
// allocations sees none.
grpc::Status ReadAttachments(const Session& s, const std::string& host,
                             const v1::ListDevicesResponse& host_devices,
                             std::vector<Attachment>* attached) {
  v1::ListAllocationsResponse allocations;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->ListAllocations(c, {}, &allocations);
  });
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) return grpc::Status::OK;
  if (!status.ok()) return status;
  std::set<std::string> own;
  for (const v1::Device& d : host_devices.devices()) own.insert(d.id());
  for (const v1::Allocation& a : allocations.allocations()) {
    if (a.state() == v1::ALLOCATION_STATE_FAILED || a.state() == v1::ALLOCATION_STATE_RELEASED) {
      continue;
    }
    const v1::RequestTopologyRequest& r = a.request();
    bool attaches = AttachesTo(r.topology(), host);
    for (const v1::Phase& phase : r.phases()) attaches |= AttachesTo(phase.topology(), host);
    if (!attaches) continue;
    Attachment& attachment = attached->emplace_back();
    attachment.allocation_id = a.id();
    for (const std::string& member : a.members()) {
      if (!own.contains(member)) attachment.devices.push_back(member);
    }
  }
  return grpc::Status::OK;
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
  std::vector<Attachment> attached;
  status = ReadAttachments(s, name, devices, &attached);
  if (!status.ok()) return s.Failed(status);
  *s.out << DescribeHost(host, {devices.devices().begin(), devices.devices().end()}, agent,
                         attached);
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
  if (s.format == OutputFormat::kDot) {
    DotSite site;
    if (grpc::Status read = ReadDotSite(s, &site); !read.ok()) return s.Failed(read);
    *s.out << AllocationDot(site, allocation);
    return kExitOk;
  }
  if (s.format != OutputFormat::kTable) return PrintMessage(s, allocation);

  v1::ListEventsRequest events_request;
  events_request.set_object_kind("allocation");
  events_request.set_object_id(id);
  v1::ListEventsResponse events;
  status = s.Call([&](grpc::ClientContext* c) {
    return s.server->admin->ListEvents(c, events_request, &events);
  });
  if (!status.ok()) return s.Failed(status);
  *s.out << DescribeAllocation(allocation, {events.events().begin(), events.events().end()},
                               s.clock->Now());
  return kExitOk;
}

constexpr KindName kDescribeKinds[] = {{"switches", "switch"}, {"hosts", "host"},
                                       {"agents", "agent"},    {"devices", "device"},
                                       {"onics", "onic"},      {"allocations", "allocation"}};

int RunDescribe(const Session& s, const Positional& p) {
  if (p.size() != 2) {
    return UsageError(
        *s.err, "describe",
        absl::StrCat("describe needs KIND and NAME, got ", p.empty() ? "nothing" : Joined(p)));
  }
  return Describe(s, p[0], p[1]);
}

}  // namespace

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
                                                      {"all", args.all},
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
  if (s.format == OutputFormat::kDot && kind->name.plural != "circuits") {
    return UsageError(*s.err, "get", kDotDrawsOnly);
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
  if (s.format == OutputFormat::kDot && singular != "allocation") {
    return UsageError(*s.err, "describe", kDotDrawsOnly);
  }
  if (singular == "switch") return DescribeSwitchVerb(s, name);
  if (singular == "host") return DescribeHostVerb(s, name);
  if (singular == "agent") return DescribeAgentVerb(s, name);
  if (singular == "device") return DescribeDeviceVerb(s, name);
  if (singular == "onic") return DescribeOnicVerb(s, name);
  return DescribeAllocationVerb(s, name);
}

Verb GetVerb() {
  return {"get",
          "fleetctl get KIND [flags]",
          "List every object of one kind",
          GetDescription(),
          WithFlags<GetArgs>(DeclareGetFlags, RunGet),
          GetKindWords()};
}

Verb DescribeVerb() {
  return {
      "describe",
      "fleetctl describe KIND NAME [flags]",
      "Show one object in detail",
      absl::StrCat("Show one object and what belongs to it: a switch's port usage, a host's\n"
                   "devices and agent, an agent's connection, O-NICs and inventory mismatches\n"
                   "(by host name), a device's O-NICs with their ports and fibers, an O-NIC's\n"
                   "circuits, an allocation's members, circuits, stage timings and events. With\n"
                   "-o json or yaml, prints just the object; `describe allocation ID -o dot`\n"
                   "draws the allocation for Graphviz (dot -Tsvg).\n\nKinds: ",
                   Singulars(kDescribeKinds)),
      WithoutFlags(RunDescribe),
      SingularWords(kDescribeKinds)};
}

}  // namespace fleet::cli
