// How the REST driver reads what a Polatis switch answers: RESTCONF JSON bodies in,
// cross-connects, ports, power readings, identity or an error message out. Pure, no I/O:
// rest_switch.cc sends the requests and calls these, and fuzz/fuzz_adapter_rest_json.cc feeds
// them whatever a switch (or something posing as one) could send.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_REST_JSON_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_REST_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "switch_adapters/optical_switch.h"

namespace fleet::polatis {

// A 2xx answer's body; an empty body is an empty object. nullopt when it is not JSON.
std::optional<nlohmann::json> ParseRestBody(const std::string& body);

// What a non-2xx answer's body says: the first RFC 8040 error as "TAG: MESSAGE" (or just the
// message without a tag), or the body's first 200 bytes when it is not one.
std::string RestErrorMessage(const std::string& body);

// The canonical code for a RESTCONF HTTP status, by what the caller should do (400
// INVALID_ARGUMENT, 401/403 PERMISSION_DENIED, 404 NOT_FOUND, 409 FAILED_PRECONDITION, 5xx
// UNAVAILABLE, anything else UNKNOWN).
absl::StatusCode RestErrorCode(long http_status);

struct RestCrossConnects {
  std::vector<switch_adapters::CrossConnect> pairs;  // Sorted by ingress.
  // The list name the switch uses: "pair", the pre-2017-08-04 "pairs", or "" when the body
  // does not tell (no cross-connects).
  std::string list_name;
};

// GET .../optical-switch:cross-connects. The list is read as `pair` or `pairs`, inside the
// container or at the top; absent, it is empty. INTERNAL when the body is not an object, the
// container or the list is of another type, or a pair is not {ingress, egress} of port
// numbers (integers 0..2^32-1).
absl::StatusOr<RestCrossConnects> ParseRestCrossConnects(const nlohmann::json& body);

// GET .../optical-switch:port-config: every port listed, sorted by port; a port without a
// status is ENABLED. INTERNAL for an entry without a port number or with a status that is
// not a string.
absl::StatusOr<std::vector<switch_adapters::PortState>> ParseRestPortConfig(
    const nlohmann::json& body);

// GET .../optical-switch:opm-power: the readings of `ports` (every port listed when empty),
// sorted by port; a port without a power reads PortPower::kNoLight. INTERNAL for an entry
// without a port number or with a power that is not a number.
absl::StatusOr<std::vector<switch_adapters::PortPower>> ParseRestOpmPower(
    const nlohmann::json& body, const std::vector<uint32_t>& ports);

// GET .../optical-switch:product-information, in its container or at the top. The size comes
// from the first NxM in the model name (N-VST-384x384-...); 0x0 when the name carries none,
// and the caller counts port-config. INTERNAL when a field is not a string or the size does
// not fit a port number.
absl::StatusOr<switch_adapters::SwitchIdentity> ParseRestProductInformation(
    const nlohmann::json& body);

// How many ports a port-config body lists; 0 when it lists none or is malformed.
size_t RestPortCount(const nlohmann::json& body);

}  // namespace fleet::polatis

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_REST_JSON_H_
