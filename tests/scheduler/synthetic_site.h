// In-memory FLEET sites for scheduler tests and benchmarks, wired like
// deploy/inventory/generate.py: one switch per cluster, O-NIC port tx fibers on ingress
// 1, 2, … in device order and rx fibers on egress p + ingress count.
#ifndef FLEET_TESTS_SCHEDULER_SYNTHETIC_SITE_H_
#define FLEET_TESTS_SCHEDULER_SYNTHETIC_SITE_H_

#include <set>
#include <string>
#include <vector>

#include "fleet/v1/inventory.pb.h"

namespace fleet::scheduler::testing {

struct ClusterShape {
  std::string prefix;  // Prefixes device, host and O-NIC ids; the switch is `prefix`ocs.
  int cpus = 0;        // Three O-NICs each, two per host (server1-cpu0, server1-cpu1, …).
  int gpus = 0;        // One O-NIC each, eight per chassis.
  int nvmes = 0;       // Two O-NICs each, one chassis each.
  int fpgas = 0;       // One O-NIC each, in one chassis.
};

// A site of the given clusters; each switch is 384x384, or larger when its O-NICs need it.
v1::Inventory SyntheticSite(const std::vector<ClusterShape>& clusters);

// Adds `count` trunks from switch `from` to switch `to` (ids "FROM-TO-k"), on the highest
// egress ports of `from` and ingress ports of `to` that no trunk uses yet. O-NIC fibers take
// the lowest ports, so they never meet while a switch has room.
void AddTrunks(v1::Inventory& site, const std::string& from, const std::string& to, int count);

// Every port of every switch, enabled, except `drained` ("switch/port") and `failed`.
std::vector<v1::SwitchPort> AllPorts(const v1::Inventory& site,
                                     const std::set<std::string>& drained = {},
                                     const std::set<std::string>& failed = {});

}  // namespace fleet::scheduler::testing

#endif  // FLEET_TESTS_SCHEDULER_SYNTHETIC_SITE_H_
