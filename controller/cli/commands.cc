#include "controller/cli/commands.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/message_differencer.h>

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
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/grpc_status.h"
#include "controller/cli/topology_spec.h"
#include "controller/inventory/inventory.h"
#include "common/version.h"
#include "fleet/v1/names.h"

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

// Ends a stream the client no longer wants: cancels it and reads what is in flight, so that
// Finish() does not wait for the server.
template <typename Message>
void AbandonStream(grpc::ClientContext& context,
                   const std::unique_ptr<grpc::ClientReaderInterface<Message>>& reader) {
  context.TryCancel();
  Message unused;
  while (reader->Read(&unused)) {
  }
  reader->Finish();
}

// A WatchEvents stream with no deadline (a follow runs until the server ends it or the user
// interrupts), which the session's StopSignal can end.
class EventStream {
 public:
  EventStream(const Session& s, const v1::WatchEventsRequest& request)
      : session_(s), following_(s.stop, &context_) {
    s.Prepare(&context_, absl::InfiniteFuture());
    reader_ = s.server->admin->WatchEvents(&context_, request);
  }

  bool Read(v1::Event* event) { return reader_->Read(event); }
  // For a verb that gives up before the stream ends.
  void Abandon() { AbandonStream(context_, reader_); }
  // After Read returned false: kExitOk when the StopSignal or the server ended the stream
  // cleanly, else kExitFailed with the server's error.
  int Finish() {
    grpc::Status status = reader_->Finish();
    if (session_.stop != nullptr && session_.stop->stopped()) return kExitOk;
    if (!status.ok()) return session_.Failed(status);
    return kExitOk;
  }

 private:
  const Session& session_;
  grpc::ClientContext context_;
  StopSignal::Following following_;
  std::unique_ptr<grpc::ClientReaderInterface<v1::Event>> reader_;
};

// The sequence number of the newest event (0 when there is none), so that a watch can follow
// from there without replaying the log. Asks ListEvents whether any event comes after a
// number, doubling and then halving it: about 2·log2(length) small RPCs.
grpc::Status LastEventSequence(const Session& s, uint64_t* last) {
  grpc::Status status;
  auto any_after = [&](uint64_t after) {
    v1::ListEventsRequest request;
    request.set_after_sequence(after);
    request.set_limit(1);
    v1::ListEventsResponse response;
    status = s.Call(
        [&](grpc::ClientContext* c) { return s.server->admin->ListEvents(c, request, &response); });
    return status.ok() && response.events_size() > 0;
  };
  *last = 0;
  if (!any_after(0)) return status;
  // Some event comes after `low`, none after `high`.
  uint64_t low = 0, high = 1;
  while (any_after(high)) {
    low = high;
    high *= 2;
  }
  if (!status.ok()) return status;
  while (high - low > 1) {
    uint64_t middle = low + (high - low) / 2;
    (any_after(middle) ? low : high) = middle;
    if (!status.ok()) return status;
  }
  *last = high;
  return status;
}

// One version of a watched list: a table under a header with the time, or one streamed
// message. Flushed, so a pipe sees it at once.
template <typename Response, typename MakeTable>
int PrintWatchedList(const Session& s, absl::string_view kind, const Response& response,
                     MakeTable make_table, bool first) {
  if (s.format != OutputFormat::kTable) {
    absl::StatusOr<std::string> text = FormatStreamedMessage(s.format, response);
    if (!text.ok()) return s.Failed(ToGrpcStatus(text.status()));
    *s.out << *text << std::flush;
    return kExitOk;
  }
  if (!first) *s.out << "\n";
  *s.out << WatchHeader(kind, s.clock->Now());
  Table table = make_table(response);
  // On stdout this time: the list going empty is a change the watcher should see there.
  *s.out << (table.empty() ? absl::StrCat("no ", kind, " found\n") : table.Render(s.color))
         << std::flush;
  return kExitOk;
}

// `get KIND --watch`: prints the list, then follows the event log from its newest event and
// asks for the list again on each event, printing it when it differs from the last one shown.
// Ends with exit 0 when StopSignal stops it or the server ends the stream without error.
template <typename Response, typename Rpc, typename MakeTable>
int WatchList(const Session& s, absl::string_view kind, Rpc rpc, MakeTable make_table) {
  uint64_t last = 0;
  grpc::Status status = LastEventSequence(s, &last);
  if (!status.ok()) return s.Failed(status);
  Response shown;
  status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &shown); });
  if (!status.ok()) return s.Failed(status);
  int code = PrintWatchedList(s, kind, shown, make_table, /*first=*/true);
  if (code != kExitOk) return code;

  v1::WatchEventsRequest request;
  request.set_after_sequence(last);
  EventStream stream(s, request);
  v1::Event event;
  while (stream.Read(&event)) {
    Response now;
    status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &now); });
    if (!status.ok()) {
      stream.Abandon();
      return s.Failed(status);
    }
    if (google::protobuf::util::MessageDifferencer::Equals(now, shown)) continue;
    shown = std::move(now);
    code = PrintWatchedList(s, kind, shown, make_table, /*first=*/false);
    if (code != kExitOk) {
      stream.Abandon();
      return code;
    }
  }
  return stream.Finish();
}

