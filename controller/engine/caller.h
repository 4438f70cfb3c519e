// Who is calling an engine RPC, from its principal.
#ifndef FLEET_CONTROLLER_ENGINE_CALLER_H_
#define FLEET_CONTROLLER_ENGINE_CALLER_H_

#include <string>

#include "absl/time/time.h"

namespace fleet::engine {

struct Caller {
  std::string principal;  // As recorded in events.
  std::string tenant;     // Set for role `job`: limited to this tenant's allocations.
  // When the caller stops waiting for the answer (its RPC's deadline): a change that would
  // have to wait past it for another to finish is refused instead of done unseen.
  absl::Time deadline = absl::InfiniteFuture();

  static Caller FromPrincipal(const std::string& principal);
  bool operator_role() const { return tenant.empty(); }
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_CALLER_H_
