// fleetd's exclusive hold on its state directory: one fleetd per state, so that two never
// drive the same switches from the same intent. An advisory flock(2) on STATE_DIR/fleetd.lock,
// which the kernel drops with the process however it ends (SIGKILL included), so a crash
// never leaves a stale lock behind; the file names the holder's pid for the refusal message.
#ifndef FLEET_CONTROLLER_FLEETD_STATE_LOCK_H_
#define FLEET_CONTROLLER_FLEETD_STATE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fleet::fleetd {

class StateDirLock {
 public:
  // Takes the lock on `state_dir` (which must exist) without waiting. FAILED_PRECONDITION
  // naming the directory and the holding process (pid and command line, when it can be read)
  // while another process holds it; the file is created with mode 0644 otherwise.
  static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(const std::string& state_dir);
  ~StateDirLock();  // Lets go.

  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  StateDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace fleet::fleetd

#endif  // FLEET_CONTROLLER_FLEETD_STATE_LOCK_H_