// Runs a List RPC (`rpc(context, &response)`) and prints the response: as a table for
// people, or as the whole message for scripts. With `watch`, see WatchList.
template <typename Response, typename Rpc, typename MakeTable>
int PrintList(const Session& s, absl::string_view kind, Rpc rpc, MakeTable make_table,
              bool watch = false) {
  if (watch) return WatchList<Response>(s, kind, rpc, make_table);
  Response response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) { return rpc(c, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  Table table = make_table(response);
  // Like kubectl: the note goes to stderr so a pipe sees an empty list, not a sentence.
  if (table.empty()) {
    *s.err << "no " << kind << " found\n";
  } else {
    *s.out << table.Render(s.color);
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
std::vector<std::string> SingularWords(const KindName (&kinds)[N]) {
  std::vector<std::string> names;
  for (const KindName& k : kinds) names.emplace_back(k.singular);
  return names;
}

template <size_t N>
std::string Singulars(const KindName (&kinds)[N]) {
  return absl::StrJoin(SingularWords(kinds), ", ");
}

// ---------------------------------------------------------------------------------------
// get

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
      [&](const v1::ListAgentsResponse& r) { return AgentsTable(r, s.clock->Now()); }, args.watch);
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

int GetCircuits(const Session& s, const GetArgs& args) {
  v1::ListCircuitsRequest request;
  request.set_switch_id(args.switch_id);
  request.set_allocation_id(args.allocation);
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
  return PrintList<v1::ListAllocationsResponse>(
      s, "allocations",
      [&](grpc::ClientContext* c, auto* r) {
        return s.server->topology->ListAllocations(c, request, r);
      },
      [&](const v1::ListAllocationsResponse& r) { return AllocationsTable(r, s.clock->Now()); },
      args.watch);
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
      [&](const v1::ListEventsResponse& r) { return EventsTable(r, s.clock->Now()); });
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

// What a drain or undrain applies to (see DrainTarget).
constexpr KindName kDrainKinds[] = {{"ports", "port"}, {"onics", "onic"}, {"hosts", "host"}};

// The kinds DeleteObject accepts (see DeleteObjectRequest).
constexpr KindName kDeleteKinds[] = {{"switches", "switch"},
                                     {"hosts", "host"},
                                     {"devices", "device"},
                                     {"onics", "onic"},
                                     {"trunks", "trunk"}};

// ---------------------------------------------------------------------------------------
// Waiting for an allocation

// Where a wait's progress lines go: stdout for people; stderr with -o json|yaml, so that stdout
// holds only the final message for a script to parse.
std::ostream& ProgressStream(const Session& s) {
  return s.format == OutputFormat::kTable ? *s.out : *s.err;
}

std::string StateText(const v1::Allocation& a) {
  std::string state = v1::Name(a.state());
  return state.empty() ? "in an unknown state" : state;
}

// kExitOk when `a` is in `done`; kExitFailed, having said why, when it can no longer get
// there (FAILED, or RELEASED when that is not the goal); nullopt while it still may. DEGRADED
// is not an end: the engine may retrain the link and recover.
std::optional<int> Settled(const Session& s, const v1::Allocation& a, v1::AllocationState done) {
  if (a.state() == done) return kExitOk;
  if (a.state() != v1::ALLOCATION_STATE_FAILED && a.state() != v1::ALLOCATION_STATE_RELEASED) {
    return std::nullopt;
  }
  *s.err << "error: allocation " << a.id()
         << (a.state() == v1::ALLOCATION_STATE_FAILED ? " failed" : " was released");
  if (!a.reason().empty()) *s.err << ": " << a.reason();
  *s.err << "\n";
  return kExitFailed;
}

// Follows `*allocation` (as last seen) with WatchAllocation until it is Settled or `deadline`
// passes, printing a line each time its state or reason changes; leaves the last version seen
// in `*allocation`. The stream starts with the current state, so a change between the call
// that returned `*allocation` and the watch is not missed.
int WaitForAllocation(const Session& s, v1::AllocationState done, absl::Time deadline,
                      v1::Allocation* allocation) {
  std::ostream& progress = ProgressStream(s);
  progress << AllocationStateLine(*allocation) << "\n" << std::flush;
  if (std::optional<int> settled = Settled(s, *allocation, done)) return *settled;

  const std::string id = allocation->id();
  grpc::ClientContext context;
  s.Prepare(&context, deadline);
  v1::WatchAllocationRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReaderInterface<v1::WatchAllocationResponse>> reader =
      s.server->topology->WatchAllocation(&context, request);
  v1::WatchAllocationResponse update;
  std::optional<int> settled;
  while (!settled && reader->Read(&update)) {
    const v1::Allocation& seen = update.allocation();
    if (seen.state() != allocation->state() || seen.reason() != allocation->reason()) {
      progress << AllocationStateLine(seen) << "\n" << std::flush;
    }
    *allocation = seen;
    settled = Settled(s, *allocation, done);
  }
  if (settled) {
    // The server may keep the stream open past the end state; nothing more is wanted from it.
    AbandonStream(context, reader);
    return *settled;
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return s.Failed(
        grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                     absl::StrCat("allocation ", id, " is still ", StateText(*allocation),
                                  " after ", absl::FormatDuration(s.timeout))));
  }
  if (!status.ok()) return s.Failed(status);
  return s.Failed(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                               absl::StrCat("the server ended the watch of allocation ", id,
                                            " while it was ", StateText(*allocation))));
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
  } else {
    const size_t slash = name.rfind('/');
    uint32_t port = 0;
    if (slash == std::string::npos || slash == 0 ||
        !absl::SimpleAtoi(name.substr(slash + 1), &port) || port == 0) {
      UsageError(*s.err, verb,
                 absl::StrCat("a port is SWITCH/PORT, such as ocs1/5; got '", name, "'"));
      return false;
    }
    target->mutable_switch_port()->set_switch_id(name.substr(0, slash));
    target->mutable_switch_port()->set_port(port);
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// The command line

struct GlobalOptions {
  std::string server;
  std::string output = "table";
  int64_t timeout_seconds = 10;
  std::string color = "auto";
};

// Every verb's arguments; each verb declares flags only for its own fields.
struct CommandLine {
  GetArgs get;
  ApplyArgs apply;
  TopologyRequestArgs topology;
  DrainArgs drain;
  ReconcileArgs reconcile;
  EventsArgs events;
  ReplaceMemberArgs replace;
  std::vector<std::string> positional;
};

struct Verb {
  absl::string_view name;
  absl::string_view usage;
  absl::string_view summary;  // One line, for the overview.
  std::string description;
  void (*declare)(FlagTable& flags, CommandLine& line);
  // Checks the positional arguments and runs.
  int (*run)(const Session& session, const CommandLine& line);
  // What the first argument may be, for completion; run() checks it against the same list.
  std::vector<std::string> words;
};

void NoFlags(FlagTable&, CommandLine&) {}

// The subcommands of topology and link.
const std::vector<std::string>& TopologySubcommands() {
  static const auto* words =
      new std::vector<std::string>{"request", "phase", "detach", "release", "keepalive"};
  return *words;
}
const std::vector<std::string>& AllocationSubcommands() {
  static const auto* words = new std::vector<std::string>{"replace"};
  return *words;
}
const std::vector<std::string>& LinkSubcommands() {
  static const auto* words = new std::vector<std::string>{"retrain", "status"};
  return *words;
}

std::vector<std::string> GetKindWords() {
  std::vector<std::string> names;
  for (const GetKind& k : GetKinds()) names.emplace_back(k.name.plural);
  return names;
}

std::string Joined(const std::vector<std::string>& words) {
  return absl::StrCat("'", absl::StrJoin(words, " "), "'");
}

constexpr absl::string_view kHelpSummary = "Show this, or a command's help: fleetctl help COMMAND";

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
       [](FlagTable& f, CommandLine& l) {
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
         f.Bool("watch,w", &l.get.watch,
                "print the list again each time it changes, until interrupted");
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
       },
       GetKindWords()},
      {"describe", "fleetctl describe KIND NAME [flags]", "Show one object in detail",
       absl::StrCat("Show one object and what belongs to it: a switch's port usage, a host's\n"
                    "devices and agent, an agent's connection, O-NICs and inventory mismatches\n"
                    "(by host name), a device's O-NICs with their ports and fibers, an O-NIC's\n"
                    "circuits, an allocation's members, circuits, stage timings and events. With\n"
                    "-o json or yaml, prints just the object.\n\nKinds: ",
                    Singulars(kDescribeKinds)),
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 2) {
           return UsageError(*s.err, "describe",
                             absl::StrCat("describe needs KIND and NAME, got ",
                                          l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         return Describe(s, l.positional[0], l.positional[1]);
       },
       SingularWords(kDescribeKinds)},
      {"apply",
       "fleetctl apply -f FILE [--dry-run] [flags]",
       "Create or update the inventory from a file",
       "Read an inventory file (see docs/inventory.md), then create what is new and\n"
       "update what changed, in one transaction. Nothing is deleted. Prints the counts\n"
       "and one line per change.",
       [](FlagTable& f, CommandLine& l) {
         f.File("file,f", &l.apply.file, "the inventory file (YAML)");
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
       },
       {}},
      {"topology",
       "fleetctl topology (request -f FILE [--dry-run] [--wait] [--lease DURATION] | phase ID "
       "NAME [--wait] | detach ID DEVICE... [--dry-run] [--wait] | release ID [--wait] | "
       "keepalive ID) [flags]",
       "Request, switch the phase of, detach devices from, release or keep alive a topology",
       "Hold a topology for a job: an allocation of members and the circuits between them.\n\n"
       "  request -f FILE  Send a topology request file (see deploy/examples/). Prints the\n"
       "                   allocation as admitted: members, and each circuit with its\n"
       "                   cross-connects. With --dry-run, prints the plan instead and\n"
       "                   nothing is stored or programmed. With --wait, prints a line\n"
       "                   'ID STATE [REASON]' per state change until the allocation is\n"
       "                   ready (exit 0, then the allocation), failed or released (exit 1),\n"
       "                   or --timeout passes (exit 1). Degraded is waited through.\n"
       "                   --lease DURATION (90s, 10m, 1h30m) overrides the file's lease.\n"
       "  phase ID NAME    Switch a phased allocation to phase NAME: only the circuits\n"
       "                   that differ are reprogrammed. Prints the cross-connects removed\n"
       "                   and added; with --wait, a line per state change until it is\n"
       "                   ready on the new phase (exit 0, then the allocation).\n"
       "  detach ID DEVICE...  Take pooled devices out of a virtual server (an attach\n"
       "                   allocation): their circuits come off the switch, the host and the\n"
       "                   other devices stay. Prints the cross-connects removed; with\n"
       "                   --dry-run, only the plan; with --wait, until it is ready again.\n"
       "  release ID       Remove the allocation's circuits; prints its state. With --wait,\n"
       "                   until it is released.\n"
       "  keepalive ID     Renew the lease; prints when it now expires.\n\n"
       "With -o json or yaml, prints the response; the --wait lines then go to stderr.",
       [](FlagTable& f, CommandLine& l) {
         f.File("file,f", &l.topology.file, "request: the topology request file (YAML)");
         f.Bool("dry-run", &l.topology.dry_run, "request, detach: plan only; change nothing");
         f.Bool("wait", &l.topology.wait,
                "request, phase, detach, release: follow the allocation until it is ready "
                "(released)");
         f.String("lease", &l.topology.lease,
                  "request: lease duration, e.g. 10m; 0 is the server's default");
       },
       [](const Session& s, const CommandLine& l) {
         const std::vector<std::string>& p = l.positional;
         if (p.empty()) {
           return UsageError(*s.err, "topology",
                             "topology needs a subcommand: request -f FILE, phase ID NAME, "
                             "detach ID DEVICE..., release ID or keepalive ID");
         }
         const std::vector<std::string>& subcommands = TopologySubcommands();
         const TopologyRequestArgs& args = l.topology;
         if (p[0] == "request") {
           if (p.size() != 1) {
             return UsageError(
                 *s.err, "topology",
                 absl::StrCat("unexpected argument ", Joined(p), "; the file goes after -f"));
           }
           if (args.file.empty()) {
             return UsageError(*s.err, "topology", "topology request needs -f FILE");
           }
           return RequestTopology(s, args);
         }
         if (std::find(subcommands.begin(), subcommands.end(), p[0]) == subcommands.end()) {
           return UsageError(*s.err, "topology",
                             absl::StrCat("unknown topology subcommand '", p[0],
                                          "'; subcommands: ", absl::StrJoin(subcommands, ", ")));
         }
         if (p[0] == "detach") {
           if (p.size() < 3 || !args.file.empty() || !args.lease.empty()) {
             return UsageError(*s.err, "topology",
                               absl::StrCat("topology detach needs an ID and one or more "
                                            "DEVICEs (and no -f or --lease), got ",
                                            Joined(p)));
           }
           return DetachDevices(s, p[1], {p.begin() + 2, p.end()}, args.dry_run, args.wait);
         }
         if (!args.file.empty() || args.dry_run || !args.lease.empty()) {
           return UsageError(*s.err, "topology",
                             "-f and --lease apply to topology request only, --dry-run to "
                             "request and detach");
         }
         if (p[0] == "phase") {
           if (p.size() != 3) {
             return UsageError(
                 *s.err, "topology",
                 absl::StrCat("topology phase needs an ID and a phase NAME, got ", Joined(p)));
           }
           return ActivatePhase(s, p[1], p[2], args.wait);
         }
         if (p.size() != 2) {
           return UsageError(*s.err, "topology",
                             absl::StrCat("topology ", p[0], " needs one ID, got ", Joined(p)));
         }
         if (p[0] == "release") return ReleaseTopology(s, p[1], args.wait);
         if (args.wait) {
           return UsageError(*s.err, "topology",
                             "--wait applies to topology request, phase, detach and release "
                             "only");
         }
         return KeepAlive(s, p[1]);
       },
       TopologySubcommands()},
      {"allocation",
       "fleetctl allocation replace ID MEMBER [--spare DEVICE] [--dry-run] [--wait] [flags]",
       "Replace a failed member of an allocation",
       "Subcommands:\n"
       "  replace ID MEMBER  Substitute a spare for the failed device MEMBER in every phase:\n"
       "                     a free device of the same kind on the same switch (or\n"
       "                     --spare DEVICE). Only MEMBER's circuits change; the others stay\n"
       "                     on the switch untouched. Prints the spare and the cross-connects\n"
       "                     removed and added; with --dry-run nothing changes. With --wait, a\n"
       "                     line per state change until it is ready again (exit 0, then the\n"
       "                     allocation). For operators.\n\n"
       "With -o json or yaml, prints the response; the --wait lines then go to stderr.",
       [](FlagTable& f, CommandLine& l) {
         f.String("spare", &l.replace.spare,
                  "replace: the device to use instead of the best free one");
         f.Bool("dry-run", &l.replace.dry_run, "replace: plan only; change nothing");
         f.Bool("wait", &l.replace.wait, "replace: follow the allocation until it is ready");
       },
       [](const Session& s, const CommandLine& l) {
         const std::vector<std::string>& p = l.positional;
         if (p.empty() || p[0] != "replace") {
           return UsageError(*s.err, "allocation",
                             p.empty() ? std::string("allocation needs a subcommand: replace ID "
                                                     "MEMBER")
                                       : absl::StrCat("unknown allocation subcommand '", p[0],
                                                      "'; subcommands: replace"));
         }
         if (p.size() != 3) {
           return UsageError(
               *s.err, "allocation",
               absl::StrCat("allocation replace needs an ID and a MEMBER, got ", Joined(p)));
         }
         if (l.replace.dry_run && l.replace.wait) {
           return UsageError(*s.err, "allocation", "--dry-run and --wait do not go together");
         }
         ReplaceMemberArgs args = l.replace;
         args.id = p[1];
         args.member = p[2];
         return ReplaceMember(s, args);
       },
       AllocationSubcommands()},
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
       },
       SingularWords(kDeleteKinds)},
      {"drain",
       "fleetctl drain (port SWITCH/PORT | onic ID | host NAME) [--evict] [--reason TEXT] "
       "[flags]",
       "Refuse new circuits on a port, O-NIC or host",
       absl::StrCat(
           "Drain a switch port, an O-NIC or a host: no new circuit uses it. Existing circuits\n"
           "stay unless --evict, which takes their allocations' circuits off the switch and\n"
           "fails them with the reason. Prints the allocations using it.\n\nKinds: ",
           Singulars(kDrainKinds)),
       [](FlagTable& f, CommandLine& l) {
         f.Bool("evict", &l.drain.evict, "also fail the allocations using it, freeing the switch");
         f.String("reason", &l.drain.reason, "why, recorded in the event log");
       },
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 2) {
           return UsageError(*s.err, "drain",
                             absl::StrCat("drain needs KIND and NAME (port SWITCH/PORT, onic ID "
                                          "or host NAME), got ",
                                          l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         DrainArgs args = l.drain;
         args.kind = l.positional[0];
         args.name = l.positional[1];
         return Drain(s, args);
       },
       SingularWords(kDrainKinds)},
      {"undrain", "fleetctl undrain (port SWITCH/PORT | onic ID | host NAME) [flags]",
       "Accept new circuits on a drained port, O-NIC or host",
       absl::StrCat("Undo a drain: new circuits may use it again.\n\nKinds: ",
                    Singulars(kDrainKinds)),
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 2) {
           return UsageError(*s.err, "undrain",
                             absl::StrCat("undrain needs KIND and NAME (port SWITCH/PORT, onic "
                                          "ID or host NAME), got ",
                                          l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         return Undrain(s, l.positional[0], l.positional[1]);
       },
       SingularWords(kDrainKinds)},
      {"reconcile",
       "fleetctl reconcile [--switch ID] [--adopt-unknown | --remove-unknown] [--dry-run] "
       "[flags]",
       "Compare the switches with the desired circuits and repair",
       "Read every switch (or one), compare it with the desired circuits, resume or roll\n"
       "back interrupted transactions and make missing cross-connects. A cross-connect\n"
       "no circuit asked for is handled by the server's configured policy unless\n"
       "--adopt-unknown (record it as a manual circuit) or --remove-unknown (take it off\n"
       "the switch) says otherwise. Prints the drift (kind, switch, ingress, egress,\n"
       "circuit, what was done) and the counts.",
       [](FlagTable& f, CommandLine& l) {
         f.String("switch", &l.reconcile.switch_id, "only this switch");
         f.Bool("adopt-unknown", &l.reconcile.adopt_unknown,
                "record unknown cross-connects as manual circuits");
         f.Bool("remove-unknown", &l.reconcile.remove_unknown,
                "take unknown cross-connects off the switch");
         f.Bool("dry-run", &l.reconcile.dry_run, "report the drift; change nothing");
       },
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "reconcile",
                             absl::StrCat("unexpected argument ", Joined(l.positional),
                                          "; a switch goes after --switch"));
         }
         return Reconcile(s, l.reconcile);
       },
       {}},
      {"events",
       "fleetctl events [--follow] [--after N] [--object-kind K] [--object ID] [flags]",
       "Show the event log, or follow it",
       "Show the append-only event and audit log, as 'fleetctl get events' does. With\n"
       "--follow, keep printing each event as it is recorded (a table row, or with -o json\n"
       "one JSON object per line) until the server ends the stream or you interrupt;\n"
       "--timeout does not apply then.",
       [](FlagTable& f, CommandLine& l) {
         f.Bool("follow", &l.events.follow, "keep printing new events as they are recorded");
         f.Int("after", &l.events.after, "only events after this sequence number");
         f.String("object-kind", &l.events.object_kind,
                  "only events about this kind of object (switch, port, host, device, onic, "
                  "allocation, circuit, agent)");
         f.String("object", &l.events.object, "only events about this object id");
       },
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "events",
                             absl::StrCat("unexpected argument ", Joined(l.positional)));
         }
         return Events(s, l.events);
       },
       {}},
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
         return UsageError(*s.err, "link",
                           absl::StrCat("unknown link subcommand '", p[0], "'; subcommands: ",
                                        absl::StrJoin(LinkSubcommands(), ", ")));
       },
       LinkSubcommands()},
      {"health",
       "fleetctl health [flags]",
       "Show the health of fleetd and what it drives",
       "Show each component's state (store, switches, agents) and the overall state.",
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "health",
                             absl::StrCat("unexpected argument ", Joined(l.positional)));
         }
         return Health(s);
       },
       {}},
      {"version",
       "fleetctl version [flags]",
       "Show the client and server versions",
       "Print fleetctl's version and, if the server answers, fleetd's.",
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (!l.positional.empty()) {
           return UsageError(*s.err, "version",
                             absl::StrCat("unexpected argument ", Joined(l.positional)));
         }
         return Version(s);
       },
       {}},
      {"completion", "fleetctl completion (bash | zsh)", "Print a shell completion script",
       "Print a script that completes fleetctl's commands, kinds, subcommands and flags in\n"
       "the shell, generated from this fleetctl's own command table.\n\n"
       "  bash  source <(fleetctl completion bash), or save it in\n"
       "        /etc/bash_completion.d/fleetctl\n"
       "  zsh   source <(fleetctl completion zsh), or save it as _fleetctl in a directory\n"
       "        of $fpath (before compinit runs)",
       NoFlags,
       [](const Session& s, const CommandLine& l) {
         if (l.positional.size() != 1) {
           return UsageError(
               *s.err, "completion",
               absl::StrCat("completion needs one shell (", absl::StrJoin(CompletionShells(), ", "),
                            "), got ", l.positional.empty() ? "nothing" : Joined(l.positional)));
         }
         return Completion(s, l.positional[0]);
       },
       CompletionShells()},
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

