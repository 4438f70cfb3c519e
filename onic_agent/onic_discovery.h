// Finding this host's O-NICs on its PCI tree (the agent config's `onic_discovery`), instead of
// listing each with its downstream ports by hand (`onics`).
//
// What an O-NIC is on PCIe, as discovery takes it: a PCIe switch on the card. The host sees its
// upstream port, a function whose vendor:device matches one of `match`; directly below it sit
// the card's two PCIe downstream ports, one per optical port, the lower address being port 1.
// Each downstream port's link runs over its optical port to whatever device the circuit
// brings (what the pcie-sysfs backend quiesces and retrains). A matching function with another
// number of downstream ports below it is refused, naming it and what is below: the pattern, or
// the card, is not what the config says, and guessing would retrain the wrong links.
//
// Serials come from a template with placeholders {host} (the agent's host name), {index} (0, 1,
// … over the O-NICs found, in address order), {dsn} (the upstream port's Device Serial Number,
// as lspci prints it: 48-b0-2d-03-00-a1-b2-c3; refused for a function without one) and {bdf}
// (its address). The serials must be the inventory's: fleetd raises an alarm at registration
// for an O-NIC it does not know, or one it expects that is not reported.
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
  std::string serial = "{host}-n{index}";
};

// The serial template uses only the placeholders above, with balanced braces, and at least one
// of {index}, {dsn} or {bdf} (so that two O-NICs cannot get one serial). INVALID_ARGUMENT
// naming the template and the rule.
absl::Status CheckSerialTemplate(absl::string_view serial_template);

// Every O-NIC below `sysfs_root` (bus/pci/devices) that `discovery` matches, in address order,
// as the pcie-sysfs backend takes them (pcie_address is the upstream port). FAILED_PRECONDITION
// naming the function for a match without exactly two downstream ports below it, or {dsn} for
// one without a serial number; INVALID_ARGUMENT for {host} with an empty `host`. None found is
// not an error (the caller says so).
absl::StatusOr<std::vector<PcieSysfsBackend::OnicConfig>> FindOnics(SysfsFiles& files,
                                                                    const std::string& sysfs_root,
                                                                    const OnicDiscovery& discovery,
                                                                    const std::string& host);

}  // namespace fleet::onic_agent

#endif  // FLEET_ONIC_AGENT_ONIC_DISCOVERY_H_
