// Graphviz pictures of the fabric, for `fleetctl get circuits -o dot` (the whole site) and
// `fleetctl describe allocation ID -o dot` (one allocation), to be rendered with
// `dot -Tsvg` or `dot -Tpng`.
//
// Picture: each switch a box (cluster) holding the O-NICs whose fibers reach it, grouped by
// device and the device by its host or chassis; each O-NIC a node `ID` with its ports; each
// circuit an edge from its source O-NIC to its destination O-NIC, labelled with its
// cross-connects (`ocs1 49→435`, and the trunks it crosses), coloured by allocation and
// styled by state: ACTIVE solid, PROGRAMMED/PLANNED dashed, DEGRADED bold red, INACTIVE
// (another phase's) dotted grey; trunks between switches one edge per direction, labelled with
// their count. An allocation's picture has its members only and names the active phase; each
// phase's circuits get their own colour, listed in a legend.
#ifndef FLEET_CONTROLLER_CLI_DOT_H_
#define FLEET_CONTROLLER_CLI_DOT_H_

#include <string>
#include <vector>

#include "fleet/v1/inventory.pb.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::cli {

// What the picture knows of the site. Any part may be empty (a job may not read the
// inventory): O-NICs it does not know are drawn loose, outside any switch or device.
struct DotSite {
  std::vector<v1::Switch> switches;
  std::vector<v1::Device> devices;
  std::vector<v1::Onic> onics;
  std::vector<v1::Trunk> trunks;
};

// The whole site: every switch, every O-NIC, every trunk and `circuits`.
std::string SiteDot(const DotSite& site, const std::vector<v1::Circuit>& circuits);

// One allocation: its members' O-NICs, the switches they reach and its circuits of every
// phase.
std::string AllocationDot(const DotSite& site, const v1::Allocation& allocation);

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_DOT_H_