void DeclareGlobalFlags(FlagTable& flags, GlobalOptions& global) {
  flags.String("server", &global.server, "fleetd's address, HOST:PORT (env FLEET_SERVER)");
  flags.String("output,o", &global.output,
               absl::StrCat("output format: ", absl::StrJoin(OutputFormatNames(), ", ")),
               OutputFormatNames());
  flags.Int("timeout", &global.timeout_seconds,
            "deadline of each RPC, in seconds; with --wait, of the whole wait");
  flags.String("color", &global.color,
               absl::StrCat("colour states in tables: ", absl::StrJoin(ColorModeNames(), ", "),
                            " (auto: when stdout is a terminal and NO_COLOR is not set)"),
               ColorModeNames());
}

// The global flags as the parser sees them, for finding the verb and for completion.
std::vector<FlagSpec> GlobalFlagSpecs() {
  GlobalOptions global;
  FlagTable flags(nullptr);
  DeclareGlobalFlags(flags, global);
  return flags.specs();
}

std::string OverviewHelp(const Environment& env) {
  std::string description =
      "The FLEET operator's command line: inspect and change the site's inventory,\n"
      "allocations and health through fleetd's gRPC API.\n\nCommands:\n";
  size_t width = 0;
  for (const Verb& verb : Verbs()) width = std::max(width, verb.name.size() + 2);
  auto line = [&](absl::string_view name, absl::string_view summary) {
    std::string padded(name);
    padded.resize(width, ' ');
    absl::StrAppend(&description, "  ", padded, summary, "\n");
  };
  for (const Verb& verb : Verbs()) line(verb.name, verb.summary);
  line("help", kHelpSummary);
  absl::StrAppend(&description,
                  "\nRun 'fleetctl COMMAND --help' for a command's arguments and flags.\n"
                  "The flags below are accepted anywhere on the line.");
  FlagSet flags("fleetctl COMMAND [ARGS] [flags]", description);
  FlagTable table(&flags);
  GlobalOptions global{env.default_server};
  DeclareGlobalFlags(table, global);
  return flags.Help();
}

