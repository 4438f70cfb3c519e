#include "controller/cli/topology_verbs.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/wording.h"
#include "controller/cli/allocation_wait.h"
#include "controller/cli/descriptions.h"
#include "controller/cli/object_text.h"
#include "controller/cli/printing.h"
#include "controller/cli/tables.h"
#include "controller/cli/topology_spec.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

const std::vector<std::string>& TopologySubcommands() {
  static const auto* words = new std::vector<std::string>{"request",   "phase", "detach", "release",
                                                          "keepalive", "ranks", "fabric"};
  return *words;
}

void DeclareTopologyFlags(FlagTable& f, TopologyRequestArgs& a) {
  f.File("file,f", &a.file, "request: the topology request file (YAML)");
  f.Bool("dry-run", &a.dry_run, "request, detach: plan only; change nothing");
  f.Bool("wait", &a.wait,
         "request, phase, detach, release: follow the allocation until it is ready "
         "(released)");
  f.String("lease", &a.lease, "request: lease duration, e.g. 10m; 0 is the server's default");
  f.String("name", &a.name, "request: the allocation's name, over the file's");
  f.String("request-id", &a.request_id,
           "request: idempotency key; a retry with it returns the same allocation");
  f.String("tenant", &a.tenant, "request: the tenant, over the file's");
  f.String("phase", &a.phase,
           "ranks: the phase whose circuits to follow (default: the active one)");
  f.Bool("hostfile", &a.hostfile, "ranks: print a hostfile, HOST slots=N per host");
  f.String("allocation", &a.allocation,
           "fabric: the allocation whose members to describe (its ports count as its own)");
}

// Flags that belong to one subcommand only, with the subcommand they belong to.
std::string MisplacedFlag(const std::string& subcommand, const TopologyRequestArgs& a) {
  if (subcommand != "request" && (!a.name.empty() || !a.request_id.empty() || !a.tenant.empty())) {
    return "--name, --request-id and --tenant apply to topology request only";
  }
  if (subcommand != "ranks" && (!a.phase.empty() || a.hostfile)) {
    return "--phase and --hostfile apply to topology ranks only";
  }
  if (subcommand != "fabric" && !a.allocation.empty()) {
    return "--allocation applies to topology fabric only";
  }
  return "";
}

