// Resolving a MemberSet into device ids: the named devices, then devices picked for each
// DeviceCount. Pure; deterministic for a given snapshot.
#ifndef FLEET_SCHEDULER_MEMBER_SELECTION_H_
#define FLEET_SCHEDULER_MEMBER_SELECTION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/v1/topology.pb.h"
#include "scheduler/fabric_snapshot.h"

namespace fleet::scheduler {

// In `need`: the member must have every port of its device free (forms that use all of a
// member's ports, such as all-to-all and traffic-aware plans).
inline constexpr int kWholeDevice = -1;

// The number of members `members` asks for: its names plus every count (saturated at
// INT_MAX; limits.h refuses any count past the site's devices before planning).
int MemberCount(const v1::MemberSet& members);

// The member list: `members.devices` in order, then for each count in order the devices
// picked for it. `need[i]` is how many free ports member i must have (or kWholeDevice);
// it has MemberCount entries. A port is free when it is usable and neither of its sides is
// in a desired circuit. `on_switch` binds the picks to one switch; when empty, the switch of
// the first named device binds them, and with no named device every switch is tried and the
// one leaving the fewest stranded ports wins (ties: switch id). Only when no one switch has the
// devices, and the site has trunks, do the picks span switches: the devices of every switch
// trunks join to the home switch both ways (the bound one, or else the one with the most free
// ports on devices of the kinds and clusters counted) are then candidates, ranked by how many
// trunk hops away they are (after health, before stranded ports below), so as few circuits as
// possible use trunks, and those as short as possible.
//
// A counted member is a device of the count's kind (and cluster, when given: the cluster of
// the switch its fibers reach; and host, when given: a device of that host) that is not drained,
// not named and not already picked, not a spare (unless `options.spares`), on the switch, with at
// least `need` free ports. Among those, positions needing more ports pick first, each taking the
// best candidate by, in order:
//   1. healthy: none of its ports drained or failed, the device not SUSPECT (a FAILED
//      device's ports are unusable, so it never fits);
//   (with `options.spares`, spares before other devices, after health and trunk hops;)
//   2. fewest stranded ports: free ports left over after this use (best fit), so whole
//      devices stay whole for requests that need them;
//   3. packing: fewest free devices of its kind in its chassis (or host), so that large free
//      groups stay intact;
//   4. best measured light: the highest weakest rx power over its free ports; devices
//      without a reading after those with one;
//   5. device id.
//
// Errors, naming the field (`field` is e.g. "topology.template.members"):
//   INVALID_ARGUMENT    a device named twice; a count of 0 or without a kind
//   NOT_FOUND           an unknown named device
//   RESOURCE_EXHAUSTED  too few candidates, naming the kind, the ports needed and the switch
//                       (or "any switch" when the picks could span them)
struct PickOptions {
  // Spares (Device.spare) may be picked, and are preferred: a replacement's pick. Requests
  // never take a spare by count.
  bool spares = false;
  // Picks may span switches over trunks when no one switch has them (see above).
  bool span_switches = true;
};
absl::StatusOr<std::vector<std::string>> PickMembers(
    const FabricSnapshot& snapshot, const v1::MemberSet& members, const std::vector<int>& need,
    const std::string& on_switch, const std::string& field, const PickOptions& options = {});

}  // namespace fleet::scheduler

#endif  // FLEET_SCHEDULER_MEMBER_SELECTION_H_
