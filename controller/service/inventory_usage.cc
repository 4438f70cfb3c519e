#include "controller/service/inventory_usage.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status_macros.h"

namespace fleet::service {
namespace {

// The allocations using each part, by the part's id; a std::set, so each is named once.
using AllocationsById = std::map<std::string, std::set<std::string>>;

// Sets each part's `allocations` (a Device or an Onic) from `by_id`.
template <typename Part>
void SetAllocations(const AllocationsById& by_id, google::protobuf::RepeatedPtrField<Part>* parts) {
  for (Part& part : *parts) {
    auto it = by_id.find(part.id());
    if (it == by_id.end()) continue;
    *part.mutable_allocations() = {it->second.begin(), it->second.end()};
  }
}

}  // namespace

absl::Status FillDeviceAllocations(store::AllocationStore& store,
                                   google::protobuf::RepeatedPtrField<v1::Device>* devices) {
  ASSIGN_OR_RETURN(std::vector<v1::Allocation> allocations, store.ListAllocations({}));
  AllocationsById by_device;
  for (const v1::Allocation& a : allocations) {
    if (a.state() == v1::ALLOCATION_STATE_FAILED || a.state() == v1::ALLOCATION_STATE_RELEASED) {
      continue;
    }
    for (const std::string& member : a.members()) by_device[member].insert(a.id());
  }
  SetAllocations(by_device, devices);
  return absl::OkStatus();
}

absl::Status FillOnicAllocations(store::AllocationStore& store,
                                 google::protobuf::RepeatedPtrField<v1::Onic>* onics) {
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store.ListCircuits({}));
  AllocationsById by_onic;
  for (const v1::Circuit& c : circuits) {
    if (c.allocation_id().empty()) continue;  // An operator's manual circuit.
    by_onic[c.source().onic()].insert(c.allocation_id());
    by_onic[c.destination().onic()].insert(c.allocation_id());
  }
  SetAllocations(by_onic, onics);
  return absl::OkStatus();
}

absl::Status FillPortAllocations(store::AllocationStore& store,
                                 google::protobuf::RepeatedPtrField<v1::SwitchPort>* ports) {
  const bool any = std::any_of(ports->begin(), ports->end(),
                               [](const v1::SwitchPort& p) { return !p.circuit_id().empty(); });
  if (!any) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits, store.ListCircuits({}));
  std::map<std::string, std::string> allocation_of;  // Circuit id → allocation id.
  for (const v1::Circuit& c : circuits) allocation_of[c.id()] = c.allocation_id();
  for (v1::SwitchPort& port : *ports) {
    if (auto it = allocation_of.find(port.circuit_id()); it != allocation_of.end()) {
      port.set_allocation_id(it->second);
    }
  }
  return absl::OkStatus();
}

}  // namespace fleet::service
