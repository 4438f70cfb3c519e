// A clock that moves only when told to, for tests of code that takes a Clock (common/clock.h).
#ifndef FLEET_TESTING_FAKE_CLOCK_H_
#define FLEET_TESTING_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace fleet::testing {

// Starts at 2023-11-14T22:13:20Z unless told otherwise. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::testing

#endif  // FLEET_TESTING_FAKE_CLOCK_H_
