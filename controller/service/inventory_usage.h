// Who holds what in the inventory: the live allocations each device, O-NIC and switch port is
// used by, filled into the output-only fields of the inventory reads (Device.allocations,
// Onic.allocations, SwitchPort.allocation_id), so that an operator sees which job a part
// belongs to without searching the allocations.
#ifndef FLEET_CONTROLLER_SERVICE_INVENTORY_USAGE_H_
#define FLEET_CONTROLLER_SERVICE_INVENTORY_USAGE_H_

#include <google/protobuf/repeated_ptr_field.h>

#include "absl/status/status.h"
#include "controller/store/allocation_store.h"
#include "fleet/v1/inventory.pb.h"

namespace fleet::service {

// Each device's allocations: those it is a member of that are not FAILED or RELEASED (a
// FAILED allocation keeps its members' names but holds nothing), in id order.
absl::Status FillDeviceAllocations(store::AllocationStore& store,
                                   google::protobuf::RepeatedPtrField<v1::Device>* devices);

// Each O-NIC's allocations: those with a circuit, of any phase, leaving or arriving on one of
// its ports (an inactive phase's circuit still holds the port), in id order.
absl::Status FillOnicAllocations(store::AllocationStore& store,
                                 google::protobuf::RepeatedPtrField<v1::Onic>* onics);

// Each switch port's allocation_id: the allocation of its desired circuit (none for an
// operator's manual circuit).
absl::Status FillPortAllocations(store::AllocationStore& store,
                                 google::protobuf::RepeatedPtrField<v1::SwitchPort>* ports);

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_INVENTORY_USAGE_H_