int RunTopology(const Session& s, const TopologyRequestArgs& args, const Positional& p) {
  if (p.empty()) {
    return UsageError(*s.err, "topology",
                      "topology needs a subcommand: request -f FILE, phase ID NAME, "
                      "detach ID DEVICE..., release ID, keepalive ID, ranks ID or fabric "
                      "[DEVICE...] [--allocation ID]");
  }
  const std::vector<std::string>& subcommands = TopologySubcommands();
  if (std::find(subcommands.begin(), subcommands.end(), p[0]) == subcommands.end()) {
    return UsageError(*s.err, "topology",
                      absl::StrCat("unknown topology subcommand '", p[0],
                                   "'; subcommands: ", absl::StrJoin(subcommands, ", ")));
  }
  if (std::string misplaced = MisplacedFlag(p[0], args); !misplaced.empty()) {
    return UsageError(*s.err, "topology", misplaced);
  }
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
  if (p[0] == "fabric") {
    if (p.size() < 2 && args.allocation.empty()) {
      return UsageError(*s.err, "topology",
                        "topology fabric needs DEVICEs, --allocation ID, or both");
    }
    if (args.wait) {
      return UsageError(*s.err, "topology", "--wait does not apply to topology fabric");
    }
    return Fabric(s, {p.begin() + 1, p.end()}, args.allocation);
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
  if (p[0] == "ranks") return Ranks(s, p[1], args.phase, args.hostfile);
  return KeepAlive(s, p[1]);
}

}  // namespace

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
  if (!args.name.empty()) request->set_name(args.name);
  if (!args.request_id.empty()) request->set_request_id(args.request_id);
  if (!args.tenant.empty()) request->set_tenant(args.tenant);
  request->set_dry_run(args.dry_run);
  v1::RequestTopologyResponse response;
  grpc::Status status = s.Call([&](grpc::ClientContext* c) {
    return s.server->topology->RequestTopology(c, *request, &response);
  });
  if (!status.ok()) return s.Failed(status);
  if (!args.wait) {
    if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
    if (args.dry_run) {
      *s.out << "dry run: nothing was changed\n"
             << PlanText(response.plan(), request->initial_phase());
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
        Counted(response.plan().remove_size(), "cross-connect"),
        " removed\nmembers: ", absl::StrJoin(response.plan().members(), ", "), "\n");
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

int Ranks(const Session& s, const std::string& id, const std::string& phase, bool hostfile) {
  v1::GetRanksRequest request;
  request.set_id(id);
  request.set_phase(phase);
  v1::GetRanksResponse response;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->topology->GetRanks(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (hostfile) {
    for (const v1::RankHost& host : response.hosts()) {
      if (host.host().empty()) {
        *s.err << "fleetctl: rank " << host.ranks(0) << " of " << id
               << " has no host (a pooled device attached to none): no hostfile\n";
        return kExitFailed;
      }
      *s.out << host.host() << " slots=" << host.ranks_size() << "\n";
    }
    return kExitOk;
  }
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  *s.out << absl::StrCat(id, ": ", Counted(response.ranks_size(), "rank"), " in ",
                         v1::Name(response.order()), " order",
                         response.phase().empty() ? "" : " of phase " + response.phase(), "\n");
  *s.out << RanksTable(response).Render(s.color);
  return kExitOk;
}

int Fabric(const Session& s, const std::vector<std::string>& devices,
           const std::string& allocation) {
  v1::GetFabricRequest request;
  request.set_allocation(allocation);
  for (const std::string& d : devices) request.add_devices(d);
  v1::GetFabricResponse response;
  grpc::Status status = s.Call(
      [&](grpc::ClientContext* c) { return s.server->topology->GetFabric(c, request, &response); });
  if (!status.ok()) return s.Failed(status);
  if (s.format != OutputFormat::kTable) return PrintMessage(s, response);
  const int joinable = std::count_if(response.pairs().begin(), response.pairs().end(),
                                     [](const v1::FabricPair& p) { return p.joinable(); });
  *s.out << absl::StrCat(Counted(response.devices_size(), "device"), "; ", joinable, " of ",
                         Counted(response.pairs_size(), "ordered pair"), " joinable\n");
  *s.out << FabricPortsTable(response).Render(s.color) << "\n";
  *s.out << FabricPairsTable(response).Render(s.color) << "\n";
  *s.out << ChangeCostsTable(response).Render(s.color);
  return kExitOk;
}

Verb TopologyVerb() {
  return {"topology",
          "fleetctl topology (request -f FILE [--dry-run] [--wait] [--lease DURATION] | phase ID "
          "NAME [--wait] | detach ID DEVICE... [--dry-run] [--wait] | release ID [--wait] | "
          "keepalive ID | ranks ID [--phase NAME] [--hostfile] | fabric [DEVICE...] "
          "[--allocation ID]) [flags]",
          "Request, switch the phase of, detach devices from, release, keep alive or rank a "
          "topology, or see the fabric a job's planner may use",
          "Hold a topology for a job: an allocation of members and the circuits between them.\n\n"
          "  request -f FILE  Send a topology request file (see deploy/examples/). Prints the\n"
          "                   allocation as admitted: members, and each circuit with its\n"
          "                   cross-connects. With --dry-run, prints the plan instead and\n"
          "                   nothing is stored or programmed. With --wait, prints a line\n"
          "                   'ID STATE [REASON]' per state change until the allocation is\n"
          "                   ready (exit 0, then the allocation), failed or released (exit 1),\n"
          "                   or --timeout passes (exit 1). Degraded is waited through.\n"
          "                   --lease DURATION (90s, 10m, 1h30m) overrides the file's lease;\n"
          "                   --name, --tenant and --request-id (an idempotency key: a retry\n"
          "                   returns the same allocation) override the file's.\n"
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
          "  keepalive ID     Renew the lease; prints when it now expires.\n"
          "  ranks ID         The rank order that follows the circuits of the active phase\n"
          "                   (--phase NAME: another): ring, chain, torus or member order,\n"
          "                   with each rank's device, host, local rank, and for attached\n"
          "                   devices the PCIe address the host sees. --hostfile prints\n"
          "                   'HOST slots=N' per host in node-rank order (docs/ranks.md).\n"
          "  fabric [DEVICE...] [--allocation ID]  What a job's own planner sees: each\n"
          "                   device's O-NIC ports (switch; free, own, held or unusable),\n"
          "                   every ordered pair with whether one circuit could join it now\n"
          "                   and over which switches, and what each stage of a change has\n"
          "                   cost lately (median, p90). --allocation: its members (unless\n"
          "                   DEVICEs are named), its ports counted as its own.\n\n"
          "With -o json or yaml, prints the response; the --wait lines then go to stderr.",
          WithFlags<TopologyRequestArgs>(DeclareTopologyFlags, RunTopology),
          TopologySubcommands()};
}

}  // namespace fleet::cli