std::string VerbHelp(const Verb& verb, const Environment& env) {
  FlagSet flags(std::string(verb.usage), verb.description);
  FlagTable table(&flags);
  CommandLine line;
  GlobalOptions global{env.default_server};
  verb.declare(table, line);
  DeclareGlobalFlags(table, global);
  return flags.Help();
}

// The verb is the first argument that is neither a flag nor the value of a global flag.
// (A verb's own flags belong after the verb.)
std::optional<size_t> VerbIndex(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> globals = GlobalFlagSpecs();
  auto takes_value = [&](const std::string& arg) {
    for (const FlagSpec& flag : globals) {
      if (!flag.takes_value) continue;
      if (arg == "--" + flag.name ||
          (flag.short_name != 0 && arg == std::string{'-', flag.short_name})) {
        return true;
      }
    }
    return false;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return i + 1 < args.size() ? std::optional<size_t>(i + 1) : std::nullopt;
    if (arg.size() > 1 && arg[0] == '-') {
      if (takes_value(arg)) ++i;
      continue;
    }
    return i;
  }
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Session

const std::vector<std::string>& ColorModeNames() {
  static const auto* names = new std::vector<std::string>{"auto", "always", "never"};
  return *names;
}

bool StopSignal::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  if (following_ == nullptr) return false;
  following_->TryCancel();
  return true;
}

