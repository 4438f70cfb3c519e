// How fleetctl shows things: aligned tables and "Key: value" descriptions for people, the
// response protos as JSON or YAML for scripts.
//
// Every function here is pure text formatting (no RPCs, no clock: the caller passes `now`),
// so the rendering of each object kind is tested without a server.
#ifndef FLEET_CONTROLLER_CLI_OUTPUT_H_
#define FLEET_CONTROLLER_CLI_OUTPUT_H_

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/agent.pb.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

enum class OutputFormat { kTable, kJson, kYaml };

// The names -o accepts, in the order help and errors list them: "table", "json", "yaml".
const std::vector<std::string>& OutputFormatNames();
// One of OutputFormatNames(); nullopt for anything else.
std::optional<OutputFormat> ParseOutputFormat(absl::string_view text);

// A state word (`ready`, `degraded`, `failed`, `up`, `down`, `ok`, ...) wrapped in the ANSI
// colour people read it by: green when all is well, yellow when it needs an eye, red when it
// failed. Words with no colour (pending, enabled, ...) are returned as they are.
std::string ColorState(absl::string_view word);

// Columns separated by two spaces, each as wide as its widest cell, header in upper case,
// no trailing spaces. Width counts UTF-8 code points, so cells holding '→' still line up.
class Table {
 public:
  explicit Table(std::vector<std::string> columns);

  // An empty cell is shown as "-"; missing trailing cells are empty. A newline inside a cell
  // would break the grid, so it is shown as a space.
  void AddRow(std::vector<std::string> cells);
  // The cells of `column` (as named to the constructor) are state words, shown with
  // ColorState when rendered in colour.
  void MarkStateColumn(absl::string_view column);
  bool empty() const { return rows_.empty(); }
  // With `color`, state columns are coloured; the widths are those of the plain text, so the
  // columns line up either way.
  std::string Render(bool color = false) const;

 private:
  std::vector<std::string> columns_;
  std::vector<bool> state_columns_;
  std::vector<std::vector<std::string>> rows_;
};

// A `describe` block: "Key:" then the value, values aligned after the longest key. A list
// goes under its key, one item per line, indented; an item's own extra lines are indented
// further, so an item can carry nested detail.
class Description {
 public:
  void Field(std::string key, std::string value);              // An empty value is shown as "-".
  void List(std::string key, std::vector<std::string> items);  // Empty: "(none)".
  std::string Render() const;

 private:
  struct Entry {
    std::string key;
    std::string value;
    std::vector<std::string> items;
    bool is_list = false;
  };
  std::vector<Entry> entries_;
};

// The proto as JSON: proto field names, indented, default values left out, one trailing
// newline. The stable form for scripts.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
// The same JSON as block-style YAML (enums keep their proto JSON names).
absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message);
// ToJson or ToYaml by `format` (kTable is not a message format and is a caller bug).
absl::StatusOr<std::string> FormatMessage(OutputFormat format,
                                          const google::protobuf::Message& message);
// One message of a followed stream: JSON on one line (so each line parses alone), or a YAML
// document starting with "---".
absl::StatusOr<std::string> FormatStreamedMessage(OutputFormat format,
                                                  const google::protobuf::Message& message);

// Number of columns `text` takes on a terminal: its UTF-8 code points.
size_t DisplayWidth(absl::string_view text);

// An age or a duration as kubectl shows them: precise while small, coarser as it grows:
// "45s", "3m12s", "42m", "2h", "5h30m", "36h", "5d", "3d4h", "90d", "2y10d". Negative (clock
// skew between client and server) is "0s".
std::string FormatAge(absl::Duration age);
// RFC 3339 in UTC to the second, e.g. 2024-05-01T12:00:00Z; "" when unset.
std::string FormatTime(const google::protobuf::Timestamp& time);
absl::Time ToAbslTime(const google::protobuf::Timestamp& time);
absl::Duration ToAbslDuration(const google::protobuf::Duration& duration);

