// `fleetctl topology`: request, switch the phase of, detach devices from, release or keep
// alive a topology (an allocation of members and the circuits between them).
#ifndef FLEET_CONTROLLER_CLI_TOPOLOGY_VERBS_H_
#define FLEET_CONTROLLER_CLI_TOPOLOGY_VERBS_H_

#include <string>
#include <vector>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `topology request -f FILE [--dry-run] [--wait] [--lease DURATION] [--name NAME]
// [--request-id KEY] [--tenant TENANT]`: sends the request file's RequestTopology, the flags
// overriding the file (what a batch system's prolog sets per job). With dry_run prints the plan;
// otherwise the allocation as admitted, or with `wait` a line per state change until it is READY
// (exit 0; then the allocation), FAILED or RELEASED (exit 1, with the reason), or the session's
// timeout passes (exit 1, naming the state it was in). DEGRADED is printed and waited through: it
// may recover.
struct TopologyRequestArgs {
  std::string file;
  bool dry_run = false;
  bool wait = false;
  std::string lease;       // absl::ParseDuration text; overrides the file's `lease:`.
  std::string name;        // Overrides the file's `name:`.
  std::string request_id;  // The idempotency key: a retry with it gets the same allocation.
  std::string tenant;      // Overrides the file's `tenant:`.
  // `topology ranks`:
  std::string phase;      // Empty: the active phase.
  bool hostfile = false;  // Print a hostfile ("HOST slots=N") instead of the ranks.
  // `topology fabric`:
  std::string allocation;  // Whose members to describe, and whose ports count as its own.
};
int RequestTopology(const Session& session, const TopologyRequestArgs& args);

// `topology release ID [--wait]`: prints the allocation's state after the release; with
// `wait`, each change until RELEASED (exit 0) or FAILED, or the timeout (exit 1).
int ReleaseTopology(const Session& session, const std::string& id, bool wait);

// `topology keepalive ID`: renews the lease and prints when it now expires.
int KeepAlive(const Session& session, const std::string& id);

// `topology phase ID NAME [--wait]`: switches the allocation to phase NAME and prints the
// cross-connects removed and added; with `wait`, each state change until READY (exit 0, then
// the allocation), FAILED or RELEASED, or the timeout (exit 1).
int ActivatePhase(const Session& session, const std::string& id, const std::string& phase,
                  bool wait);

// `topology detach ID DEVICE... [--dry-run] [--wait]`: takes pooled devices out of an attach
// allocation and prints the cross-connects removed and the members left; with `wait`, each
// state change until READY again (exit 0, then the allocation), FAILED, or the timeout.
int DetachDevices(const Session& session, const std::string& id,
                  const std::vector<std::string>& devices, bool dry_run, bool wait);

// `topology ranks ID [--phase NAME] [--hostfile]`: the rank order that follows the phase's
// circuits (GetRanks): the order's kind, then a row per rank with its device, host and local
// rank, the PCIe address of an attached device and a torus rank's coordinates. With
// `hostfile`, one "HOST slots=N" line per host in node-rank order (exit 1 when a rank has no
// host). -o json|yaml prints the response.
int Ranks(const Session& session, const std::string& id, const std::string& phase, bool hostfile);

// `topology fabric [DEVICE...] [--allocation ID]`: what a job's own planner sees (GetFabric):
// each device's O-NIC ports with their switch and use, every ordered pair with whether one
// circuit could join it, over which switches, and the recent cost of each stage of a change.
// -o json|yaml prints the response.
int Fabric(const Session& session, const std::vector<std::string>& devices,
           const std::string& allocation);

Verb TopologyVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_TOPOLOGY_VERBS_H_