bool StopSignal::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

StopSignal::Following::Following(StopSignal* signal, grpc::ClientContext* context)
    : signal_(signal) {
  if (signal_ == nullptr) return;
  absl::MutexLock lock(&signal_->mu_);
  signal_->following_ = context;
  // A context cancelled before its call starts cancels the call as it starts.
  if (signal_->stopped_) context->TryCancel();
}

StopSignal::Following::~Following() {
  if (signal_ == nullptr) return;
  absl::MutexLock lock(&signal_->mu_);
  signal_->following_ = nullptr;
}

ServerStubs NewServerStubs(const std::shared_ptr<grpc::ChannelInterface>& channel) {
  return {v1::InventoryService::NewStub(channel), v1::TopologyService::NewStub(channel),
          v1::AdminService::NewStub(channel)};
}

grpc::Status Session::Call(const std::function<grpc::Status(grpc::ClientContext*)>& rpc) const {
  grpc::ClientContext context;
  Prepare(&context, absl::Now() + timeout);
  return rpc(&context);
}

void Session::Prepare(grpc::ClientContext* context, absl::Time deadline) const {
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  context->AddMetadata(kPrincipalMetadataKey, principal);
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

// --wait of request, phase and replace: follows the response's allocation until READY, then prints
// the response with the allocation as it ended (-o json|yaml) or the allocation.
template <typename Response>
int WaitUntilReady(const Session& s, absl::Time deadline, Response& response) {
  v1::Allocation allocation = response.allocation();
  int code = WaitForAllocation(s, v1::ALLOCATION_STATE_READY, deadline, &allocation);
  if (code != kExitOk) return code;
  if (s.format != OutputFormat::kTable) {
    *response.mutable_allocation() = std::move(allocation);
    return PrintMessage(s, response);
  }
  *s.out << AllocationText(allocation);
  return kExitOk;
}

int RequestTopology(const Session& s, const TopologyRequestArgs& args) {
  if (args.wait && args.dry_run) {
    return UsageError(*s.err, "topology", "--wait has nothing to wait for with --dry-run");
  }
  std::optional<google::protobuf::Duration> lease;
  if (!args.lease.empty()) {
    absl::StatusOr<google::protobuf::Duration> parsed = ParseLease(args.lease);
    if (!parsed.ok()) {
      return UsageError(*s.err, "topology", absl::StrCat("--lease: ", parsed.status().message()));
    }
    lease = *parsed;
  }
  const absl::Time deadline = absl::Now() + s.timeout;
  absl::StatusOr<v1::RequestTopologyRequest> request = ReadTopologySpecFile(args.file);
  if (!request.ok()) return s.Failed(ToGrpcStatus(request.status()));
  if (lease) *request->mutable_lease() = *lease;
  request->set_dry_run(args.dry_run);
  v1::RequestTopologyResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->RequestTopology(c, *request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (!args.wait) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    if (args.dry_run) {
      *s.out << "dry run: nothing was changed\n" << PlanText(response.plan());
    } else {
      *s.out << AllocationText(response.allocation());
    }
    return kExitOk;
  }

  return WaitUntilReady(s, deadline, response);
}

int ReleaseTopology(const Session& s, const std::string& id, bool wait) {
  const absl::Time deadline = absl::Now() + s.timeout;
  v1::ReleaseTopologyRequest request;
  request.set_id(id);
  v1::ReleaseTopologyResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->ReleaseTopology(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  v1::Allocation allocation = response.allocation();
  if (allocation.id().empty()) allocation.set_id(id);
  if (!wait) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    *s.out << AllocationStateLine(allocation) << "\n";
    return kExitOk;
  }
  int code = WaitForAllocation(s, v1::ALLOCATION_STATE_RELEASED, deadline, &allocation);
  if (code != kExitOk || s.format == OutputFormat::kTable) return code;
  *response.mutable_allocation() = std::move(allocation);
  return PrintMessage(s, response);
}

int ActivatePhase(const Session& s, const std::string& id, const std::string& phase, bool wait) {
  const absl::Time deadline = absl::Now() + s.timeout;
  v1::ActivatePhaseRequest request;
  request.set_id(id);
  request.set_phase(phase);
  v1::ActivatePhaseResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->ActivatePhase(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format == OutputFormat::kTable) {
    *s.out << PhaseSwitchText(response.allocation(), response.plan());
  }
  if (!wait) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    *s.out << AllocationStateLine(response.allocation()) << "\n";
    return kExitOk;
  }
  return WaitUntilReady(s, deadline, response);
}

