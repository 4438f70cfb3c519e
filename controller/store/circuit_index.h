// The circuits of the desired state in memory: every circuit the store holds (desired or of an
// inactive phase, of an allocation or manual) as the newest commit left it, indexed by
// allocation, switch and O-NIC, so that the hot paths (admission's snapshot, failure reports,
// drains, the monitor) read it without a query and without waiting for a write's SQLite work.
//
// Fed only by StoreConnection, at each commit and before the write returns: from the
// allocation images the commit feed publishes (each holds the allocation's circuits as the
// transaction left them) and from the manual circuits the write recorded. So once a write has
// returned, every reader sees what it committed, and a reader never sees what a rolled-back
// write did. Thread-safe; a reader waits only for another's brief update, not for SQLite.
#ifndef FLEET_CONTROLLER_STORE_CIRCUIT_INDEX_H_
#define FLEET_CONTROLLER_STORE_CIRCUIT_INDEX_H_

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

class CircuitIndex {
 public:
  // `circuits`: what the database holds at open, in ListCircuits' order.
  explicit CircuitIndex(const std::vector<v1::Circuit>& circuits);

  // What one commit did, applied at once (a reader sees all of it or none): each allocation
  // of `images` now has the image's circuits, in its order, or none when its image is null
  // (the allocation is gone); the `manual` circuits were stored.
  void Apply(const std::map<std::string, std::shared_ptr<const v1::Allocation>>& images,
             const std::vector<v1::Circuit>& manual) ABSL_LOCKS_EXCLUDED(mu_);

  // As AllocationStore::ListCircuits: those `filter` selects, by allocation (manual ones
  // first), then in the allocation's order (manual ones by id).
  std::vector<v1::Circuit> List(const CircuitFilter& filter) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A circuit: its allocation ("" for the manual ones) and its place among that one's.
  using Ref = std::pair<std::string, int>;

  void SetAllocation(const std::string& id, std::shared_ptr<const v1::Allocation> image)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddManual(const v1::Circuit& circuit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const v1::Circuit& At(const Ref& ref) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Index(const Ref& ref, const v1::Circuit& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unindex(const Ref& ref, const v1::Circuit& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Images are shared with the commit feed: nothing is copied on a commit.
  std::map<std::string, std::shared_ptr<const v1::Allocation>> allocations_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Circuit> manual_ ABSL_GUARDED_BY(mu_);  // By id.
  std::map<std::string, std::set<Ref>> by_switch_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<Ref>> by_onic_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_CIRCUIT_INDEX_H_
