#include "controller/fleetd/demo.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "controller/base/status_macros.h"
#include "controller/inventory/inventory.h"

namespace fleet::fleetd {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(fds[1], 1);
    dup2(log, 2);
    // The demo's children must not outlive it, even if fleetd is killed: the kernel sends
    // them SIGTERM when it dies (and fleetd may have died before this line ran).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->stdout_fd_ = fds[0];
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {  // Up to 5 s to stop on its own.
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    size_t newline;
    while ((newline = buffer_.find('\n')) != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      if (absl::StartsWith(line, prefix)) return line.substr(prefix.size());
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return absl::DeadlineExceededError(absl::StrCat("no '", prefix, "' line"));
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    char buf[1024];
    ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0)
      return absl::UnavailableError(absl::StrCat("exited before printing '", prefix, "'"));
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<std::unique_ptr<Demo>> Demo::Prepare(FleetdConfig& config,
                                                    const std::string& binary_dir,
                                                    const DemoOptions& options) {
  if (options.protocol != "tl1" && options.protocol != "rest") {
    return absl::InvalidArgumentError(
        absl::StrCat("demo protocol '", options.protocol, "' is not tl1 or rest"));
  }
  std::unique_ptr<Demo> demo(new Demo());
  demo->options_ = options;
  demo->binary_dir_ = binary_dir;
  if (config.state_dir.empty() || config.state_dir == FleetdConfig().state_dir) {
    char dir[] = "/tmp/fleet-demo.XXXXXX";
    if (mkdtemp(dir) == nullptr) return absl::InternalError("cannot create a demo directory");
    config.state_dir = dir;
  }
  std::filesystem::create_directories(config.state_dir);
  demo->state_dir_ = config.state_dir;

  ASSIGN_OR_RETURN(
      demo->emulator_,
      ChildProcess::Start({binary_dir + "/polatis-emu", "--size", "384x384", "--tl1-port", "0",
                           "--rest-port", "0", "--switch-ms", absl::StrCat(options.switch_ms),
                           "--state", demo->state_dir_ + "/switch-state.json"},
                          demo->state_dir_ + "/polatis-emu.log"));
  ASSIGN_OR_RETURN(demo->tl1_, demo->emulator_->WaitForLine("tl1: ", absl::Seconds(10)));
  ASSIGN_OR_RETURN(demo->rest_, demo->emulator_->WaitForLine("rest: ", absl::Seconds(10)));

  // The site (the shipped Gen1 one unless given), its switch pointed at the emulator's TL1
  // (or REST) port.
  const std::string& management = options.protocol == "rest" ? demo->rest_ : demo->tl1_;
  const size_t colon = management.rfind(':');
  std::string inventory = absl::StrReplaceAll(
      options.inventory.empty() ? std::string(EmbeddedGen1Inventory()) : options.inventory,
      {{"address: 192.0.2.10", "address: " + management.substr(0, colon)},
       {"port: 3082", "port: " + management.substr(colon + 1)},
       {"protocol: tl1", "protocol: " + options.protocol}});
  demo->inventory_path_ = demo->state_dir_ + "/inventory.yaml";
  std::ofstream(demo->inventory_path_) << inventory;
  const std::string credentials = demo->state_dir_ + "/switch-credentials.yaml";
  std::ofstream(credentials) << "switches:\n  ocs1: {user: admin, password: root}\n";
  chmod(credentials.c_str(), 0600);
  config.inventory = demo->inventory_path_;
  config.switch_credentials = credentials;
  return demo;
}

absl::Status Demo::StartAgents(const std::string& grpc_address) {
  ASSIGN_OR_RETURN(v1::Inventory site, inventory::ReadInventoryFile(inventory_path_));
  // One agent per place O-NICs live: each host (its CPUs' O-NICs) and each chassis of
  // pooled devices (run by the chassis's management controller).
  std::map<std::string, std::string> location;  // Device id → host or chassis.
  std::vector<std::string> places;
  for (const v1::Host& host : site.hosts()) places.push_back(host.name());
  for (const v1::Device& d : site.devices()) {
    location[d.id()] = d.host().empty() ? d.chassis() : d.host();
    if (d.host().empty() && !d.chassis().empty() &&
        std::find(places.begin(), places.end(), d.chassis()) == places.end()) {
      places.push_back(d.chassis());
    }
  }
  for (const std::string& place : places) {
    std::string config = absl::StrCat(
        "host: ", place, "\nbackend: emulated\ntraining_ms: ", options_.training_ms, "\nonics:\n");
    for (const v1::Onic& onic : site.onics()) {
      if (location[onic.device()] != place || onic.ports_size() != 2) continue;
      absl::StrAppend(&config, "  - serial: ", onic.serial(), "\n    pcie: \"", onic.pcie_address(),
                      "\"\n    ports:\n");
      for (const v1::OnicPort& p : onic.ports()) {
        absl::StrAppend(&config, "      - {tx_ingress: ", p.tx().port(),
                        ", rx_egress: ", p.rx().port(), "}\n");
      }
    }
    const std::string path = absl::StrCat(state_dir_, "/agent-", place, ".yaml");
    std::ofstream(path) << config;
    ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> agent,
        ChildProcess::Start({binary_dir_ + "/fleet-onic-agent", "--config", path, "--controller",
                             grpc_address, "--simulator", rest_, "--metrics-port", "0"},
                            absl::StrCat(state_dir_, "/agent-", place, ".log")));
    absl::StatusOr<std::string> metrics = agent->WaitForLine("metrics: ", absl::Seconds(10));
    if (!metrics.ok()) {
      return absl::Status(metrics.status().code(),
                          absl::StrCat("the agent for ", place, ": ", metrics.status().message()));
    }
    agent_metrics_.push_back({place, *metrics});
    agents_.push_back(std::move(agent));
  }
  return absl::OkStatus();
}

}  // namespace fleet::fleetd