int DetachDevices(const Session& s, const std::string& id, const std::vector<std::string>& devices,
                  bool dry_run, bool wait) {
  const absl::Time deadline = absl::Now() + s.timeout;
  v1::DetachDevicesRequest request;
  request.set_id(id);
  for (const std::string& d : devices) request.add_devices(d);
  request.set_dry_run(dry_run);
  v1::DetachDevicesResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->DetachDevices(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format == OutputFormat::kTable) {
    *s.out << absl::StrCat(
        dry_run ? "dry run: " : "", id, " detached ", absl::StrJoin(devices, ", "), ": ",
        response.plan().remove_size(),
        " cross-connects removed\nmembers: ", absl::StrJoin(response.plan().members(), ", "), "\n");
    for (const v1::CrossConnect& xc : response.plan().remove()) {
      *s.out << "  removed  " << CrossConnectText(xc) << "\n";
    }
  }
  if (!wait || dry_run) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    if (!dry_run) *s.out << AllocationStateLine(response.allocation()) << "\n";
    return kExitOk;
  }
  return WaitUntilReady(s, deadline, response);
}

int ReplaceMember(const Session& s, const ReplaceMemberArgs& args) {
  const absl::Time deadline = absl::Now() + s.timeout;
  v1::ReplaceMemberRequest request;
  request.set_allocation_id(args.id);
  request.set_member(args.member);
  request.set_spare(args.spare);
  request.set_dry_run(args.dry_run);
  v1::ReplaceMemberResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->admin->ReplaceMember(c, request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (s.format == OutputFormat::kTable) {
    // The plan lists the members with the spare in the failed member's place.
    *s.out << absl::StrCat(args.dry_run ? "dry run: " : "", args.id, " member ", args.member,
                           " replaced: ", response.plan().remove_size(),
                           " cross-connects removed, ", response.plan().add_size(),
                           " added\nmembers: ", absl::StrJoin(response.plan().members(), ", "),
                           "\n");
    for (const v1::CrossConnect& xc : response.plan().remove()) {
      *s.out << "  removed  " << CrossConnectText(xc) << "\n";
    }
    for (const v1::CrossConnect& xc : response.plan().add()) {
      *s.out << "  added    " << CrossConnectText(xc) << "\n";
    }
  }
  if (!args.wait) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    if (!args.dry_run) *s.out << AllocationStateLine(response.allocation()) << "\n";
    return kExitOk;
  }
  return WaitUntilReady(s, deadline, response);
}

