// What `describe` prints for each kind, and the texts of the verbs that change things (a
// plan, an allocation as admitted, a phase switch, a drain, a reconcile).
#ifndef FLEET_CONTROLLER_CLI_DESCRIPTIONS_H_
#define FLEET_CONTROLLER_CLI_DESCRIPTIONS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fleet/v1/admin.pb.h"
#include "fleet/v1/agent.pb.h"
#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

// Pooled devices an attach allocation puts on a host (a virtual server).
struct Attachment {
  std::string allocation_id;
  std::vector<std::string> devices;
};

// The `describe` texts. Each takes the object and the related objects the command fetched.
std::string DescribeSwitch(const v1::Switch& sw, const std::vector<v1::SwitchPort>& ports);
// `agent`: nullptr when none registered. `attached`: the live attach allocations on the host.
std::string DescribeHost(const v1::Host& host, const std::vector<v1::Device>& devices,
                         const v1::Agent* agent, const std::vector<Attachment>& attached = {});
std::string DescribeDevice(const v1::Device& device, const std::vector<v1::Onic>& onics);
std::string DescribeOnic(const v1::Onic& onic, const std::vector<v1::Circuit>& circuits);
// `events` are the allocation's, oldest first.
std::string DescribeAllocation(const v1::Allocation& allocation,
                               const std::vector<v1::Event>& events, absl::Time now);
std::string DescribeAgent(const v1::Agent& agent, absl::Time now);

// What the verbs that change things print in table form.
// `topology request --dry-run`: the members, the counts and each circuit's cross-connects
// (and phase), and a traffic-aware plan's direct share. A phased plan (named phases, or
// all-to-all's rounds) holds every phase's circuits but makes only the first phase's
// cross-connects, `initial_phase` (empty: the first listed); its counts say so.
std::string PlanText(const v1::Plan& plan, absl::string_view initial_phase = "");
// `topology request`: the allocation as admitted (or, with --wait, as it ended): its id,
// tenant, name, state, phases (the active one marked), a traffic-aware plan's direct share,
// members and circuits with their cross-connects and phase.
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

#endif  // FLEET_CONTROLLER_CLI_DESCRIPTIONS_H_
