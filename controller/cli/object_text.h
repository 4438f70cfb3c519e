// The text forms of fleetctl's objects and references, shared by its tables, descriptions
// and progress lines: `ocs1/385`, `ocs1:1→385`, a circuit or a link in one line, and what the
// verbs that change things print.
#ifndef FLEET_CONTROLLER_CLI_OBJECT_TEXT_H_
#define FLEET_CONTROLLER_CLI_OBJECT_TEXT_H_

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/agent.pb.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

// Text forms of references, shared by tables and descriptions.
std::string SwitchPortText(const v1::SwitchPortRef& port);  // ocs1/385
// SwitchPortText read back: false, leaving `port` alone, unless `text` is SWITCH/PORT with a
// port of 1 or more.
bool ParseSwitchPort(const std::string& text, v1::SwitchPortRef* port);
std::string OnicPortText(const v1::OnicPortRef& port);     // s1c0-n0/1
std::string CrossConnectText(const v1::CrossConnect& xc);  // ocs1:1→385
std::string OnicPortFibers(const v1::OnicPort& port);      // ocs1/1→ocs1/385 (tx→rx)
// What is plugged into a switch port: `onic s1c0-n0/1 tx`, `trunk ocs1-ocs2-01`, or "".
std::string WiringText(const v1::SwitchPort& port);
// Why a switch port is as it is: the drain's reason and the switch monitor's, e.g.
// `drained: fiber swap; -31.20 dBm, below -20.00 dBm`; "" when neither says anything.
std::string PortWhyText(const v1::SwitchPort& port);
// An admin state with the drain's reason: `drained: fiber swap`, `enabled`.
std::string AdminText(v1::AdminState state, const std::string& reason);
// One line per circuit: `c1  s1c0-n0/1 → gpu3-n0/1  via ocs1:1→390  active  phase dp`.
std::string CircuitLine(const v1::Circuit& circuit);
// CircuitLine of each circuit, the id, ends, path and state padded to the widest of the list
// so that they line up (`a-1f-c9` and `a-1f-c10` alike); no line ends in spaces.
std::vector<std::string> CircuitLines(const std::vector<v1::Circuit>& circuits);
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
// A traffic-aware plan's direct share: `93.8% of the bytes on direct circuits`.
std::string DirectTrafficText(double share);
// A stage's duration in milliseconds to the microsecond: "12.345 ms". Stages of a
// reconfiguration take from microseconds (plan) to seconds (retrain); one unit makes them
// comparable at a glance.
std::string StageMillisText(const google::protobuf::Duration& duration);
// An optical power for tables: "-1.50"; "" for kNoPowerReadingDbm (no light or no reading).
std::string PowerText(double dbm);
inline constexpr double kNoPowerReadingDbm = -99.99;  // See LinkState.rx_power_dbm.

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_OBJECT_TEXT_H_
