// Operator-facing names of fleet.v1 enum values, derived from the proto itself so there is
// one vocabulary: DEVICE_KIND_GPU is "gpu", TEMPLATE_KIND_RING_UNIDIRECTIONAL is
// "ring-unidirectional". Used by the inventory file, the store's columns and fleetctl. Also
// the one way to name a port.
#ifndef FLEET_PROTO_FLEET_V1_NAMES_H_
#define FLEET_PROTO_FLEET_V1_NAMES_H_

#include <google/protobuf/generated_enum_reflection.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fleet/v1/common.pb.h"

namespace fleet::v1 {

// The value's name without the enum's prefix, lower case, '_' as '-'; "" for UNSPECIFIED.
std::string EnumText(const google::protobuf::EnumDescriptor* descriptor, int value);
// Accepts the text form (either '-' or '_', any case); nullopt for unknown or "unspecified".
std::optional<int> ParseEnumText(const google::protobuf::EnumDescriptor* descriptor,
                                 absl::string_view text);
// Every text form but UNSPECIFIED, in declaration order (for error messages and help).
std::vector<std::string> EnumTexts(const google::protobuf::EnumDescriptor* descriptor);

template <typename E>
std::string Name(E value) {
  return EnumText(google::protobuf::GetEnumDescriptor<E>(), static_cast<int>(value));
}

template <typename E>
std::optional<E> Parse(absl::string_view text) {
  std::optional<int> v = ParseEnumText(google::protobuf::GetEnumDescriptor<E>(), text);
  if (!v) return std::nullopt;
  return static_cast<E>(*v);
}

template <typename E>
std::vector<std::string> Names() {
  return EnumTexts(google::protobuf::GetEnumDescriptor<E>());
}

// A port as messages, events, logs and fleetctl name it: "OWNER/PORT", e.g. "onic-3/1" or
// "polatis-1/17". Also the key of the maps that index ports by name.
std::string PortName(absl::string_view owner, int64_t port);
std::string PortName(const OnicPortRef& ref);
std::string PortName(const SwitchPortRef& ref);

}  // namespace fleet::v1

#endif  // FLEET_PROTO_FLEET_V1_NAMES_H_
