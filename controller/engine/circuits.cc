#include "controller/engine/circuits.h"

#include "absl/strings/str_cat.h"

namespace fleet::engine {

std::string LinkName(const v1::Circuit& c) {
  return absl::StrCat(v1::PortName(c.source()), " -> ", v1::PortName(c.destination()));
}

bool SameEnd(const v1::OnicPortRef& a, const v1::OnicPortRef& b) {
  return a.onic() == b.onic() && a.port() == b.port();
}

std::vector<v1::Circuit> LiveCircuits(const v1::Allocation& a) {
  std::vector<v1::Circuit> out;
  for (const v1::Circuit& c : a.circuits()) {
    if (c.state() != v1::CIRCUIT_STATE_INACTIVE) out.push_back(c);
  }
  return out;
}

bool Settled(v1::AllocationState s) {
  return s == v1::ALLOCATION_STATE_READY || s == v1::ALLOCATION_STATE_DEGRADED;
}

agent_registry::AddressedCommand QuiesceCommand(const std::string& serial, uint32_t port) {
  agent_registry::AddressedCommand cmd;
  cmd.onic_serial = serial;
  cmd.command.mutable_quiesce()->set_onic_serial(serial);
  cmd.command.mutable_quiesce()->set_port(port);
  return cmd;
}

std::vector<std::string> RecordRetrain(const std::vector<v1::Circuit>& circuits,
                                       const std::map<std::string, std::string>& failed,
                                       store::AllocationUpdate& update) {
  std::vector<std::string> reasons;
  for (const v1::Circuit& c : circuits) {
    auto f = failed.find(c.id());
    if (f == failed.end()) {
      update.circuits[c.id()] = {v1::CIRCUIT_STATE_ACTIVE, ""};
    } else {
      update.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED, f->second};
      reasons.push_back(f->second);
    }
  }
  return reasons;
}

}  // namespace fleet::engine
