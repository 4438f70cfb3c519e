#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet {
namespace {

std::atomic<LogLevel> min_level{LogLevel::kInfo};

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

void SetMinLogLevel(LogLevel level) { min_level.store(level); }
LogLevel MinLogLevel() { return min_level.load(); }

LogMessage::LogMessage(LogLevel level, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  stream_ << LevelLetter(level) << ' '
          << absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()) << ' '
          << (base ? base + 1 : file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  // One write so concurrent lines stay whole; a short write to stderr is not retried.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace fleet
