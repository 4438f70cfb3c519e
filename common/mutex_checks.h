// Abseil's Mutex as Debian builds it (without NDEBUG) checks every acquisition for lock-order
// cycles: a global graph under a lock of its own, about 100 ns per acquisition and a point
// every thread of the process passes. The daemons built with NDEBUG (the default build) turn
// the check off at start. Unit tests (in-process) and the Debug sanitizer build, where CI runs
// every test again, daemons included, keep it, and so keep finding lock-order cycles. Call
// first thing in main.
#ifndef FLEET_COMMON_MUTEX_CHECKS_H_
#define FLEET_COMMON_MUTEX_CHECKS_H_

#include "absl/synchronization/mutex.h"

namespace fleet {

inline void ConfigureMutexChecks() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace fleet

#endif  // FLEET_COMMON_MUTEX_CHECKS_H_
