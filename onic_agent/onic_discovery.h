// Finding this host's O-NICs on its PCI tree (the agent config's `onic_discovery`), instead of
// listing each with its downstream ports by hand (`onics`).
//
// What an O-NIC is on PCIe, as discovery takes it: a PCIe switch on the card. The host sees its
// upstream port (Device/Port Type 5), a function whose vendor:device matches one of `match`;
// directly below it sit the card's two PCIe downstream ports (type 6), one per optical port:
// port 1 is the one with the lower Port Number in Link Capabilities (the switch's own
// numbering; the lower address on a tie). Matching functions of another type (a downstream port
// with the same ids, a device behind one) are not O-NICs. An upstream port with another number
// of downstream ports below it is refused, naming it and what is below: the pattern, or the
// card, is not what the config says, and guessing would retrain the wrong links. Functions that
// vanish while they are read (devices leaving with their circuits) are skipped.
//
// Serials come from a template with placeholders {dsn} (the upstream port's Device Serial
// Number, as lspci prints it: 48-b0-2d-03-00-a1-b2-c3; refused for a function without one or
// with 0), {host} (the agent's host name), {index} (0, 1, … over the O-NICs found, in address
// order) and {bdf} (its address). {dsn} stays with the card; {index} and {bdf} move when a card
// fails to enumerate or the bus is renumbered, so a serial could then name another card (fleetd
// raises an alarm when the address it reports is not the inventory's `pcie`). Two O-NICs given
// one serial are refused, naming both. The serials must be the inventory's: fleetd raises an
// alarm at registration for an O-NIC it does not know, or one it expects that is not reported.
//
// Discovery runs once, when the agent starts: an O-NIC added later is found at the next start.
#ifndef FLEET_ONIC_AGENT_ONIC_DISCOVERY_H_
#define FLEET_ONIC_AGENT_ONIC_DISCOVERY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "onic_agent/pcie_sysfs_backend.h"
#include "onic_agent/sysfs_files.h"

namespace fleet::onic_agent {

// One `match` entry: "10ee:9038" (vendor:device, hex) or "10ee:*" (any device of the vendor).
struct OnicMatch {
  uint16_t vendor = 0;
  std::optional<uint16_t> device;  // Unset: any.
  bool Matches(uint32_t vendor_id, uint32_t device_id) const {
    return vendor_id == vendor && (!device.has_value() || device_id == *device);
  }
};
// INVALID_ARGUMENT naming `text` and the form otherwise.
absl::StatusOr<OnicMatch> ParseOnicMatch(absl::string_view text);

struct OnicDiscovery {
  std::vector<OnicMatch> match;
  std::string serial = "{dsn}";
};

// The serial template uses only the placeholders above, with balanced braces, and at least one
// of {index}, {dsn} or {bdf} (so that two O-NICs cannot get one serial). INVALID_ARGUMENT
// naming the template and the rule.
absl::Status CheckSerialTemplate(absl::string_view serial_template);

// Every O-NIC below `sysfs_root` (bus/pci/devices) that `discovery` matches, in address order,
// as the pcie-sysfs backend takes them (pcie_address is the upstream port). FAILED_PRECONDITION
// naming the function for an upstream port without exactly two downstream ports below it,
// {dsn} for one without a serial number, or two O-NICs given one serial; INVALID_ARGUMENT for
// {host} with an empty `host`. None found is not an error (the caller says so).
absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> FindOnics(SysfsFiles& files,
                                                                    const std::string& sysfs_root,
                                                                    const OnicDiscovery& discovery,
                                                                    const std::string& host);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_ONIC_DISCOVERY_H_
