#include "controller/store/desired_index.h"

#include <algorithm>

#include "absl/time/time.h"
#include "common/proto_time.h"
#include "controller/store/allocation_lifecycle.h"

namespace fleet::store {

namespace {

// Held while live, or while it holds circuits: an ended allocation holds none (invariant 2),
// but its circuits are indexed should one ever do, since they hold their ports.
bool Held(const v1::Allocation& a) { return a.circuits_size() > 0 || !Ended(a.state()); }

}  // namespace

DesiredIndex::DesiredIndex(const std::vector<v1::Allocation>& allocations,
                           const std::vector<v1::Circuit>& manual)
    : manual_(manual) {
  absl::MutexLock lock(&mu_);
  for (const v1::Allocation& a : allocations) {
    SetAllocation(a.id(), std::make_shared<const v1::Allocation>(a));
  }
  std::sort(manual_.begin(), manual_.end(),
            [](const v1::Circuit& a, const v1::Circuit& b) { return a.id() < b.id(); });
  for (int i = 0; i < static_cast<int>(manual_.size()); ++i) Index({"", i}, manual_[i]);
}

void DesiredIndex::Apply(const std::map<std::string, std::shared_ptr<const v1::Allocation>>& images,
                         const std::vector<v1::Circuit>& manual) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, image] : images) SetAllocation(id, image);
  for (const v1::Circuit& c : manual) AddManual(c);
}

void DesiredIndex::SetAllocation(const std::string& id,
                                 std::shared_ptr<const v1::Allocation> image) {
  if (auto old = allocations_.find(id); old != allocations_.end()) {
    const v1::Allocation& was = *old->second;
    for (int i = 0; i < was.circuits_size(); ++i) Unindex({id, i}, was.circuits(i));
    if (auto same = by_state_.find(was.state()); same != by_state_.end()) {
      same->second.erase({absl::ToUnixMicros(FromProtoTime(was.created())), id});
      if (same->second.empty()) by_state_.erase(same);
    }
    allocations_.erase(old);
  }
  if (image == nullptr || !Held(*image)) return;
  for (int i = 0; i < image->circuits_size(); ++i) Index({id, i}, image->circuits(i));
  by_state_[image->state()].insert({absl::ToUnixMicros(FromProtoTime(image->created())), id});
  allocations_.emplace(id, std::move(image));
}

void DesiredIndex::AddManual(const v1::Circuit& circuit) {
  // Manual circuits are few and recorded rarely (an operator's, or an adopted cross-connect):
  // their places shift, so they are indexed again.
  for (int i = 0; i < static_cast<int>(manual_.size()); ++i) Unindex({"", i}, manual_[i]);
  manual_.insert(
      std::upper_bound(manual_.begin(), manual_.end(), circuit,
                       [](const v1::Circuit& a, const v1::Circuit& b) { return a.id() < b.id(); }),
      circuit);
  for (int i = 0; i < static_cast<int>(manual_.size()); ++i) Index({"", i}, manual_[i]);
}

std::shared_ptr<const v1::Allocation> DesiredIndex::Find(const std::string& id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto a = allocations_.find(id);
  return a == allocations_.end() ? nullptr : a->second;
}

bool DesiredIndex::Answers(const AllocationFilter& filter) {
  switch (filter.state) {
    case v1::ALLOCATION_STATE_PENDING:
    case v1::ALLOCATION_STATE_PROGRAMMING:
    case v1::ALLOCATION_STATE_TRAINING:
    case v1::ALLOCATION_STATE_READY:
    case v1::ALLOCATION_STATE_DEGRADED:
    case v1::ALLOCATION_STATE_RELEASING:
      return true;
    default:
      return false;
  }
}

std::vector<v1::Allocation> DesiredIndex::List(const AllocationFilter& filter) const {
  std::vector<v1::Allocation> out;
  absl::ReaderMutexLock lock(&mu_);
  auto in_state = by_state_.find(filter.state);
  if (in_state == by_state_.end()) return out;
  for (const Order& order : in_state->second) {
    const v1::Allocation& a = *allocations_.at(order.second);
    if (filter.tenant.empty() || a.tenant() == filter.tenant) out.push_back(a);
  }
  return out;
}

std::vector<v1::Circuit> DesiredIndex::ListCircuits(const CircuitFilter& filter) const {
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

const v1::Circuit& DesiredIndex::At(const Ref& ref) const {
  if (ref.first.empty()) return manual_[ref.second];
  return allocations_.at(ref.first)->circuits(ref.second);
}

void DesiredIndex::Index(const Ref& ref, const v1::Circuit& c) {
  by_onic_[c.source().onic()].insert(ref);
  by_onic_[c.destination().onic()].insert(ref);
  for (const v1::CrossConnect& x : c.cross_connects()) by_switch_[x.switch_id()].insert(ref);
}

void DesiredIndex::Unindex(const Ref& ref, const v1::Circuit& c) {
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
