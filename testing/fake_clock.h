// A clock that moves only when told to, for tests of code that takes a Clock (common/clock.h).
#ifndef FLEET_TESTING_FAKE_CLOCK_H_
#define FLEET_TESTING_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace fleet::testing {

// Starts at 2023-11-14T22:13:20Z unless told otherwise. Thread-safe. A wait (WaitWithDeadline)
// returns at a signal, or within a millisecond of real time once Advance has taken the clock
// to its deadline: it waits in slices, so Advance needs no hold on the waiters' mutexes.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void WaitWithDeadline(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (Now() >= deadline) return;
    cv.WaitWithTimeout(&mu, absl::Milliseconds(1));
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
