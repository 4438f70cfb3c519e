#include "controller/cli/tables.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/cli/object_text.h"
#include "fleet/v1/names.h"

namespace fleet::cli {
namespace {

const v1::OnicPort* FindOnicPort(const v1::Onic& onic, uint32_t index) {
  for (const v1::OnicPort& port : onic.ports()) {
    if (port.index() == index) return &port;
  }
  return nullptr;
}

}  // namespace

Table SwitchesTable(const v1::ListSwitchesResponse& response) {
  Table table({"id", "model", "size", "address", "protocol", "cluster", "reserved"});
  for (const v1::Switch& sw : response.switches()) {
    std::string size = sw.ingress_ports() || sw.egress_ports()
                           ? absl::StrCat(sw.ingress_ports(), "x", sw.egress_ports())
                           : "";
    table.AddRow({sw.id(), sw.model(), size, sw.address(), v1::Name(sw.protocol()), sw.cluster(),
                  absl::StrCat(sw.trunk_reserved_ports_size())});
  }
  return table;
}

Table PortsTable(const v1::ListPortsResponse& response) {
  Table table({"switch", "port", "dir", "admin", "oper", "reserved", "wired-to", "circuit",
               "used-by", "why"});
  for (const v1::SwitchPort& port : response.ports()) {
    std::string reserved = port.reservation() == v1::PORT_RESERVATION_TRUNK ? "trunk" : "";
    // A circuit without an allocation is an operator's own.
    std::string used_by = !port.allocation_id().empty() ? port.allocation_id()
                          : !port.circuit_id().empty()  ? "(manual)"
                                                        : "";
    table.AddRow({port.ref().switch_id(), absl::StrCat(port.ref().port()),
                  v1::Name(port.direction()), v1::Name(port.admin_state()),
                  v1::Name(port.oper_state()), reserved, WiringText(port), port.circuit_id(),
                  used_by, PortWhyText(port)});
  }
  table.MarkStateColumn("admin");
  table.MarkStateColumn("oper");
  return table;
}

Table HostsTable(const v1::ListHostsResponse& response) {
  Table table({"name", "address", "cluster", "admin"});
  for (const v1::Host& host : response.hosts()) {
    table.AddRow({host.name(), host.address(), host.cluster(), v1::Name(host.admin_state())});
  }
  table.MarkStateColumn("admin");
  return table;
}

Table AgentsTable(const v1::ListAgentsResponse& response, absl::Time now) {
  Table table({"host", "connected", "backend", "version", "onics", "last-heartbeat", "mismatches"});
  for (const v1::Agent& agent : response.agents()) {
    std::string heartbeat = AgeText(agent.last_heartbeat(), now);
    std::string mismatches =
        agent.inventory_mismatches().empty() ? "" : absl::StrCat(agent.inventory_mismatches_size());
    table.AddRow({agent.host(), agent.connected() ? "yes" : "no", agent.backend(),
                  agent.software_version(), absl::StrCat(agent.onic_serials_size()), heartbeat,
                  mismatches});
  }
  return table;
}

Table DevicesTable(const v1::ListDevicesResponse& response) {
  Table table(
      {"id", "kind", "host", "chassis", "model", "onics", "admin", "health", "spare", "used-by"});
  for (const v1::Device& device : response.devices()) {
    table.AddRow({device.id(), v1::Name(device.kind()), device.host(), device.chassis(),
                  device.model(), absl::StrCat(device.onics_size()), v1::Name(device.admin_state()),
                  v1::Name(device.health()), device.spare() ? "spare" : "",
                  absl::StrJoin(device.allocations(), ",")});
  }
  table.MarkStateColumn("admin");
  table.MarkStateColumn("health");
  return table;
}

Table OnicsTable(const v1::ListOnicsResponse& response) {
  Table table({"id", "device", "host", "serial", "pcie", "port1", "port2", "admin", "used-by"});
  for (const v1::Onic& onic : response.onics()) {
    const v1::OnicPort* port1 = FindOnicPort(onic, 1);
    const v1::OnicPort* port2 = FindOnicPort(onic, 2);
    table.AddRow({onic.id(), onic.device(), onic.host(), onic.serial(), onic.pcie_address(),
                  port1 ? OnicPortFibers(*port1) : "", port2 ? OnicPortFibers(*port2) : "",
                  v1::Name(onic.admin_state()), absl::StrJoin(onic.allocations(), ",")});
  }
  table.MarkStateColumn("admin");
  return table;
}

Table TrunksTable(const v1::ListTrunksResponse& response) {
  Table table({"id", "from", "to"});
  for (const v1::Trunk& trunk : response.trunks()) {
    table.AddRow({trunk.id(), SwitchPortText(trunk.from()), SwitchPortText(trunk.to())});
  }
  return table;
}

Table CircuitsTable(const v1::ListCircuitsResponse& response) {
  Table table({"id", "allocation", "source", "destination", "cross-connects", "state", "phase"});
  for (const v1::Circuit& circuit : response.circuits()) {
    std::vector<std::string> xcs;
    for (const v1::CrossConnect& xc : circuit.cross_connects()) xcs.push_back(CrossConnectText(xc));
    std::string allocation =
        circuit.allocation_id().empty() && circuit.manual() ? "(manual)" : circuit.allocation_id();
    table.AddRow({circuit.id(), allocation, OnicPortText(circuit.source()),
                  OnicPortText(circuit.destination()), absl::StrJoin(xcs, ","),
                  v1::Name(circuit.state()), circuit.phase()});
  }
  table.MarkStateColumn("state");
  return table;
}

Table AllocationsTable(const v1::ListAllocationsResponse& response, absl::Time now) {
  Table table({"id", "tenant", "name", "state", "members", "circuits", "age", "reason"});
  for (const v1::Allocation& a : response.allocations()) {
    table.AddRow({a.id(), a.tenant(), a.name(), v1::Name(a.state()), absl::StrCat(a.members_size()),
                  absl::StrCat(a.circuits_size()), AgeText(a.created(), now), a.reason()});
  }
  table.MarkStateColumn("state");
  return table;
}

namespace {

// Column 1 is the event's time: a TIME in the stream, an AGE in a table.
std::vector<std::string> EventColumns(absl::string_view when) {
  return {"seq", std::string(when), "principal", "kind", "object", "message"};
}

std::vector<std::string> EventCells(const v1::Event& event, std::string when) {
  std::string object = event.object_id().empty()
                           ? event.object_kind()
                           : absl::StrCat(event.object_kind(), "/", event.object_id());
  return {absl::StrCat(event.sequence()),
          std::move(when),
          event.principal(),
          event.kind(),
          object,
          event.message()};
}

// Wide enough for a sequence number of a busy year, an RFC 3339 time, an operator's
// principal and the usual event kinds and objects.
const std::vector<size_t>& EventStreamWidths() {
  static const auto* widths = new std::vector<size_t>{6, 20, 18, 22, 24, 0};
  return *widths;
}

}  // namespace

Table EventsTable(const v1::ListEventsResponse& response, absl::Time now) {
  Table table(EventColumns("age"));
  for (const v1::Event& event : response.events()) {
    table.AddRow(EventCells(event, AgeText(event.time(), now)));
  }
  return table;
}

std::string EventsStreamHeader() {
  std::vector<std::string> header;
  for (const std::string& column : EventColumns("time")) {
    header.push_back(absl::AsciiStrToUpper(column));
  }
  return FixedWidthLine(header, EventStreamWidths());
}

std::string EventsStreamRow(const v1::Event& event) {
  return FixedWidthLine(EventCells(event, FormatTime(event.time())), EventStreamWidths());
}

std::string WatchHeader(absl::string_view kind, absl::Time now) {
  return absl::StrCat("# ", kind, " at ",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone()), "\n");
}

