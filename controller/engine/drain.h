// Drain (operators only): a switch port, an O-NIC or a host marked drained, so planning gives
// it no new light; the live allocations with a circuit on it are named. With `evict`, each is
// moved off it: its members there (what_if.h's HurtBy) replaced one after another by spares,
// as ReplaceMember does, each transaction waited for; one that cannot be moved (no spare, a
// trunk port, a replacement that failed) is released as FAILED ("evicted: ... was drained").
// Undrain clears the mark.
#ifndef FLEET_CONTROLLER_ENGINE_DRAIN_H_
#define FLEET_CONTROLLER_ENGINE_DRAIN_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "controller/engine/caller.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/member_changes.h"
#include "controller/engine/release.h"
#include "controller/engine/what_if.h"
#include "controller/store/store.h"
#include "fleet/v1/admin.pb.h"

namespace fleet::engine {

class Drainer {
 public:
  Drainer(const EngineParts& parts, Releaser* releaser, MemberChanges* members)
      : p_(parts), store_(parts.ctx.store), releaser_(releaser), members_(members) {}

  absl::StatusOr<v1::DrainResponse> Drain(const v1::DrainRequest& request, const Caller& caller);
  absl::Status Undrain(const v1::UndrainRequest& request, const Caller& caller);

 private:
  // The live allocations with a circuit on `target`.
  absl::StatusOr<std::set<std::string>> Affected(const store::DrainTargetRef& target);
  // Moves allocation `id` off `lost` by replacing its members there, filling `eviction`;
  // the error says why it could not be moved.
  absl::Status Move(const std::string& id, const LostParts& lost, const std::string& reason,
                    const Caller& caller, v1::Eviction& eviction);

  const EngineParts p_;
  store::Store* const store_;
  Releaser* const releaser_;
  MemberChanges* const members_;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_DRAIN_H_
