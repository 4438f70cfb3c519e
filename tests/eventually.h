// Waiting in tests for state owned by another thread or process that offers nothing to wait
// on: poll briefly until it holds or a generous timeout passes. Never a timing assertion.
#ifndef FLEET_TESTS_EVENTUALLY_H_
#define FLEET_TESTS_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet::testing {

template <typename F>
bool Eventually(F done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return done();
}

}  // namespace fleet::testing

#endif  // FLEET_TESTS_EVENTUALLY_H_