int KeepAlive(const Session& s, const std::string& id) {
  v1::KeepAliveRequest request;
  request.set_id(id);
  v1::KeepAliveResponse response;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->topology->KeepAlive(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << LeaseLine(id, response.lease_expires(), s.clock->Now()) << "\n";
  return kExitOk;
}

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

int Events(const Session& s, const EventsArgs& args) {
  if (args.after < 0) {
    return UsageError(*s.err, "events",
                      absl::StrCat("--after must be 0 or more, got ", args.after));
  }
  if (!args.follow) {
    GetArgs get;
    get.kind = "events";
    get.kind_filter = args.object_kind;
    get.object = args.object;
    get.after = args.after;
    return Get(s, get);
  }
  v1::WatchEventsRequest request;
  request.set_after_sequence(static_cast<uint64_t>(args.after));
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

int Completion(const Session& s, const std::string& shell) {
  if (s.format != OutputFormat::kTable) {
    return UsageError(*s.err, "completion",
                      "-o applies to commands that print objects; completion prints a script");
  }
  if (shell == "bash") {
    *s.out << BashCompletion(FleetctlCommandLine());
  } else if (shell == "zsh") {
    *s.out << ZshCompletion(FleetctlCommandLine());
  } else {
    return UsageError(*s.err, "completion",
                      absl::StrCat("unknown shell '", shell,
                                   "'; shells: ", absl::StrJoin(CompletionShells(), ", ")));
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------------------
// The command line

CommandLineSpec FleetctlCommandLine() {
  CommandLineSpec spec;
  std::vector<std::string> verb_names;
  for (const Verb& verb : Verbs()) {
    CommandLine line;
    FlagTable flags(nullptr);
    verb.declare(flags, line);
    spec.verbs.push_back(
        {std::string(verb.name), std::string(verb.summary), verb.words, flags.specs()});
    verb_names.emplace_back(verb.name);
  }
  spec.verbs.push_back({"help", std::string(kHelpSummary), verb_names, {}});
  spec.global_flags = GlobalFlagSpecs();
  // FlagSet declares --help on every verb itself.
  FlagSpec help;
  help.name = "help";
  help.short_name = 'h';
  help.help = "show this help";
  spec.global_flags.push_back(std::move(help));
  return spec;
}

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
  FlagTable table(&flags);
  CommandLine line;
  GlobalOptions global{env.default_server};
  verb->declare(table, line);
  DeclareGlobalFlags(table, global);
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
    return UsageError(err, verb->name,
                      absl::StrCat("unknown output format '", global.output,
                                   "'; formats: ", absl::StrJoin(OutputFormatNames(), ", ")));
  }
  bool color = false;
  if (global.color == "always") {
    color = true;
  } else if (global.color == "auto") {
    color = env.color_terminal;
  } else if (global.color != "never") {
    return UsageError(err, verb->name,
                      absl::StrCat("unknown --color '", global.color,
                                   "'; accepted: ", absl::StrJoin(ColorModeNames(), ", ")));
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
                  &err,
                  color,
                  env.stop};
  return verb->run(session, line);
}

}  // namespace fleet::cli
