// The number of threads of this process, for tests and benches that show a load holds none
// of its own.
#ifndef FLEET_TESTS_PROCESS_THREADS_H_
#define FLEET_TESTS_PROCESS_THREADS_H_

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace fleet::testing {

// The threads of this process now (/proc/self/status); -1 when it cannot be read.
inline int ProcessThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int n = 0;
    if (absl::StartsWith(line, "Threads:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(8)), &n)) {
      return n;
    }
  }
  return -1;
}

}  // namespace fleet::testing

#endif  // FLEET_TESTS_PROCESS_THREADS_H_
