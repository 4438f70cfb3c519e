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
#include <set>

#include <yaml-cpp/yaml.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/free_ports.h"
#include "common/http_client.h"
#include "common/status_macros.h"
#include "controller/etcd/etcd_member.h"
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
    // The caller blocks its shutdown signals to wait for them; a child starts with none blocked
    // (the mask survives exec), so that SIGTERM stops it.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
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

namespace {

// How long a child of the demo (an emulator, an agent) may take to announce its address. It
// takes well under a second; a loaded machine running sanitizer builds once took over 10.
constexpr absl::Duration kChildStartTimeout = absl::Seconds(30);

// Where each O-NIC of the site lives: its host, or the chassis of a pooled device.
std::string PlaceOf(const v1::Device& device) {
  return device.host().empty() ? device.chassis() : device.host();
}

// The one switch each place's O-NICs reach, or INVALID_ARGUMENT naming a place whose O-NICs
// reach several: its emulated agent reads light from one emulator.
absl::StatusOr<std::map<std::string, std::string>> PlaceSwitches(const v1::Inventory& site) {
  std::map<std::string, std::string> device_place, out;
  for (const v1::Device& d : site.devices()) device_place[d.id()] = PlaceOf(d);
  for (const v1::Onic& onic : site.onics()) {
    const std::string& place = device_place[onic.device()];
    for (const v1::OnicPort& p : onic.ports()) {
      for (const std::string& sw : {p.tx().switch_id(), p.rx().switch_id()}) {
        auto [it, inserted] = out.emplace(place, sw);
        if (!inserted && it->second != sw) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the demo runs one emulated agent per host or chassis, and ", place,
              "'s O-NICs reach switches ", it->second, " and ", sw, " (onic ", onic.id(), ")"));
        }
      }
    }
  }
  return out;
}

