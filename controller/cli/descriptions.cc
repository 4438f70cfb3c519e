#include "controller/cli/descriptions.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/hex_id.h"
#include "common/proto_time.h"
#include "common/wording.h"
#include "controller/cli/object_text.h"
#include "controller/cli/output.h"
#include "controller/cli/tables.h"
#include "controller/inventory/inventory.h"
#include "fleet/v1/names.h"
#include "fleet/v1/phases.h"

namespace fleet::cli {
namespace {

std::string OnicPortLine(const v1::OnicPort& port) {
  return absl::StrCat("port ", port.index(), "  tx ", OrDash(SwitchPortText(port.tx())), "  rx ",
                      OrDash(SwitchPortText(port.rx())), "  admin ",
                      OrDash(v1::Name(port.admin_state())), "  oper ",
                      OrDash(v1::Name(port.oper_state())));
}

}  // namespace

std::string DescribeSwitch(const v1::Switch& sw, const std::vector<v1::SwitchPort>& ports) {
  Description d;
  d.Field("ID", sw.id());
  d.Field("Model", sw.model());
  std::string size;
  if (sw.ingress_ports() > 0) {
    size = absl::StrCat(sw.ingress_ports(), "x", sw.egress_ports(), " (ingress 1-",
                        sw.ingress_ports(), ", egress ", sw.ingress_ports() + 1, "-",
                        sw.ingress_ports() + sw.egress_ports(), ")");
  }
  d.Field("Size", size);
  d.Field("Address", sw.address());
  d.Field("Protocol", v1::Name(sw.protocol()));
  d.Field("Management port",
          sw.management_port() ? absl::StrCat(sw.management_port()) : "protocol default");
  // What fleetd logs in with; the inventory's `credentials:` is only a note (in -o yaml).
  if (!sw.credentials_file().empty()) {
    d.Field("Credentials", absl::StrCat(sw.credentials_file(), " (fleetd's switch_credentials)"));
  }
  if (sw.protocol() == v1::SWITCH_PROTOCOL_REST) {
    d.Field("Transport",
            sw.insecure_http()
                ? "plain HTTP (insecure_http: credentials in clear)"
                : absl::StrCat("HTTPS, verified against ",
                               sw.ca_bundle().empty() ? "the system's CAs" : sw.ca_bundle()));
  }
  d.Field("Cluster", sw.cluster());
  d.Field("Trunk reserved", inventory::PortRanges({sw.trunk_reserved_ports().begin(),
                                                   sw.trunk_reserved_ports().end()}));

  int onic_fibers = 0, trunk_fibers = 0;
  std::vector<uint32_t> in_circuits, drained, failed, degraded;
  for (const v1::SwitchPort& port : ports) {
    if (port.wiring().has_onic_port()) ++onic_fibers;
    if (port.wiring().has_trunk()) ++trunk_fibers;
    if (!port.circuit_id().empty()) in_circuits.push_back(port.ref().port());
    if (port.admin_state() == v1::ADMIN_STATE_DRAINED) drained.push_back(port.ref().port());
    if (port.oper_state() == v1::OPER_STATE_FAILED) failed.push_back(port.ref().port());
    if (port.oper_state() == v1::OPER_STATE_DEGRADED) degraded.push_back(port.ref().port());
  }
  d.Field("Wired ports", absl::StrCat(onic_fibers, " to O-NICs, ", trunk_fibers, " to trunks"));
  d.Field("In circuits", absl::StrCat(in_circuits.size(), in_circuits.empty() ? "" : ": ",
                                      inventory::PortRanges(in_circuits)));
  d.Field("Drained ports", inventory::PortRanges(drained));
  d.Field("Failed ports", inventory::PortRanges(failed));
  d.Field("Degraded ports", inventory::PortRanges(degraded));
  return d.Render();
}

std::string DescribeHost(const v1::Host& host, const std::vector<v1::Device>& devices,
                         const v1::Agent* agent, const std::vector<Attachment>& attached) {
  Description d;
  d.Field("Name", host.name());
  d.Field("Address", host.address());
  d.Field("Cluster", host.cluster());
  d.Field("Admin", AdminText(host.admin_state(), host.admin_reason()));
  if (agent == nullptr) {
    d.Field("Agent", "never registered");
  } else {
    std::string state =
        agent->connected()
            ? absl::StrCat("connected since ", OrDash(FormatTime(agent->connected_since())))
            : absl::StrCat("disconnected, last heartbeat ",
                           OrDash(FormatTime(agent->last_heartbeat())));
    d.Field("Agent", absl::StrCat(state, "; ", OrDash(agent->backend()), " backend, version ",
                                  OrDash(agent->software_version())));
    if (!agent->inventory_mismatches().empty()) {
      d.List("Agent mismatches",
             {agent->inventory_mismatches().begin(), agent->inventory_mismatches().end()});
    }
  }
  std::vector<std::string> items;
  for (const v1::Device& device : devices) {
    items.push_back(absl::StrCat(
        device.id(), "  ", OrDash(v1::Name(device.kind())), "  ", OrDash(device.model()),
        "  O-NICs ", device.onics().empty() ? "-" : absl::StrJoin(device.onics(), ", "),
        device.allocations().empty()
            ? ""
            : absl::StrCat("  used by ", absl::StrJoin(device.allocations(), ", "))));
  }
  d.List("Devices", std::move(items));
  std::vector<std::string> pooled;
  for (const Attachment& a : attached) {
    for (const std::string& device : a.devices) {
      pooled.push_back(absl::StrCat(device, "  allocation ", a.allocation_id));
    }
  }
  if (!pooled.empty()) d.List("Attached devices", std::move(pooled));
  return d.Render();
}

std::string DescribeDevice(const v1::Device& device, const std::vector<v1::Onic>& onics) {
  Description d;
  d.Field("ID", device.id());
  d.Field("Kind", v1::Name(device.kind()));
  d.Field("Host", device.host());
  d.Field("Chassis", device.chassis());
  d.Field("Model", device.model());
  d.Field("Admin", v1::Name(device.admin_state()));
  d.Field("Used by", absl::StrJoin(device.allocations(), ", "));
  d.Field("Health", device.health_reason().empty() ? v1::Name(device.health())
                                                   : absl::StrCat(v1::Name(device.health()), " (",
                                                                  device.health_reason(), ")"));
  d.Field("Spare", device.spare() ? "yes, held for healing" : "no");
  if (device.has_pcie()) {
    // As the inventory file writes it; the DSN byte by byte, as lspci prints it.
    const v1::PcieIdentity& pcie = device.pcie();
    std::string id = absl::StrCat(pcie.vendor() ? PcieIdText(pcie.vendor()) : "*", ":",
                                  pcie.device() ? PcieIdText(pcie.device()) : "*");
    if (pcie.dsn() != 0) absl::StrAppend(&id, "  dsn ", DsnText(pcie.dsn()));
    d.Field("PCIe id", id);
  }
  std::vector<std::string> items;
  for (const v1::Onic& onic : onics) {
    std::string item =
        absl::StrCat(onic.id(), "  serial ", OrDash(onic.serial()), "  pcie ",
                     OrDash(onic.pcie_address()), "  admin ", OrDash(v1::Name(onic.admin_state())));
    for (const v1::OnicPort& port : onic.ports()) absl::StrAppend(&item, "\n", OnicPortLine(port));
    items.push_back(std::move(item));
  }
  d.List("O-NICs", std::move(items));
  return d.Render();
}

std::string DescribeOnic(const v1::Onic& onic, const std::vector<v1::Circuit>& circuits) {
  Description d;
  d.Field("ID", onic.id());
  d.Field("Device", onic.device());
  d.Field("Host", onic.host());
  d.Field("Serial", onic.serial());
  d.Field("PCIe", onic.pcie_address());
  d.Field("Admin", AdminText(onic.admin_state(), onic.admin_reason()));
  d.Field("Used by", absl::StrJoin(onic.allocations(), ", "));
  std::vector<std::string> ports;
  for (const v1::OnicPort& port : onic.ports()) ports.push_back(OnicPortLine(port));
  d.List("Ports", std::move(ports));
  d.List("Circuits", CircuitLines(circuits));
  return d.Render();
}

namespace {

// What both the short and the full view of an allocation start with.
void AddAllocationIdentity(const v1::Allocation& a, Description& d) {
  d.Field("ID", a.id());
  d.Field("Tenant", a.tenant());
  d.Field("Name", a.name());
  d.Field("State", v1::Name(a.state()));
  d.Field("Reason", a.reason());
}

// A traffic-aware plan's share of the bytes on direct circuits; nothing for other plans.
void AddDirectTraffic(const v1::Allocation& a, Description& d) {
  if (a.direct_traffic_share() > 0) {
    d.Field("Direct traffic", DirectTrafficText(a.direct_traffic_share()));
  }
}

// "Phases: dp (active), tp" for a phased allocation; nothing for a single topology. With
// prepare_next_phase, the other phase is "(prepared)" when its circuits are on the switch,
// else "(in place)": the two could not be on the switch together.
void AddPhases(const v1::Allocation& a, Description& d) {
  std::vector<std::string> phases;
  for (const std::string& phase : a.phases()) {
    if (phase == a.active_phase()) {
      phases.push_back(absl::StrCat(phase, " (active)"));
      continue;
    }
    if (v1::PhaseOnSwitch(a, phase)) {
      phases.push_back(absl::StrCat(phase, " (prepared)"));
    } else if (a.request().prepare_next_phase()) {
      phases.push_back(absl::StrCat(phase, " (in place)"));
    } else {
      phases.push_back(phase);
    }
  }
  if (!phases.empty()) d.List("Phases", std::move(phases));
}

std::vector<std::string> AllocationCircuitLines(const v1::Allocation& a) {
  return CircuitLines(std::vector<v1::Circuit>(a.circuits().begin(), a.circuits().end()));
}

}  // namespace

std::string DescribeAllocation(const v1::Allocation& a, const std::vector<v1::Event>& events,
                               absl::Time now) {
  Description d;
  AddAllocationIdentity(a, d);
  d.Field("Created", TimeWithAge(a.created(), now));
  d.Field("Updated", TimeWithAge(a.updated(), now));
  d.Field("Lease expires", TimeWithAge(a.lease_expires(), now));
  if (a.has_degraded_since()) d.Field("Degraded since", TimeWithAge(a.degraded_since(), now));
  if (a.request().has_on_failure()) {
    const v1::FailurePolicy& p = a.request().on_failure();
    d.Field(
        "On failure",
        p.replace()
            ? absl::StrCat("replace within ",
                           absl::FormatDuration(p.has_within() ? FromProtoDuration(p.within())
                                                               : absl::Seconds(2)),
                           ", at most ", p.max_replacements() > 0 ? p.max_replacements() : 1,
                           ", spares ", p.spares() == v1::SPARE_SCOPE_ANY ? "any" : "same-switch")
            : "retrain only");
  }
  AddDirectTraffic(a, d);
  AddPhases(a, d);
  d.List("Members", {a.members().begin(), a.members().end()});
  std::vector<std::string> replacements;
  for (const v1::MemberReplacement& r : a.replacements()) {
    replacements.push_back(absl::StrCat(
        r.failed(), " -> ", r.spare(), "  by ", r.by(), "  ", TimeWithAge(r.time(), now),
        r.has_degraded_for()
            ? absl::StrCat("  after ", absl::FormatDuration(FromProtoDuration(r.degraded_for())),
                           " DEGRADED")
            : "",
        "  (", r.reason(), ")"));
  }
  d.List("Replacements", std::move(replacements));
  d.List("Circuits", AllocationCircuitLines(a));
  size_t stage_width = 0;
  for (const v1::StageTiming& t : a.stage_timings())
    stage_width = std::max(stage_width, DisplayWidth(t.stage()));
  std::vector<std::string> timings;
  for (const v1::StageTiming& t : a.stage_timings()) {
    timings.push_back(
        absl::StrCat(PadRight(t.stage(), stage_width), "  ", StageMillisText(t.duration())));
  }
  d.List("Stage timings", std::move(timings));
  std::vector<std::string> event_lines;
  if (!events.empty()) {
    v1::ListEventsResponse list;
    for (const v1::Event& event : events) *list.add_events() = event;
    event_lines = absl::StrSplit(EventsTable(list, now).Render(), '\n', absl::SkipEmpty());
  }
  d.List("Events", std::move(event_lines));
  return d.Render();
}

std::string DescribeAgent(const v1::Agent& agent, absl::Time now) {
  Description d;
  d.Field("Host", agent.host());
  d.Field("Connected", agent.connected() ? "yes" : "no");
  if (agent.connected()) d.Field("Connected since", TimeWithAge(agent.connected_since(), now));
  d.Field("Last heartbeat", TimeWithAge(agent.last_heartbeat(), now));
  d.Field("Backend", agent.backend());
  d.Field("Version", agent.software_version());
  d.Field("Capabilities",
          agent.capabilities().empty() ? "(none)" : absl::StrJoin(agent.capabilities(), ", "));
  d.List("O-NIC serials", {agent.onic_serials().begin(), agent.onic_serials().end()});
  d.List("Inventory mismatches",
         {agent.inventory_mismatches().begin(), agent.inventory_mismatches().end()});
  return d.Render();
}

// ---------------------------------------------------------------------------------------
// What the verbs that change things print

std::string PlanText(const v1::Plan& plan, absl::string_view initial_phase) {
  // The phases in plan order (the request's), with their circuits.
  std::vector<std::pair<std::string, int>> phases;
  for (const v1::Circuit& c : plan.circuits()) {
    if (c.phase().empty()) continue;
    if (phases.empty() || phases.back().first != c.phase()) phases.push_back({c.phase(), 0});
    ++phases.back().second;
  }
  const std::string changes = absl::StrCat(Counted(plan.add_size(), "cross-connect"), " to make, ",
                                           plan.remove_size(), " to remove");
  std::string out = absl::StrCat("members: ", absl::StrJoin(plan.members(), ", "), "\n");
  if (phases.empty()) {
    absl::StrAppend(&out, Counted(plan.circuits_size(), "circuit"), ", ", changes, ", ",
                    Counted(plan.ports_used_size(), "O-NIC port"), "\n");
  } else {
    // The first phase goes on the switch, and with it a prepared one (CombinePhases plans
    // both PLANNED, the others INACTIVE): their cross-connects are the ones to make.
    std::vector<std::string> counts;
    for (const auto& [name, circuits] : phases) counts.push_back(absl::StrCat(name, " ", circuits));
    const std::string first(initial_phase.empty() ? phases.front().first : initial_phase);
    std::set<std::string> made = {first};
    for (const v1::Circuit& c : plan.circuits()) {
      if (c.state() == v1::CIRCUIT_STATE_PLANNED) made.insert(c.phase());
    }
    absl::StrAppend(&out, Counted(plan.circuits_size(), "circuit"), " in ",
                    Counted(phases.size(), "phase"), " (", absl::StrJoin(counts, ", "), ") over ",
                    Counted(plan.ports_used_size(), "O-NIC port"), "\n",
                    made.size() > 1
                        ? absl::StrCat(absl::StrJoin(made, " and "), " prepared together")
                        : absl::StrCat(first, " first"),
                    ": ", changes, "\n");
  }
  if (plan.direct_traffic_share() > 0) {
    absl::StrAppend(&out, "direct traffic: ", DirectTrafficText(plan.direct_traffic_share()), "\n");
  }
  Table table = phases.empty() ? Table({"source", "destination", "cross-connects"})
                               : Table({"source", "destination", "cross-connects", "phase"});
  for (const v1::Circuit& c : plan.circuits()) {
    std::vector<std::string> xcs;
    for (const v1::CrossConnect& xc : c.cross_connects()) xcs.push_back(CrossConnectText(xc));
    table.AddRow({OnicPortText(c.source()), OnicPortText(c.destination()), absl::StrJoin(xcs, ", "),
                  c.phase()});
  }
  return out + table.Render();
}

std::string AllocationText(const v1::Allocation& a) {
  Description d;
  AddAllocationIdentity(a, d);
  AddDirectTraffic(a, d);
  AddPhases(a, d);
  d.List("Members", {a.members().begin(), a.members().end()});
  d.List("Circuits", AllocationCircuitLines(a));
  return d.Render();
}

std::string PhaseSwitchText(const v1::Allocation& a, const v1::Plan& plan) {
  // Made before break: the other phase stays on the switch, and nothing was sent to it.
  if (v1::HoldsPreparedPhase(a) && plan.remove().empty() && plan.add().empty()) {
    return absl::StrCat(a.id(), " phase ", a.active_phase(), ": prepared, no switch command\n");
  }
  std::string out = absl::StrCat(a.id(), " phase ", a.active_phase(), ": ",
                                 Counted(plan.remove_size(), "cross-connect"), " removed, ",
                                 plan.add_size(), " added\n");
  for (const v1::CrossConnect& xc : plan.remove())
    absl::StrAppend(&out, "  removed  ", CrossConnectText(xc), "\n");
  for (const v1::CrossConnect& xc : plan.add())
    absl::StrAppend(&out, "  added    ", CrossConnectText(xc), "\n");
  return out;
}

std::string DrainText(const v1::DrainRequest& request, const v1::DrainResponse& response) {
  std::string out = absl::StrCat("drained ", DrainTargetText(request.target()));
  if (!request.reason().empty()) absl::StrAppend(&out, ": ", request.reason());
  out += "\n";
  const auto& affected = response.affected_allocations();
  if (affected.empty()) return out + "no allocation uses it\n";
  // Without evict the circuits stay: the operator should know whom a later failure would hit.
  if (!request.evict()) {
    return absl::StrCat(out, "allocations still using it: ", absl::StrJoin(affected, ", "), "\n");
  }
  for (const v1::Eviction& e : response.evictions()) {
    if (!e.moved()) {
      absl::StrAppend(&out, "allocation ", e.allocation_id(), " failed: ", e.reason(), "\n");
      continue;
    }
    std::vector<std::string> swaps;
    for (const v1::MemberReplacement& r : e.replacements()) {
      swaps.push_back(absl::StrCat(r.failed(), " -> ", r.spare()));
    }
    absl::StrAppend(&out, "allocation ", e.allocation_id(), " moved: ", absl::StrJoin(swaps, ", "),
                    "\n");
  }
  return out;
}

std::string ReconcileText(const v1::ReconcileRequest& request,
                          const v1::ReconcileResponse& response) {
  std::string out = request.dry_run() ? "dry run: nothing was changed\n" : "";
  Table drift = DriftTable(response);
  if (drift.empty()) {
    absl::StrAppend(&out, "no drift",
                    request.switch_id().empty() ? "" : absl::StrCat(" on ", request.switch_id()),
                    "\n");
  } else {
    absl::StrAppend(&out, drift.Render());
  }
  absl::StrAppend(&out, "repaired ", response.repaired(), ", resumed ",
                  Counted(response.resumed_transactions(), "transaction"), ", rolled back ",
                  Counted(response.rolled_back_transactions(), "transaction"), "\n");
  return out;
}

}  // namespace fleet::cli
