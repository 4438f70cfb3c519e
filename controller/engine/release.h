// Releases and leases, as engine.h states them ("Release", "Leases"): the sequence of one
// release, the wait for a change to let go of the allocation first, KeepAlive and lease
// expiry.
#ifndef FLEET_CONTROLLER_ENGINE_RELEASE_H_
#define FLEET_CONTROLLER_ENGINE_RELEASE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/engine/engine_parts.h"

namespace fleet::engine {

class Healer;

class Releaser {
 public:
  // `healer` forgets what it knew of an allocation that ends.
  Releaser(const EngineParts& parts, Healer* healer) : p_(parts), healer_(healer) {}

  // With the claim on `id` held: takes its circuits off the switches and ends it in
  // `final_state` (RELEASED, or FAILED for an eviction) with `final_reason`, which the
  // RELEASING commit stores: an allocation already RELEASING ends as its stored intent says,
  // whatever is passed. OK once the release is done or durably under way (RELEASING
  // committed and synced; a switch that refuses the removal is retried by the sync queue);
  // otherwise the store's error, and the allocation is as it was (or RELEASING, not yet durable).
  absl::Status Release(const std::string& id, const std::string& principal,
                       v1::AllocationState final_state, std::string final_reason);
  // Waits (up to the claim wait or `caller`'s deadline) for a change of `id` to let go of it,
  // then releases it as `caller` (RELEASED, or FAILED with `reason` for an eviction).
  // UNAVAILABLE when stopping, or when the allocation stays busy: `busy` is the message;
  // Release's error when it fails.
  absl::Status ReleaseWhenFree(const std::string& id, const Caller& caller, absl::Time give_up,
                               v1::AllocationState final_state, const std::string& reason,
                               const std::string& busy, const std::string& stopping);

  absl::StatusOr<absl::Time> KeepAlive(const std::string& id, const Caller& caller);
  // Releases every allocation whose lease has passed by the clock's now, each on a worker.
  void ExpireLeases();

 private:
  // Commits RELEASING for `circuits`; the store's error if it refused.
  absl::Status CommitReleasing(const std::string& id, const std::string& principal,
                               const std::vector<v1::Circuit>& circuits,
                               v1::AllocationState final_state, const std::string& final_reason);
  // Takes `circuits` off the switches; false (RELEASING kept, retried) if a switch refused.
  bool Remove(const std::string& id, const std::string& principal,
              const std::vector<v1::Circuit>& circuits);

  const EngineParts p_;
  Healer* const healer_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_RELEASE_H_
