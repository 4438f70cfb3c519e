#include "scheduler/circuit_diff.h"

#include <deque>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "fleet/v1/names.h"

namespace fleet::scheduler {
namespace {

std::string PathKey(const v1::Circuit& c) {
  std::string key = absl::StrCat(v1::PortName(c.source()), ">", v1::PortName(c.destination()));
  for (const v1::CrossConnect& x : c.cross_connects()) {
    absl::StrAppend(&key, "|", x.switch_id(), ":", x.ingress(), ">", x.egress());
  }
  for (const std::string& trunk : c.trunks()) absl::StrAppend(&key, "|", trunk);
  return key;
}

}  // namespace

CircuitDiff DiffCircuits(const std::vector<v1::Circuit>& current,
                         const std::vector<v1::Circuit>& desired) {
  std::map<std::string, std::deque<size_t>> unmatched;  // Path → indices into current.
  for (size_t i = 0; i < current.size(); ++i) unmatched[PathKey(current[i])].push_back(i);
  std::vector<bool> matched(current.size(), false);
  CircuitDiff diff;
  for (const v1::Circuit& c : desired) {
    auto it = unmatched.find(PathKey(c));
    if (it == unmatched.end() || it->second.empty()) {
      diff.add.push_back(c);
      continue;
    }
    matched[it->second.front()] = true;
    diff.kept.push_back(current[it->second.front()]);
    it->second.pop_front();
  }
  for (size_t i = 0; i < current.size(); ++i) {
    if (!matched[i]) diff.remove.push_back(current[i]);
  }
  return diff;
}

}  // namespace fleet::scheduler