// Text forms of references, shared by tables and descriptions.
std::string SwitchPortText(const v1::SwitchPortRef& port);  // ocs1/385
std::string OnicPortText(const v1::OnicPortRef& port);      // s1c0-n0/1
std::string CrossConnectText(const v1::CrossConnect& xc);   // ocs1:1→385
std::string OnicPortFibers(const v1::OnicPort& port);       // ocs1/1→ocs1/385 (tx→rx)
// What is plugged into a switch port: `onic s1c0-n0/1 tx`, `trunk ocs1-ocs2-01`, or "".
std::string WiringText(const v1::SwitchPort& port);
// Ascending port numbers folded into ranges: [1,2,3,7] is "1-3, 7".
std::string PortRanges(const std::vector<uint32_t>& ports);
// One line per circuit: `c1  s1c0-n0/1 → gpu3-n0/1  via ocs1:1→390  active  phase dp`.
std::string CircuitLine(const v1::Circuit& circuit);
// An allocation's state in one line, as `topology request --wait` prints each change:
// `a2 programming`, or `a2 degraded link gpu1-n0/1 did not train` with the reason.
std::string AllocationStateLine(const v1::Allocation& allocation);
// `a2 lease expires 2023-11-14T22:23:20Z (in 10m)`.
std::string LeaseLine(absl::string_view allocation_id,
                      const google::protobuf::Timestamp& lease_expires, absl::Time now);
// `port ocs1/5`, `onic s1c0-n0`, `host server1`.
std::string DrainTargetText(const v1::DrainTarget& target);
// A link's state in one line, `onic` naming the O-NIC as the operator did:
// `s1c0-n0 port 1: up (16000 MT/s x16, rx -1.50 dBm, peer FLT-GPU1-N0/1)` when up, else
// `s1c0-n0 port 2: down: no light` (the status word, then the detail if any).
std::string LinkStateLine(absl::string_view onic, const v1::LinkState& state);
// An optical power for tables: "-1.50"; "" for kNoPowerReadingDbm (no light or no reading).
std::string PowerText(double dbm);
inline constexpr double kNoPowerReadingDbm = -99.99;  // See LinkState.rx_power_dbm.

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

// The `describe` texts. Each takes the object and the related objects the command fetched.
std::string DescribeSwitch(const v1::Switch& sw, const std::vector<v1::SwitchPort>& ports);
std::string DescribeHost(const v1::Host& host, const std::vector<v1::Device>& devices,
                         const v1::Agent* agent);  // agent: nullptr when none registered.
std::string DescribeDevice(const v1::Device& device, const std::vector<v1::Onic>& onics);
std::string DescribeOnic(const v1::Onic& onic, const std::vector<v1::Circuit>& circuits);
// `events` are the allocation's, oldest first.
std::string DescribeAllocation(const v1::Allocation& allocation,
                               const std::vector<v1::Event>& events, absl::Time now);
std::string DescribeAgent(const v1::Agent& agent, absl::Time now);

// What the verbs that change things print in table form.
// `topology request --dry-run`: the members, the counts and each circuit's cross-connects.
std::string PlanText(const v1::Plan& plan);
// `topology request`: the allocation as admitted (or, with --wait, as it ended): its id,
// tenant, name, state, phases (the active one marked), members and circuits with their
// cross-connects and phase.
std::string AllocationText(const v1::Allocation& allocation);
// `topology phase ID NAME`: what the switch did, only the cross-connects that differ between
// the phases: `a3 phase tp: 4 cross-connects removed, 4 added`, then one line each.
std::string PhaseSwitchText(const v1::Allocation& allocation, const v1::Plan& plan);
// `drain`: what was drained and the allocations using it (failed with `evict`).
std::string DrainText(const v1::DrainRequest& request, const v1::DrainResponse& response);
// `reconcile`: the drift table (or "no drift") and the counts.
std::string ReconcileText(const v1::ReconcileRequest& request,
                          const v1::ReconcileResponse& response);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_OUTPUT_H_
