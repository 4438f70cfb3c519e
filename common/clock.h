// Time as a dependency: code that stamps or waits takes a Clock so tests can use a fake one
// (testing/fake_clock.h). Deadlines a wait gives up at are on the clock's time, so a test
// moves them by advancing a fake clock instead of sleeping.
#ifndef FLEET_COMMON_CLOCK_H_
#define FLEET_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Waits on `cv`, with `mu` held by the caller, until it is signalled or this clock reaches
  // `deadline`. Like absl::CondVar's waits it may also return early: callers wait in a loop
  // that checks their condition and Now() against the deadline.
  virtual void WaitWithDeadline(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

class SystemClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void WaitWithDeadline(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv.WaitWithDeadline(&mu, deadline);
  }
  // One for code given no clock.
  static const SystemClock& Get() {
    static const SystemClock* const clock = new SystemClock;  // Never destroyed: used at exit.
    return *clock;
  }
};

}  // namespace fleet

#endif  // FLEET_COMMON_CLOCK_H_
