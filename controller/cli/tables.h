// The tables fleetctl prints: one per kind for `get`, the followed event stream's rows, and
// the tables of reconcile, health and link status.
#ifndef FLEET_CONTROLLER_CLI_TABLES_H_
#define FLEET_CONTROLLER_CLI_TABLES_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/cli/output.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/agent.pb.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

// The `get` tables, one per kind.
Table SwitchesTable(const v1::ListSwitchesResponse& response);
Table PortsTable(const v1::ListPortsResponse& response);
Table HostsTable(const v1::ListHostsResponse& response);
Table AgentsTable(const v1::ListAgentsResponse& response, absl::Time now);
Table DevicesTable(const v1::ListDevicesResponse& response);
Table OnicsTable(const v1::ListOnicsResponse& response);
Table TrunksTable(const v1::ListTrunksResponse& response);
Table CircuitsTable(const v1::ListCircuitsResponse& response);
Table AllocationsTable(const v1::ListAllocationsResponse& response, absl::Time now);
// Events by age; the times themselves are in -o json|yaml.
Table EventsTable(const v1::ListEventsResponse& response, absl::Time now);
// `events --follow` prints a header, then a row per event as it arrives. The widths cannot
// come from events not yet seen, so the columns are fixed and a longer cell pushes the rest
// of its row right rather than being cut. A row stays on screen while the stream runs, so it
// shows the event's time rather than an age that would go stale.
std::string EventsStreamHeader();
std::string EventsStreamRow(const v1::Event& event);
// What `get KIND --watch` prints above each version of the list: `# allocations at TIME`.
std::string WatchHeader(absl::string_view kind, absl::Time now);
// Reconcile's drift: kind, switch, ingress, egress, circuit, action.
Table DriftTable(const v1::ReconcileResponse& response);
Table HealthTable(const v1::HealthResponse& response);
Table LinkStatusTable(const v1::GetLinkStatusResponse& response);
// `topology ranks`: rank, device, member index, host, local rank, PCIe address, coordinates.
Table RanksTable(const v1::GetRanksResponse& response);
// GetFabric's answer: a row per O-NIC port of each device; a row per ordered pair; a row per
// stage of a change with its recent cost.
Table FabricPortsTable(const v1::GetFabricResponse& response);
Table FabricPairsTable(const v1::GetFabricResponse& response);
Table ChangeCostsTable(const v1::GetFabricResponse& response);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_TABLES_H_
