// Minimal leveled logging to stderr: `FLEET_LOG(INFO) << "switch " << id << " up";`.
//
// Why not a logging library: Abseil 20220623 has no absl/log, and the daemons need only a
// timestamped, leveled, line-atomic stderr stream (journald adds the rest under systemd).
// A line is written with one write(2) so lines from concurrent threads never interleave.
#ifndef FLEET_COMMON_LOG_H_
#define FLEET_COMMON_LOG_H_

#include <sstream>

namespace fleet {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below this level are dropped. Set once by main() before threads start.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace fleet

#define FLEET_LOG_LEVEL_DEBUG ::fleet::LogLevel::kDebug
#define FLEET_LOG_LEVEL_INFO ::fleet::LogLevel::kInfo
#define FLEET_LOG_LEVEL_WARNING ::fleet::LogLevel::kWarning
#define FLEET_LOG_LEVEL_ERROR ::fleet::LogLevel::kError

#define FLEET_LOG(severity)                                  \
  if (FLEET_LOG_LEVEL_##severity < ::fleet::MinLogLevel()) { \
  } else                                                     \
    ::fleet::LogMessage(FLEET_LOG_LEVEL_##severity, __FILE__, __LINE__).stream()

#endif  // FLEET_COMMON_LOG_H_
