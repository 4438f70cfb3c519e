// Names the calling thread as `top -H`, `perf` and /proc/PID/task/TID/comm show it. Linux
// keeps 15 bytes; a longer name is cut. Unnamed, a thread keeps its creator's name, so a pool
// started from one of gRPC's threads would pass for gRPC's own.
#ifndef FLEET_COMMON_THREAD_NAME_H_
#define FLEET_COMMON_THREAD_NAME_H_

#include <pthread.h>

#include <string>

#include "absl/strings/string_view.h"

namespace fleet {

inline void NameThisThread(absl::string_view name) {
  const std::string kept(name.substr(0, 15));
  pthread_setname_np(pthread_self(), kept.c_str());
}

}  // namespace fleet

#endif  // FLEET_COMMON_THREAD_NAME_H_
