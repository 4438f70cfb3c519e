// Time as a dependency: code that stamps or waits takes a Clock so tests can use a fake one
// (testing/fake_clock.h).
#ifndef FLEET_COMMON_CLOCK_H_
#define FLEET_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class SystemClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace fleet

#endif  // FLEET_COMMON_CLOCK_H_