std::pair<std::string, std::string> HostAndPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  return {address.substr(0, colon), address.substr(colon + 1)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Demo>> Demo::Prepare(FleetdConfig& config,
                                                    const std::string& binary_dir,
                                                    const DemoOptions& options) {
  if (options.protocol != "tl1" && options.protocol != "rest") {
    return absl::InvalidArgumentError(
        absl::StrCat("demo protocol '", options.protocol, "' is not tl1 or rest"));
  }
  const std::string text =
      options.inventory.empty() ? std::string(EmbeddedGen1Inventory()) : options.inventory;
  ASSIGN_OR_RETURN(const v1::Inventory site, inventory::ParseInventoryYaml(text, "demo site"));
  if (site.switches().empty()) return absl::InvalidArgumentError("the demo site has no switch");
  RETURN_IF_ERROR(PlaceSwitches(site).status());

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
  if (!config.insecure) {
    ASSIGN_OR_RETURN(demo->pki_, DemoPki::Make(config));
  }

  // One emulator per switch; a single-switch site keeps the file names it always had.
  const bool several = site.switches_size() > 1;
  std::map<std::string, std::string> rest_of;  // Switch id → REST address.
  for (const v1::Switch& sw : site.switches()) {
    const std::string suffix = several ? "-" + sw.id() : "";
    ASSIGN_OR_RETURN(
        std::unique_ptr<ChildProcess> emulator,
        ChildProcess::Start(
            {binary_dir + "/polatis-emu", "--size",
             absl::StrCat(sw.ingress_ports(), "x", sw.egress_ports()), "--tl1-port", "0",
             "--rest-port", "0", "--switch-ms", absl::StrCat(options.switch_ms), "--state",
             absl::StrCat(demo->state_dir_, "/switch-state", suffix, ".json")},
            absl::StrCat(demo->state_dir_, "/polatis-emu", suffix, ".log")));
    DemoSwitch& emulated = demo->switches_.emplace_back();
    emulated.id = sw.id();
    ASSIGN_OR_RETURN(emulated.tl1, emulator->WaitForLine("tl1: ", kChildStartTimeout));
    ASSIGN_OR_RETURN(emulated.rest, emulator->WaitForLine("rest: ", kChildStartTimeout));
    rest_of[sw.id()] = emulated.rest;
    demo->emulators_.push_back(std::move(emulator));
  }
  // Each trunk fiber: the far end's emulator reads its light from the near end's.
  for (const v1::Trunk& trunk : site.trunks()) {
    CurlHttpClientOptions to_end;
    to_end.base_url = "http://" + rest_of[trunk.to().switch_id()];
    to_end.content_type = "application/json";
    std::unique_ptr<HttpClient> http = NewCurlHttpClient(to_end);
    ASSIGN_OR_RETURN(HttpResponse response,
                     http->Send("PUT", absl::StrCat("/sim/v1/trunks/", trunk.to().port()),
                                absl::StrCat(R"({"from": ")", rest_of[trunk.from().switch_id()],
                                             R"(", "egress": )", trunk.from().port(), "}")));
    if (response.status != 204) {
      return absl::InternalError(absl::StrCat("the emulator of ", trunk.to().switch_id(),
                                              " refused trunk ", trunk.id(), ": ", response.body));
    }
  }

  // The site with each switch pointed at its emulator's TL1 (or REST) port.
  YAML::Node root = YAML::Load(text);
  for (YAML::Node sw : root["switches"]) {
    for (const DemoSwitch& emulated : demo->switches_) {
      if (emulated.id != sw["id"].as<std::string>()) continue;
      const auto [host, port] =
          HostAndPort(options.protocol == "rest" ? emulated.rest : emulated.tl1);
      sw["address"] = host;
      sw["port"] = std::stoi(port);
      sw["protocol"] = options.protocol;
      // The demo's emulators serve plain HTTP (trunked emulators read each other's light
      // over it): a REST switch says so by name; a TL1 one may carry neither key.
      sw.remove("ca_bundle");
      sw.remove("insecure_http");
      if (options.protocol == "rest") sw["insecure_http"] = true;
    }
  }
  YAML::Emitter yaml;
  yaml << root;
  demo->inventory_path_ = demo->state_dir_ + "/inventory.yaml";
  std::ofstream(demo->inventory_path_) << yaml.c_str() << "\n";
  const std::string credentials = demo->state_dir_ + "/switch-credentials.yaml";
  {
    std::ofstream file(credentials);
    file << "switches:\n";
    for (const DemoSwitch& emulated : demo->switches_) {
      file << "  " << emulated.id << ": {user: admin, password: root}\n";
    }
  }
  chmod(credentials.c_str(), 0600);
  config.inventory = demo->inventory_path_;
  config.switch_credentials = credentials;
  return demo;
}

absl::Status Demo::StartEtcd(int members, FleetdConfig& config) {
  if (!pki_)
    return absl::FailedPreconditionError("a replicated demo runs with TLS, not --insecure");
  RETURN_IF_ERROR(etcd::EtcdInstalled());
  RETURN_IF_ERROR(pki_->IssueEtcd());
  const etcd::EtcdClusterFiles files = {.ca_file = pki_->ca_file(),
                                        .cert_file = pki_->pki_dir() + "/etcd-server.pem",
                                        .key_file = pki_->pki_dir() + "/etcd-server.key"};
  ASSIGN_OR_RETURN(const std::vector<int> ports, FreeLoopbackPorts(2 * members));
  std::vector<etcd::EtcdMember> cluster;
  for (int i = 0; i < members; ++i) {
    const std::string name = absl::StrCat("m", i);
    cluster.push_back({.name = name,
                       .data_dir = absl::StrCat(state_dir_, "/etcd-", name),
                       .client = absl::StrCat("127.0.0.1:", ports[2 * i]),
                       .peer = absl::StrCat("127.0.0.1:", ports[2 * i + 1])});
  }
  const std::string initial = etcd::InitialCluster(cluster);
  std::vector<std::string> endpoints;
  for (const etcd::EtcdMember& m : cluster) {
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> member,
                     ChildProcess::Start(etcd::EtcdMemberArgv(m, initial, "new", files),
                                         absl::StrCat(state_dir_, "/etcd-", m.name, ".log")));
    etcd_members_.push_back(std::move(member));
    endpoints.push_back(m.client);
  }
  config.etcd = absl::StrJoin(endpoints, ",");
  config.etcd_ca_file = pki_->ca_file();
  config.etcd_cert_file = pki_->pki_dir() + "/etcd-client.pem";
  config.etcd_key_file = pki_->pki_dir() + "/etcd-client.key";
  etcd::EtcdOptions client;
  client.ca_file = config.etcd_ca_file;
  client.cert_file = config.etcd_cert_file;
  client.key_file = config.etcd_key_file;
  for (const std::string& endpoint : endpoints) {
    RETURN_IF_ERROR(etcd::AwaitEtcdMember(client, endpoint, kChildStartTimeout));
  }
  return absl::OkStatus();
}

