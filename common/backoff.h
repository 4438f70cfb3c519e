// Exponential backoff, the one used by every retry loop (fleetd's retrains and removals, the
// agent's reconnects).
#ifndef FLEET_COMMON_BACKOFF_H_
#define FLEET_COMMON_BACKOFF_H_

#include <algorithm>
#include <random>

#include "absl/time/time.h"

namespace fleet {

// The waits `initial`, 2×, 4×, … up to `max`, then `max` again. A value; not thread-safe.
class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max) : initial_(initial), max_(max) {}

  // The wait before the next attempt; the one after is twice as long, up to `max`.
  absl::Duration Next() {
    const absl::Duration wait = next_ < initial_ ? initial_ : next_;
    next_ = std::min(wait * 2, max_);
    return std::min(wait, max_);
  }
  // After a success: the next wait is `initial` again.
  void Reset() { next_ = absl::ZeroDuration(); }

 private:
  absl::Duration initial_;
  absl::Duration max_;
  absl::Duration next_ = absl::ZeroDuration();
};

// `wait` scaled by a factor drawn from [0.5, 1.5), so peers that failed together do not all
// come back at the same moment.
template <typename Random>
absl::Duration Jittered(absl::Duration wait, Random& random) {
  std::uniform_real_distribution<double> factor(0.5, 1.5);
  return wait * factor(random);
}

}  // namespace fleet

#endif  // FLEET_COMMON_BACKOFF_H_
