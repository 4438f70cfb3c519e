// Who is calling an engine RPC: an authenticated identity's role and, for a job, the tenants
// it acts for (service/caller builds it from the call; docs/security.md).
#ifndef FLEET_CONTROLLER_ENGINE_CALLER_H_
#define FLEET_CONTROLLER_ENGINE_CALLER_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/auth/permissions.h"

namespace fleet::engine {

struct Caller {
  std::string principal;  // The identity, as recorded in events.
  auth::Role role = auth::Role::kOperator;
  std::vector<std::string> tenants;  // Role job: the only tenants whose allocations it sees.
  // When the caller stops waiting for the answer (its RPC's deadline, real time): a change that
  // would have to wait past it for another to finish is refused instead of done unseen.
  absl::Time deadline = absl::InfiniteFuture();

  // When a wait of at most `at_most` on `clock` gives up for this caller: the time left to
  // its deadline, counted from the clock's now (so a test's fake clock runs it down too).
  absl::Time GiveUp(const Clock& clock, absl::Duration at_most) const {
    return clock.Now() + std::min(at_most, deadline - absl::Now());
  }

  static Caller Operator(std::string principal) {
    return Caller{std::move(principal), auth::Role::kOperator, {}};
  }
  static Caller Viewer(std::string principal) {
    return Caller{std::move(principal), auth::Role::kViewer, {}};
  }
  static Caller Job(std::string principal, std::vector<std::string> tenants) {
    return Caller{std::move(principal), auth::Role::kJob, std::move(tenants)};
  }

  bool operator_role() const { return role == auth::Role::kOperator; }
  // A job sees its tenants' allocations only; the other roles see every tenant's (what they
  // may do with them is the permission table's business).
  bool tenant_scoped() const { return role == auth::Role::kJob; }
  bool ActsFor(const std::string& tenant) const;
  // "role job (PRINCIPAL), acting for [a, b]": for refusals.
  std::string Describe() const;
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_CALLER_H_