absl::Status Demo::StartAgents(const std::string& grpc_address) {
  ASSIGN_OR_RETURN(v1::Inventory site, inventory::ReadInventoryFile(inventory_path_));
  // One agent per place O-NICs live: each host (its CPUs' O-NICs) and each chassis of
  // pooled devices (run by the chassis's management controller).
  std::map<std::string, std::string> location;  // Device id → host or chassis.
  std::vector<std::string> places;
  std::set<std::string> named;  // Places so far: a chassis named like a host is that place.
  for (const v1::Host& host : site.hosts()) {
    places.push_back(host.name());
    named.insert(host.name());
  }
  for (const v1::Device& d : site.devices()) {
    location[d.id()] = PlaceOf(d);
    if (d.host().empty() && !d.chassis().empty() && named.insert(d.chassis()).second) {
      places.push_back(d.chassis());
    }
  }
  // Each place's O-NICs, in inventory order (one pass, not one per place: 2,048 places at
  // S = 64).
  std::map<std::string, std::vector<const v1::Onic*>> onics_at;
  for (const v1::Onic& onic : site.onics()) {
    if (onic.ports_size() == 2) onics_at[location[onic.device()]].push_back(&onic);
  }
  ASSIGN_OR_RETURN(const auto place_switch, PlaceSwitches(site));
  // A site of many places runs its agents kAgentsPerProcess to a process (one agent process
  // takes about 25 MiB, so 2,048 alone would need 50 GiB); a small one, one process each, so
  // that each can be stopped alone and scraped.
  agent_places_ = static_cast<int>(places.size());
  grouped_ = agent_places_ > kAgentsPerProcess;
  // Every process is started before any is waited for: one after another, each waiting for
  // the last to come up, the demo's seven took 1.5 s here, and a loaded machine multiplies
  // that (a test once waited more than 30 s).
  struct Starting {
    std::unique_ptr<ChildProcess> process;
    std::vector<std::string> argv;
    std::string place;  // Of an agent alone in its process.
    std::string log;
    bool grouped = false;  // A process of several agents.
  };
  std::vector<Starting> starting;
  std::vector<std::string> group;  // Config files of the next process's agents.
  auto start_group = [&]() -> absl::Status {
    std::string log = absl::StrCat(state_dir_, "/agents-", starting.size() + 1, ".log");
    std::vector<std::string> argv = {binary_dir_ + "/fleet-onic-agent", "--config",
                                     absl::StrJoin(group, ","), "--controller", grpc_address};
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> agents, ChildProcess::Start(argv, log));
    starting.push_back({std::move(agents), std::move(argv), "", std::move(log), true});
    group.clear();
    return absl::OkStatus();
  };
  std::map<std::string, std::string> rest_of;
  for (const DemoSwitch& emulated : switches_) rest_of[emulated.id] = emulated.rest;
  for (const std::string& place : places) {
    // A host without O-NICs still gets an agent, on the first switch's light.
    auto at = place_switch.find(place);
    const std::string& simulator =
        at == place_switch.end() ? switches_.front().rest : rest_of[at->second];
    std::string config =
        absl::StrCat("host: ", place, "\nbackend: emulated\nsimulator: ", simulator,
                     "\ntraining_ms: ", options_.training_ms,
                     "\nmonitor_interval_ms: ", options_.monitor_interval_ms, "\nonics:\n");
    for (const v1::Onic* onic : onics_at[place]) {
      absl::StrAppend(&config, "  - serial: ", onic->serial(), "\n    pcie: \"",
                      onic->pcie_address(), "\"\n    ports:\n");
      for (const v1::OnicPort& p : onic->ports()) {
        absl::StrAppend(&config, "      - {tx_ingress: ", p.tx().port(),
                        ", rx_egress: ", p.rx().port(), "}\n");
      }
    }
    if (pki_) {
      ASSIGN_OR_RETURN(const std::string prefix, pki_->IssueAgent(place));
      absl::StrAppend(&config, "tls_ca_file: ", pki_->ca_file(), "\ntls_cert_file: ", prefix,
                      ".pem\ntls_key_file: ", prefix, ".key\n");
    } else {
      absl::StrAppend(&config, "insecure: true\n");
    }
    const std::string path = absl::StrCat(state_dir_, "/agent-", place, ".yaml");
    std::ofstream(path) << config;
    if (grouped_) {
      group.push_back(path);
      if (group.size() == kAgentsPerProcess) RETURN_IF_ERROR(start_group());
      continue;
    }
    std::vector<std::string> argv = {binary_dir_ + "/fleet-onic-agent",
                                     "--config",
                                     path,
                                     "--controller",
                                     grpc_address,
                                     "--metrics-port",
                                     "0"};
    std::string log = absl::StrCat(state_dir_, "/agent-", place, ".log");
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> agent, ChildProcess::Start(argv, log));
    starting.push_back({std::move(agent), std::move(argv), place, std::move(log)});
  }
  if (!group.empty()) RETURN_IF_ERROR(start_group());
  // An agent alone in its process prints its metrics address; a process of several, its count.
  // Each its own time: they came up together, so a slow first one says nothing of the rest.
  for (Starting& s : starting) {
    absl::StatusOr<std::string> up =
        s.process->WaitForLine(s.grouped ? "agents: " : "metrics: ", kChildStartTimeout);
    if (!up.ok()) {
      return absl::Status(up.status().code(), absl::StrCat(s.grouped ? "the agents of " + s.log
                                                                     : "the agent for " + s.place,
                                                           ": ", up.status().message()));
    }
    if (!s.grouped) agent_metrics_.push_back({s.place, *up});
    agents_.push_back(std::move(s.process));
    agent_argv_.push_back(std::move(s.argv));
  }
  return absl::OkStatus();
}

