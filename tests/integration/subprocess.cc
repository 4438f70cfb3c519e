#include "tests/integration/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/free_ports.h"

namespace fleet::testing {
namespace {

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// Reaps `pid` within `timeout`; nullopt if it is still running.
std::optional<int> Reap(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return -WTERMSIG(status);
      return -1;
    }
    if (absl::Now() > deadline) return std::nullopt;
    // Polling the child's state, not synchronizing on time: 2 ms granularity is plenty.
    absl::SleepFor(absl::Milliseconds(2));
  }
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

std::string PortOutsideEphemeralRange() {
  absl::StatusOr<std::vector<int>> port = FreeLoopbackPorts(1);
  return port.ok() ? std::to_string(port->front()) : "0";  // Else the kernel's choice.
}

std::string BinaryPath(const std::string& name) { return std::string(FLEET_BIN_DIR) + "/" + name; }

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  CommandResult result;
  const std::string dir = FreshDirectory("cmd");
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args = Argv(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  std::optional<int> code = Reap(pid, timeout);
  if (!code) {
    kill(pid, SIGKILL);
    Reap(pid, absl::Seconds(10));
  }
  result.exit_code = code.value_or(-1);
  std::ifstream out(out_path), err(err_path);
  std::stringstream o, e;
  o << out.rdbuf();
  e << err.rdbuf();
  result.out = o.str();
  result.err = e.str();
  std::filesystem::remove_all(dir);
  return result;
}

CommandResult Fleetctl(const FleetdAt& at, std::vector<std::string> args) {
  if (at.fleetctl_config.empty()) {
    args.insert(args.begin(), {"--insecure", "--server", at.server});
  } else {
    args.insert(args.begin(), {"--config", at.fleetctl_config});
  }
  args.insert(args.begin(), {BinaryPath("fleetctl"), "--timeout", "30"});
  return RunCommand(args);
}

int64_t EmulatorCounter(const std::string& rest_address, const std::string& name) {
  absl::StatusOr<std::string> body = HttpGet(rest_address, "/sim/v1/counters");
  EXPECT_TRUE(body.ok()) << body.status();
  const std::string text = body.value_or("");
  const std::string key = absl::StrCat("\"", name, "\":");
  const size_t at = text.find(key);
  int64_t value = -1;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(
          text.substr(at + key.size(), text.find_first_of(",}", at) - at - key.size()), &value)) {
    ADD_FAILURE() << "no counter " << name << " in " << text;
  }
  return value;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = FreshDirectory("file-" + name) + "/" + name + ".yaml";
  std::ofstream(path) << text;
  return path;
}

int ConnectedAgents(const FleetdAt& at) {
  const std::string out = Fleetctl(at, {"get", "agents"}).out;
  int yes = 0;
  for (size_t found = out.find("  yes  "); found != std::string::npos;
       found = out.find("  yes  ", found + 1)) {
    ++yes;
  }
  return yes;
}

std::atomic<int> next_daemon{0};

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  std::unique_ptr<Daemon> d(new Daemon());
  d->stderr_path_ =
      // One directory per daemon: several daemons of one binary must not share (or wipe) it.
      FreshDirectory(absl::StrCat("daemon_", std::filesystem::path(argv[0]).filename().string(),
                                  "_", next_daemon.fetch_add(1))) +
      "/stderr";
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Dies with the test, even one that crashed or that ctest killed at its timeout, instead
    // of running on. (The signal comes when the forking thread ends: tests start daemons from
    // their own thread.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int err = open(d->stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(pipe_fds[1], 1);
    dup2(err, 2);
    close(pipe_fds[0]);
    std::vector<char*> args = Argv(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  d->pid_ = pid;
  d->stdout_fd_ = pipe_fds[0];
  return d;
}

Daemon::~Daemon() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    Reap(pid_, absl::Seconds(10));
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

absl::StatusOr<std::string> Daemon::WaitForLine(const std::string& prefix, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    size_t newline;
    while ((newline = buffer_.find('\n')) != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      output_ += line + "\n";
      if (absl::StartsWith(line, prefix)) return line.substr(prefix.size());
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no line starting '", prefix, "'; stdout:\n",
                                                      output_, buffer_, "\nstderr:\n", Stderr()));
    }
    pollfd pfd{stdout_fd_, POLLIN, 0};
    int ready = poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready <= 0) continue;
    char buf[4096];
    ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("process exited before printing '", prefix,
                                                 "'; stdout:\n", output_, buffer_, "\nstderr:\n",
                                                 Stderr()));
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<int> Daemon::Stop(int signal, absl::Duration timeout) {
  if (exit_code_) return *exit_code_;
  kill(pid_, signal);
  return Wait(timeout);
}

absl::StatusOr<int> Daemon::Wait(absl::Duration timeout) {
  if (exit_code_) return *exit_code_;
  std::optional<int> code = Reap(pid_, timeout);
  if (!code) return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " did not exit"));
  exit_code_ = code;
  return *code;
}

std::string Daemon::Stderr() const {
  std::ifstream in(stderr_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<HttpReply> HttpRequest(const std::string& address, const std::string& method,
                                      const std::string& path, const std::string& body) {
  std::vector<std::string> host_port = absl::StrSplit(address, ':');
  int port = 0;
  if (host_port.size() != 2 || !absl::SimpleAtoi(host_port[1], &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host_port[0].c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  std::string request = absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: ", address,
                                     "\r\nConnection: close\r\nContent-Type: application/json"
                                     "\r\nContent-Length: ",
                                     body.size(), "\r\n\r\n", body);
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write");
  }
  std::string response = ReadAll(fd);
  close(fd);
  size_t header_end = response.find("\r\n\r\n");
  std::vector<std::string> status_line =
      absl::StrSplit(response.substr(0, response.find("\r\n")), ' ');
  HttpReply reply;
  if (!absl::StartsWith(response, "HTTP/1.") || header_end == std::string::npos ||
      status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &reply.status)) {
    return absl::UnavailableError(absl::StrCat("bad HTTP response: ", response.substr(0, 200)));
  }
  reply.body = response.substr(header_end + 4);
  return reply;
}

absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path) {
  absl::StatusOr<HttpReply> reply = HttpRequest(address, "GET", path);
  if (!reply.ok()) return reply.status();
  if (reply->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", path, ": HTTP ", reply->status));
  }
  return reply->body;
}

}  // namespace fleet::testing