Table DriftTable(const v1::ReconcileResponse& response) {
  Table table({"kind", "switch", "ingress", "egress", "circuit", "action"});
  for (const v1::Drift& drift : response.drift()) {
    const v1::CrossConnect& xc = drift.cross_connect();
    table.AddRow(
        {v1::Name(drift.kind()), xc.switch_id(), xc.ingress() ? absl::StrCat(xc.ingress()) : "",
         xc.egress() ? absl::StrCat(xc.egress()) : "", drift.circuit_id(), drift.action()});
  }
  return table;
}

Table HealthTable(const v1::HealthResponse& response) {
  Table table({"component", "state", "detail"});
  for (const v1::ComponentHealth& component : response.components()) {
    table.AddRow({component.name(), v1::Name(component.state()), component.detail()});
  }
  table.MarkStateColumn("state");
  return table;
}

Table LinkStatusTable(const v1::GetLinkStatusResponse& response) {
  Table table({"port", "status", "speed", "width", "rx-dbm", "tx-dbm", "peer", "detail"});
  for (const v1::LinkState& state : response.ports()) {
    table.AddRow({absl::StrCat(state.port()), v1::Name(state.status()),
                  state.link_speed_mts() ? absl::StrCat(state.link_speed_mts(), " MT/s") : "",
                  state.link_width() ? absl::StrCat("x", state.link_width()) : "",
                  PowerText(state.rx_power_dbm()), PowerText(state.tx_power_dbm()),
                  state.peer_seen(), state.detail()});
  }
  table.MarkStateColumn("status");
  return table;
}

Table RanksTable(const v1::GetRanksResponse& response) {
  Table table({"rank", "device", "member", "host", "local", "pcie", "coordinates"});
  for (const v1::Rank& r : response.ranks()) {
    table.AddRow({absl::StrCat(r.rank()), r.device(), absl::StrCat(r.member_index()), r.host(),
                  r.host().empty() ? "" : absl::StrCat(r.local_rank()), r.pcie_address(),
                  absl::StrJoin(r.coordinates(), ",")});
  }
  return table;
}

Table FabricPortsTable(const v1::GetFabricResponse& response) {
  Table table({"device", "port", "switch", "use", "holder/reason"});
  for (const v1::FabricDevice& d : response.devices()) {
    for (const v1::FabricPort& p : d.ports()) {
      table.AddRow({d.device(), v1::PortName(p.onic(), p.port()), p.switch_id(), v1::Name(p.use()),
                    p.holder().empty() ? p.reason() : p.holder()});
    }
  }
  return table;
}

Table FabricPairsTable(const v1::GetFabricResponse& response) {
  Table table({"source", "destination", "joinable", "switches", "trunk hops", "reason"});
  for (const v1::FabricPair& p : response.pairs()) {
    table.AddRow({p.source(), p.destination(), p.joinable() ? "yes" : "no",
                  absl::StrJoin(p.switches(), " -> "),
                  p.joinable() ? absl::StrCat(p.trunk_hops()) : "", p.reason()});
  }
  return table;
}

Table ChangeCostsTable(const v1::GetFabricResponse& response) {
  Table table({"stage", "median", "p90", "samples"});
  for (const v1::StageCost& c : response.change_costs()) {
    table.AddRow({c.stage(), c.samples() ? StageMillisText(c.median()) : "",
                  c.samples() ? StageMillisText(c.p90()) : "", absl::StrCat(c.samples())});
  }
  return table;
}

}  // namespace fleet::cli