absl::Status Demo::StopAgent(const std::string& place) {
  if (grouped_) return SharedAgentProcesses();
  for (size_t i = 0; i < agent_metrics_.size(); ++i) {
    if (agent_metrics_[i].first != place) continue;
    agents_[i].reset();  // SIGTERM, then SIGKILL if it lingers: its stream ends.
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no agent runs for ", place));
}

absl::Status Demo::RestartAgent(const std::string& place) {
  if (grouped_) return SharedAgentProcesses();
  for (size_t i = 0; i < agent_metrics_.size(); ++i) {
    if (agent_metrics_[i].first != place || agents_[i] != nullptr) continue;
    ASSIGN_OR_RETURN(
        agents_[i],
        ChildProcess::Start(agent_argv_[i], absl::StrCat(state_dir_, "/agent-", place, ".log")));
    ASSIGN_OR_RETURN(agent_metrics_[i].second,
                     agents_[i]->WaitForLine("metrics: ", kChildStartTimeout));
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("no stopped agent for ", place));
}

absl::Status Demo::SharedAgentProcesses() const {
  return absl::FailedPreconditionError(
      absl::StrCat("this site's ", agent_places_, " agents share processes (", kAgentsPerProcess,
                   " to a process above that many): one cannot be stopped alone"));
}

absl::StatusOr<std::string> Demo::WriteFleetctlConfig(const std::string& grpc_address) {
  if (!pki_) return std::string();
  return pki_->WriteFleetctlConfig(grpc_address);
}

}  // namespace fleet::fleetd
