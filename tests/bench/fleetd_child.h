// fleetd started as a child of a benchmark: its stdout read line by line for the addresses it
// prints, its stderr into a log file, stopped with SIGTERM and a grace before SIGKILL.
#ifndef FLEET_TESTS_BENCH_FLEETD_CHILD_H_
#define FLEET_TESTS_BENCH_FLEETD_CHILD_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fleet::bench {

// fleetd as a child: stdout read for its address lines, stderr into a log file. The kernel
// sends it SIGTERM if this process dies first (the main thread starts it and outlives the
// rest), and fleetd's demo does the same for the emulator and agents it started.
class FleetdProcess {
 public:
  static absl::StatusOr<std::unique_ptr<FleetdProcess>> Start(const std::vector<std::string>& argv,
                                                              const std::string& log_path) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t parent = getpid();
    const pid_t pid = log < 0 || null < 0 ? -1 : fork();
    if (pid < 0) {
      for (int fd : {fds[0], fds[1], log, null}) {
        if (fd >= 0) close(fd);
      }
      return absl::InternalError(absl::StrCat("cannot start fleetd (its log ", log_path, ")"));
    }
    if (pid == 0) {
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(null, 0);
      dup2(fds[1], 1);
      dup2(log, 2);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    close(log);
    close(null);
    std::unique_ptr<FleetdProcess> process(new FleetdProcess());
    process->pid_ = pid;
    process->stdout_fd_ = fds[0];
    return process;
  }

  ~FleetdProcess() {
    if (!Exited()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(stdout_fd_);
  }

  pid_t pid() const { return pid_; }

  // The rest of the first stdout line starting with `prefix` not yet returned by this call.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Time deadline) {
    while (true) {
      for (; next_line_ < lines_.size(); ++next_line_) {
        if (absl::StartsWith(lines_[next_line_], prefix)) {
          return lines_[next_line_++].substr(prefix.size());
        }
      }
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(absl::StrCat("fleetd printed no '", prefix, "' line"));
      }
      if (!Read(static_cast<int>(absl::ToInt64Milliseconds(left)) + 1)) {
        return absl::UnavailableError(
            absl::StrCat("fleetd closed its stdout before a '", prefix, "' line"));
      }
    }
  }

  // The rest of every line starting with `prefix` read so far, after reading what is there.
  std::vector<std::string> LinesStartingWith(const std::string& prefix) {
    while (Read(0)) {
    }
    std::vector<std::string> out;
    for (const std::string& line : lines_) {
      if (absl::StartsWith(line, prefix)) out.push_back(line.substr(prefix.size()));
    }
    return out;
  }

  // Its exit code (-signal when killed) once it has exited; reaps it.
  std::optional<int> Exited() {
    absl::MutexLock lock(&mu_);
    if (!exit_code_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
    }
    return exit_code_;
  }

  // SIGTERM, then SIGKILL once `grace` has passed; its exit code (-signal when killed).
  int Stop(absl::Duration grace, bool& killed) {
    killed = false;
    if (std::optional<int> code = Exited()) return *code;
    kill(pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + grace;
    while (absl::Now() < deadline) {
      if (std::optional<int> code = Exited()) return *code;
      // Polling the child's state, not synchronizing on time.
      absl::SleepFor(absl::Milliseconds(10));
    }
    killed = true;
    kill(pid_, SIGKILL);
    absl::MutexLock lock(&mu_);
    int status = 0;
    waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return *exit_code_;
  }

 private:
  FleetdProcess() = default;

  // Reads what stdout has within `timeout_ms` into whole lines; false at its end.
  bool Read(int timeout_ms) {
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return timeout_ms > 0;  // Nothing yet; not the end.
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    for (size_t newline; (newline = buffer_.find('\n')) != std::string::npos;) {
      lines_.push_back(buffer_.substr(0, newline));
      buffer_.erase(0, newline + 1);
    }
    return true;
  }

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  std::vector<std::string> lines_;
  size_t next_line_ = 0;
  absl::Mutex mu_;
  std::optional<int> exit_code_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::bench

#endif  // FLEET_TESTS_BENCH_FLEETD_CHILD_H_
