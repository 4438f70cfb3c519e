// Drain (operators only): a switch port, an O-NIC or a host marked drained, so planning gives
// it no new light; the live allocations with a circuit on it are named, and with `evict`
// released as FAILED ("evicted: ... was drained"). Undrain clears the mark.
#ifndef FLEET_CONTROLLER_ENGINE_DRAIN_H_
#define FLEET_CONTROLLER_ENGINE_DRAIN_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/engine/release.h"
#include "controller/store/store.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::engine {

class Drainer {
 public:
  Drainer(store::Store* store, Releaser* releaser) : store_(store), releaser_(releaser) {}

  absl::StatusOr<v1::DrainResponse> Drain(const v1::DrainRequest& request, const Caller& caller);
  absl::Status Undrain(const v1::UndrainRequest& request, const Caller& caller);

 private:
  // The live allocations with a circuit on `target`.
  absl::StatusOr<std::set<std::string>> Affected(const store::DrainTargetRef& target);

  store::Store* const store_;
  Releaser* const releaser_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_DRAIN_H_
