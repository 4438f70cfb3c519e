// The desired state in memory: every live allocation (any state but FAILED and RELEASED), as
// the newest commit left it, and every circuit (desired or of an inactive phase, of an
// allocation or manual; an ended allocation holds none, invariant 2, but one that did would be
// held with its circuits), indexed by allocation, state, switch and O-NIC, so that the hot paths
// (admission's snapshot, failure reports, the sync of an allocation, drains, the monitor) read it
// without a query and without waiting for a write's SQLite work. Ended allocations without circuits
// are history: they are read from the database.
//
// Fed only by StoreConnection, at each commit and before the write returns: from the
// allocation images the commit feed publishes (each holds the allocation as the transaction
// left it, read back inside it) and from the manual circuits the write recorded. So once a
// write has returned, every reader sees what it committed, and a reader never sees what a
// rolled-back write did. This holds because every write that changes an allocation appends
// an event about it (store_connection.h); the only other write, retention's pruning, deletes
// only ended allocations without circuits, which are not here. Thread-safe; a reader waits
// only for another's brief update, not for SQLite.
#ifndef FLEET_CONTROLLER_STORE_DESIRED_INDEX_H_
#define FLEET_CONTROLLER_STORE_DESIRED_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/store/allocation_store.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::store {

class DesiredIndex {
 public:
  // What the database holds at open: `allocations`, each with its circuits as GetAllocation
  // reads it (ended ones without circuits are left out); `manual`, the manual circuits.
  DesiredIndex(const std::vector<v1::Allocation>& allocations,
               const std::vector<v1::Circuit>& manual);

  // What one commit did, applied at once (a reader sees all of it or none): each allocation
  // of `images` is now as its image says, or gone when the image is null; the `manual`
  // circuits were stored.
  void Apply(const std::map<std::string, std::shared_ptr<const v1::Allocation>>& images,
             const std::vector<v1::Circuit>& manual) ABSL_LOCKS_EXCLUDED(mu_);

  // Allocation `id` as GetAllocation reads it; null when it is not held here (unknown, or
  // ended without circuits: ask the database).
  std::shared_ptr<const v1::Allocation> Find(const std::string& id) const ABSL_LOCKS_EXCLUDED(mu_);

  // True when List answers `filter` in full: it asks for one live state.
  static bool Answers(const AllocationFilter& filter);
  // As AllocationStore::ListAllocations, for a filter Answers: in order of creation, then id.
  std::vector<v1::Allocation> List(const AllocationFilter& filter) const ABSL_LOCKS_EXCLUDED(mu_);

  // As AllocationStore::ListCircuits: those `filter` selects, by allocation (manual ones
  // first), then in the allocation's order (manual ones by id).
  std::vector<v1::Circuit> ListCircuits(const CircuitFilter& filter) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A circuit: its allocation ("" for the manual ones) and its place among that one's.
  using Ref = std::pair<std::string, int>;
  // An allocation's place in ListAllocations' order: its creation (µs since the epoch), id.
  using Order = std::pair<int64_t, std::string>;

  void SetAllocation(const std::string& id, std::shared_ptr<const v1::Allocation> image)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddManual(const v1::Circuit& circuit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const v1::Circuit& At(const Ref& ref) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Index(const Ref& ref, const v1::Circuit& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unindex(const Ref& ref, const v1::Circuit& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Images are shared with the commit feed: nothing is copied on a commit.
  std::map<std::string, std::shared_ptr<const v1::Allocation>> allocations_ ABSL_GUARDED_BY(mu_);
  std::map<v1::AllocationState, std::set<Order>> by_state_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Circuit> manual_ ABSL_GUARDED_BY(mu_);  // By id.
  std::map<std::string, std::set<Ref>> by_switch_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<Ref>> by_onic_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_DESIRED_INDEX_H_
