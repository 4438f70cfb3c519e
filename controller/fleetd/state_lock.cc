#include "controller/fleetd/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace fleet::fleetd {
namespace {

// "pid 1234 (fleetd --state-dir /var/lib/fleet)", or what can be said of the holder.
std::string Holder(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  int pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(buffer), &pid) || pid <= 0) {
    return "a process that has not written its pid yet";
  }
  std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::stringstream text;
  text << cmdline.rdbuf();
  std::string command = absl::StrReplaceAll(text.str(), {{std::string(1, '\0'), " "}});
  absl::StripTrailingAsciiWhitespace(&command);
  if (command.empty()) return absl::StrCat("pid ", pid);
  return absl::StrCat("pid ", pid, " (", command, ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateDirLock>> StateDirLock::Acquire(const std::string& state_dir) {
  const std::string path = (std::filesystem::path(state_dir) / "fleetd.lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open the state lock ", path, ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    std::string holder = error == EWOULDBLOCK ? Holder(fd) : "";
    ::close(fd);
    if (error != EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot lock the state directory ", state_dir, ": ", std::strerror(error)));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("state directory ", state_dir, " is in use by another fleetd, ", holder, " (",
                     path, "); one fleetd per state directory"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write the state lock ", path, ": ", std::strerror(error)));
  }
  return std::unique_ptr<StateDirLock>(new StateDirLock(path, fd));
}

StateDirLock::~StateDirLock() {
  // The pid goes first, so a fleetd starting next does not name a process that has left.
  (void)::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace fleet::fleetd
