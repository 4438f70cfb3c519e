// Field-level differences between two versions of an inventory object, for an apply's dry
// run, its answer and its events: what an operator needs to see before a switch is repointed.
#ifndef FLEET_CONTROLLER_INVENTORY_FIELD_DIFF_H_
#define FLEET_CONTROLLER_INVENTORY_FIELD_DIFF_H_

#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "fleet/v1/inventory.pb.h"

namespace fleet::inventory {

// Every field of `to` that differs from `from` (messages of one type), in field order, named
// as the inventory file names them (`port` for management_port, `credentials`,
// `trunk_reserved`): a nested message field by its path (`ports[2].tx`) when both have the same
// number of entries, else whole. Values are text: a port reference `ocs1/5`, an enum by its
// short lower-case name (`tl1`), a list of numbers as ranges (`289-384, 673-768`), a port of 0 as
// `(default)`, an empty value as `(none)`.
std::vector<v1::FieldChange> DiffFields(const google::protobuf::Message& from,
                                        const google::protobuf::Message& to);

// "address 127.0.0.1 -> 192.0.2.10, port 40013 -> 3082": one line for a message or an event.
std::string DescribeFieldChanges(const std::vector<v1::FieldChange>& changes);

// The switch fields that say how fleetd reaches it: changing one while the switch holds
// circuits would cut fleetd from them.
bool IsSwitchConnectionField(const std::string& field);

}  // namespace fleet::inventory

#endif  // FLEET_CONTROLLER_INVENTORY_FIELD_DIFF_H_
