// fleetd's driver for Polatis Series 6000/7000 switches: OpticalSwitch over TL1 (own TCP
// client) or REST (libcurl), chosen by configuration. Both verify every batch by reading
// the cross-connects back, and both read the older `pairs` list name as well as `pair`.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_POLATIS_SWITCH_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_POLATIS_SWITCH_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "switch_adapters/optical_switch.h"
#include "switch_adapters/polatis/byte_stream.h"

namespace fleet::polatis {

enum class Protocol { kTl1, kRest };

struct Credentials {
  std::string user;
  std::string password;
};

struct PolatisSwitchOptions {
  std::string name;  // The switch's id, for messages.
  Protocol protocol = Protocol::kTl1;
  std::string host;
  uint16_t port = 0;  // 0: 3082 for TL1, 8008 for REST.
  Credentials credentials;
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration command_timeout = absl::Seconds(10);
  // True: one bulk command per batch (ENT-PATCH with lists, REST PATCH). False: one command
  // per cross-connect, as the ONOS driver and many scripts do; kept for comparison.
  bool bulk = true;
  // REST: HTTPS, the switch's certificate verified (its name included) against this PEM CA
  // bundle; empty = the system's CAs. TL1 ignores both: it is plain TCP, for an isolated
  // management network.
  std::string ca_bundle = {};
  // REST over plain HTTP with Basic credentials in clear: the operator's explicit choice, for
  // labs and the emulator. Warned about once, when the driver is made.
  bool insecure_http = false;
  // Asked before each changing command is written, resends included (its contract is in
  // switch_adapters/optical_switch.h); empty: none.
  switch_adapters::ChangeGate before_change = {};
};

std::unique_ptr<switch_adapters::OpticalSwitch> NewTl1Switch(const PolatisSwitchOptions& options,
                                                             std::unique_ptr<StreamDialer> dialer);
std::unique_ptr<switch_adapters::OpticalSwitch> NewRestSwitch(const PolatisSwitchOptions& options);
// By options.protocol, over real TCP / libcurl.
std::unique_ptr<switch_adapters::OpticalSwitch> NewPolatisSwitch(
    const PolatisSwitchOptions& options);

// Reads a switch credentials file (YAML, mode 0600; see
// deploy/config/switch-credentials.example.yaml): `switches: {ID: {user: U, password: P}}`.
// Errors name the file and the problem, never a password.
absl::StatusOr<std::map<std::string, Credentials>> ReadCredentialsFile(const std::string& path);

}  // namespace fleet::polatis

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_POLATIS_SWITCH_H_
