#include "controller/store/circuit_index.h"

#include <algorithm>

namespace fleet::store {

CircuitIndex::CircuitIndex(const std::vector<v1::Circuit>& circuits) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::shared_ptr<v1::Allocation>> loaded;
  for (const v1::Circuit& c : circuits) {
    if (c.allocation_id().empty()) {
      manual_.push_back(c);
      continue;
    }
    std::shared_ptr<v1::Allocation>& a = loaded[c.allocation_id()];
    if (a == nullptr) {
      a = std::make_shared<v1::Allocation>();
      a->set_id(c.allocation_id());
    }
    *a->add_circuits() = c;
  }
  for (auto& [id, a] : loaded) {
    for (int i = 0; i < a->circuits_size(); ++i) Index({id, i}, a->circuits(i));
    allocations_.emplace(id, std::move(a));
  }
  std::sort(manual_.begin(), manual_.end(),
            [](const v1::Circuit& a, const v1::Circuit& b) { return a.id() < b.id(); });
  for (int i = 0; i < static_cast<int>(manual_.size()); ++i) Index({"", i}, manual_[i]);
}

void CircuitIndex::Apply(const std::map<std::string, std::shared_ptr<const v1::Allocation>>& images,
                         const std::vector<v1::Circuit>& manual) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, image] : images) SetAllocation(id, image);
  for (const v1::Circuit& c : manual) AddManual(c);
}

void CircuitIndex::SetAllocation(const std::string& id,
                                 std::shared_ptr<const v1::Allocation> image) {
  if (auto old = allocations_.find(id); old != allocations_.end()) {
    const v1::Allocation& was = *old->second;
    for (int i = 0; i < was.circuits_size(); ++i) Unindex({id, i}, was.circuits(i));
    allocations_.erase(old);
  }
  if (image == nullptr || image->circuits_size() == 0) return;
  for (int i = 0; i < image->circuits_size(); ++i) Index({id, i}, image->circuits(i));
  allocations_.emplace(id, std::move(image));
}

void CircuitIndex::AddManual(const v1::Circuit& circuit) {
  // Manual circuits are few and recorded rarely (an operator's, or an adopted cross-connect):
  // their places shift, so they are indexed again.
  for (int i = 0; i < static_cast<int>(manual_.size()); ++i) Unindex({"", i}, manual_[i]);
  manual_.insert(
      std::upper_bound(manual_.begin(), manual_.end(), circuit,
                       [](const v1::Circuit& a, const v1::Circuit& b) { return a.id() < b.id(); }),
      circuit);
  for (int i = 0; i < static_cast<int>(manual_.size()); ++i) Index({"", i}, manual_[i]);
}

std::vector<v1::Circuit> CircuitIndex::List(const CircuitFilter& filter) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<v1::Circuit> out;
  const auto selected = [&](const v1::Circuit& c) {
    if (!filter.allocation_id.empty() && c.allocation_id() != filter.allocation_id) return false;
    if (!filter.onic.empty() && c.source().onic() != filter.onic &&
        c.destination().onic() != filter.onic) {
      return false;
    }
    if (filter.switch_id.empty()) return true;
    return std::any_of(
        c.cross_connects().begin(), c.cross_connects().end(),
        [&](const v1::CrossConnect& x) { return x.switch_id() == filter.switch_id; });
  };
  // The narrowest index that applies; the others are checked circuit by circuit.
  if (!filter.allocation_id.empty()) {
    auto a = allocations_.find(filter.allocation_id);
    if (a == allocations_.end()) return out;
    for (const v1::Circuit& c : a->second->circuits()) {
      if (selected(c)) out.push_back(c);
    }
    return out;
  }
  const std::map<std::string, std::set<Ref>>* index = nullptr;
  const std::string* key = nullptr;
  if (!filter.onic.empty()) {
    index = &by_onic_;
    key = &filter.onic;
  } else if (!filter.switch_id.empty()) {
    index = &by_switch_;
    key = &filter.switch_id;
  }
  if (index != nullptr) {
    auto refs = index->find(*key);
    if (refs == index->end()) return out;
    for (const Ref& ref : refs->second) {
      if (const v1::Circuit& c = At(ref); selected(c)) out.push_back(c);
    }
    return out;
  }
  size_t all = manual_.size();
  for (const auto& [id, a] : allocations_) all += a->circuits_size();
  out.reserve(all);
  out.insert(out.end(), manual_.begin(), manual_.end());
  for (const auto& [id, a] : allocations_) {
    out.insert(out.end(), a->circuits().begin(), a->circuits().end());
  }
  return out;
}

const v1::Circuit& CircuitIndex::At(const Ref& ref) const {
  if (ref.first.empty()) return manual_[ref.second];
  return allocations_.at(ref.first)->circuits(ref.second);
}

void CircuitIndex::Index(const Ref& ref, const v1::Circuit& c) {
  by_onic_[c.source().onic()].insert(ref);
  by_onic_[c.destination().onic()].insert(ref);
  for (const v1::CrossConnect& x : c.cross_connects()) by_switch_[x.switch_id()].insert(ref);
}

void CircuitIndex::Unindex(const Ref& ref, const v1::Circuit& c) {
  const auto drop = [&ref](std::map<std::string, std::set<Ref>>& index, const std::string& key) {
    auto refs = index.find(key);
    if (refs == index.end()) return;
    refs->second.erase(ref);
    if (refs->second.empty()) index.erase(refs);
  };
  drop(by_onic_, c.source().onic());
  drop(by_onic_, c.destination().onic());
  for (const v1::CrossConnect& x : c.cross_connects()) drop(by_switch_, x.switch_id());
}

}  // namespace fleet::store
