// `fleetd --demo` with the real binaries: the emulator, the Gen1 inventory and one emulated
// agent per host, driven with fleetctl.
#include <arpa/inet.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "controller/inventory/inventory.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using testing::Daemon;
using testing::Eventually;
using ::testing::HasSubstr;
using testing::RunCommand;

// Children of `parent` whose command line starts with `binary` and holds `word`.
std::vector<pid_t> ChildrenRunning(pid_t parent, const std::string& binary,
                                   const std::string& word = "") {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    // A process may exit between readdir and the read (fleetctl runs come and go).
    const size_t name_end = line.rfind(')');
    if (name_end == std::string::npos || name_end + 2 > line.size()) continue;
    std::vector<std::string> fields = absl::StrSplit(line.substr(name_end + 2), ' ');
    if (fields.size() < 2 || fields[1] != std::to_string(parent)) continue;
    std::ifstream cmdline("/proc/" + std::string(entry->d_name) + "/cmdline");
    std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (all.rfind(binary + '\0', 0) == 0 && all.find(word) != std::string::npos) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

TEST(DemoTest, EmulatorAgentsAndInventoryComeUpAndGoDownTogether) {
  const std::string state = testing::FreshDirectory("demo");
  absl::StatusOr<std::unique_ptr<Daemon>> started =
      Daemon::Start({BinaryPath("fleetd"), "--demo", "--state-dir", state, "--grpc-port", "0",
                     "--metrics-port", "0", "--agent-heartbeat-ms", "100"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Daemon> fleetd = std::move(*started);
  // On any failure, show what fleetd, the emulator and the agents said.
  struct DumpOnFailure {
    Daemon* fleetd;
    std::string state;
    ~DumpOnFailure() {
      if (!::testing::Test::HasFailure()) return;
      std::cerr << "---- fleetd stderr:\n" << fleetd->Stderr();
      for (const auto& entry : std::filesystem::directory_iterator(state)) {
        if (entry.path().extension() != ".log") continue;
        std::ifstream log(entry.path());
        std::cerr << "---- " << entry.path().filename() << ":\n" << log.rdbuf();
      }
    }
  } dump{fleetd.get(), state};
  absl::StatusOr<std::string> grpc = fleetd->WaitForLine("grpc: ");
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  ASSERT_TRUE(fleetd->WaitForLine("metrics: ").ok());
  absl::StatusOr<std::string> tl1 = fleetd->WaitForLine("tl1: ");
  ASSERT_TRUE(tl1.ok()) << tl1.status();
  ASSERT_TRUE(fleetd->WaitForLine("rest: ").ok());
  // The demo runs with mutual TLS on a PKI of its own; fleetctl uses the contexts it wrote.
  absl::StatusOr<std::string> config = fleetd->WaitForLine("fleetctl-config: ");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, state + "/fleetctl.yaml");
  const testing::FleetdAt demo = testing::FleetdAt::WithConfig(*config);
  auto fleetctl = [&](std::vector<std::string> args) { return testing::Fleetctl(demo, args); };
  // Plaintext is refused: the demo is not --insecure.
  CommandResult plaintext = testing::Fleetctl(*grpc, {"health"});
  EXPECT_EQ(plaintext.exit_code, 1);
  EXPECT_THAT(plaintext.err, HasSubstr("UNAVAILABLE"));
  // gRPC says only that the socket closed; fleetctl says why.
  EXPECT_THAT(plaintext.err, HasSubstr("this fleetd serves TLS; drop --insecure"));
  // The switch's login comes from the demo's own credentials file, which describe names.
  CommandResult described = fleetctl({"describe", "switch", "ocs1"});
  EXPECT_THAT(described.out,
              HasSubstr(absl::StrCat("Credentials:      ", state, "/switch-credentials.yaml")));

  // Four hosts and three chassis (the GPU pool and two JBODs), an agent each, all connected
  // and agreeing with inventory.
  ASSERT_TRUE(Eventually([&] { return testing::ConnectedAgents(demo) == 7; }))
      << fleetctl({"get", "agents"}).out;
  // Every agent agrees with inventory: no mismatch is reported.
  CommandResult json = fleetctl({"get", "agents", "-o", "json"});
  EXPECT_THAT(json.out, HasSubstr("\"onic_serials\""));
  EXPECT_THAT(json.out, ::testing::Not(HasSubstr("inventory_mismatches")));
  CommandResult health = fleetctl({"health"});
  EXPECT_THAT(health.out, HasSubstr("switch/ocs1"));
  EXPECT_THAT(health.out, HasSubstr("mutual TLS"));
  EXPECT_THAT(health.out, HasSubstr("overall: ok"));

  // Operators retrain a link through its agent: s1c0-n0 port 1's tx (ingress 1) is patched
  // to s1c0-n1 port 1's rx (egress 387) on the emulated switch.
  const size_t colon = tl1->rfind(':');
  auto sw = polatis::NewPolatisSwitch({"ocs1",
                                       polatis::Protocol::kTl1,
                                       tl1->substr(0, colon),
                                       static_cast<uint16_t>(std::stoi(tl1->substr(colon + 1))),
                                       {"admin", "root"}});
  ASSERT_TRUE(sw->Apply({{}, {{1, 387}}}).status.ok());
  CommandResult retrain = fleetctl({"link", "retrain", "s1c0-n1", "1"});
  ASSERT_EQ(retrain.exit_code, 0) << retrain.err;
  EXPECT_THAT(retrain.out, HasSubstr("up"));
  EXPECT_THAT(retrain.out, HasSubstr("FLT-S1C0-N0/1"));

  // An agent that dies is noticed.
  std::vector<pid_t> server4 =
      ChildrenRunning(fleetd->pid(), BinaryPath("fleet-onic-agent"), "agent-server4.yaml");
  ASSERT_EQ(server4.size(), 1u);
  EXPECT_EQ(ChildrenRunning(fleetd->pid(), BinaryPath("fleet-onic-agent")).size(), 7u);
  kill(server4[0], SIGKILL);
  ASSERT_TRUE(Eventually([&] { return testing::ConnectedAgents(demo) == 6; }));
  CommandResult gone = fleetctl({"link", "status", "s4c0-n0"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(gone.err, HasSubstr("server4"));

  // The main job: the ring of eight GPUs, requested and waited for, READY with its circuits.
  CommandResult ring =
      fleetctl({"topology", "request", "-f",
                std::string(FLEET_SOURCE_DIR) + "/deploy/examples/ring-8-gpus.yaml", "--wait"});
  ASSERT_EQ(ring.exit_code, 0) << ring.err << ring.out;
  EXPECT_THAT(ring.out, HasSubstr("ready"));
  EXPECT_THAT(ring.out, HasSubstr("gpu8-n0/1 → gpu1-n0/1"));
  const size_t id_at = ring.out.find("ID:");
  ASSERT_NE(id_at, std::string::npos) << ring.out;
  const std::string id(absl::StripAsciiWhitespace(
      ring.out.substr(id_at + 3, ring.out.find('\n', id_at) - id_at - 3)));
  // What holds gpu1 and its ports, and the lit ports' state as the switch monitor (every 2 s)
  // and the agents' retrains found it: up, not unknown.
  auto port_row = [&](const std::string& port) {
    for (absl::string_view line : absl::StrSplit(fleetctl({"get", "ports"}).out, '\n')) {
      if (absl::StartsWith(line, absl::StrCat("ocs1    ", port, " "))) return std::string(line);
    }
    return std::string();
  };
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(port_row("433"), " up "); }))
      << port_row("433");
  EXPECT_THAT(port_row("433"), HasSubstr(id));  // gpu1-n0/1's rx: the ring's last circuit.
  CommandResult gpu1 = fleetctl({"describe", "device", "gpu1"});
  EXPECT_THAT(gpu1.out, HasSubstr(absl::StrCat("Used by:  ", id, "\n")));
  EXPECT_THAT(gpu1.out, HasSubstr("port 1  tx ocs1/49  rx ocs1/433  admin enabled  oper up\n"));
  CommandResult status = fleetctl({"link", "status", "gpu1-n0"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("FLT-GPU8-N0/1"));  // Port 1 receives from gpu8.

  absl::StatusOr<int> code = fleetd->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << fleetd->Stderr();
  EXPECT_TRUE(ChildrenRunning(fleetd->pid(), BinaryPath("polatis-emu")).empty());
}

TEST(DemoTest, ChildrenDieWithAKilledFleetd) {
  const std::string state = testing::FreshDirectory("killed");
  absl::StatusOr<std::unique_ptr<Daemon>> started =
      Daemon::Start({BinaryPath("fleetd"), "--demo", "--state-dir", state, "--grpc-port", "0",
                     "--metrics-port", "0"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Daemon> fleetd = std::move(*started);
  ASSERT_TRUE(fleetd->WaitForLine("state: ").ok()) << fleetd->Stderr();
  // A child forked a moment ago may not have exec'd its binary yet.
  std::vector<pid_t> children;
  EXPECT_TRUE(Eventually([&] {
    children = ChildrenRunning(fleetd->pid(), BinaryPath("fleet-onic-agent"));
    return children.size() == 7u;
  }));
  std::vector<pid_t> emulator = ChildrenRunning(fleetd->pid(), BinaryPath("polatis-emu"));
  ASSERT_EQ(children.size(), 7u);
  ASSERT_EQ(emulator.size(), 1u);
  children.push_back(emulator[0]);
  ASSERT_TRUE(fleetd->Stop(SIGKILL).ok());
  // Orphans would be re-parented and keep running; the demo's children end instead.
  EXPECT_TRUE(Eventually([&] {
    for (pid_t pid : children) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      const size_t name_end = line.rfind(')');
      // Gone, or a zombie waiting for its new parent to reap it.
      if (name_end != std::string::npos && line.size() > name_end + 2 &&
          line[name_end + 2] != 'Z') {
        return false;
      }
    }
    return true;
  }));
}

// A TCP port that takes connections and never answers: a switch that hangs.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// An apply never quietly repoints a switch that holds circuits: it is refused naming the
// switch and the fields unless forced, `diff` shows the change beforehand, and the event
// says which fields changed. A switch that stops answering is reported unreachable by
// `health` at once, with the rest of the report.
TEST(DemoTest, ARepointOfALiveSwitchIsRefusedUnlessForcedAndHealthNamesAnUnreachableOne) {
  const std::string state = testing::FreshDirectory("repoint");
  absl::StatusOr<std::unique_ptr<Daemon>> started =
      Daemon::Start({BinaryPath("fleetd"), "--demo", "--state-dir", state, "--grpc-port", "0",
                     "--metrics-port", "0", "--agent-heartbeat-ms", "100"});
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Daemon> fleetd = std::move(*started);
  absl::StatusOr<std::string> tl1 = fleetd->WaitForLine("tl1: ");
  ASSERT_TRUE(tl1.ok()) << tl1.status() << fleetd->Stderr();
  absl::StatusOr<std::string> config = fleetd->WaitForLine("fleetctl-config: ");
  ASSERT_TRUE(config.ok()) << config.status();
  const testing::FleetdAt demo = testing::FleetdAt::WithConfig(*config);
  auto fleetctl = [&](std::vector<std::string> args) { return testing::Fleetctl(demo, args); };
  ASSERT_TRUE(Eventually([&] { return testing::ConnectedAgents(demo) == 7; }));
  const std::string own = state + "/inventory.yaml";
  const std::string gen1 = std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml";
  const std::string tl1_port = tl1->substr(tl1->rfind(':') + 1);

  // The demo's own file changes nothing; the Gen1 file would repoint ocs1.
  CommandResult same = fleetctl({"diff", "-f", own});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.out, HasSubstr("0 to create, 0 to update"));
  CommandResult applied = fleetctl({"apply", "-f", own});
  EXPECT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_THAT(applied.out, HasSubstr("created 0, updated 0, unchanged"));
  CommandResult differs = fleetctl({"diff", "-f", gen1});
  EXPECT_EQ(differs.exit_code, 1) << differs.err;
  EXPECT_THAT(differs.out, HasSubstr("~ switch ocs1\n"));
  EXPECT_THAT(differs.out, HasSubstr("    address: 127.0.0.1 -> 192.0.2.10\n"));
  EXPECT_THAT(differs.out, HasSubstr(absl::StrCat("    port: ", tl1_port, " -> 3082\n")));

  // With the ring up, the same apply is refused, dry run or not, and nothing changes.
  CommandResult ring =
      fleetctl({"topology", "request", "-f",
                std::string(FLEET_SOURCE_DIR) + "/deploy/examples/ring-8-gpus.yaml", "--wait"});
  ASSERT_EQ(ring.exit_code, 0) << ring.err << ring.out;
  for (const std::vector<std::string>& apply :
       {std::vector<std::string>{"apply", "-f", gen1},
        std::vector<std::string>{"apply", "--dry-run", "-f", gen1}}) {
    CommandResult refused = fleetctl(apply);
    EXPECT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_THAT(refused.err, HasSubstr("FAILED_PRECONDITION: switch ocs1 holds 8 circuits"));
    EXPECT_THAT(refused.err, HasSubstr(absl::StrCat("(address 127.0.0.1 -> 192.0.2.10, port ",
                                                    tl1_port, " -> 3082)")));
    EXPECT_THAT(refused.err, HasSubstr("--force"));
  }
  differs = fleetctl({"diff", "-f", gen1});
  EXPECT_EQ(differs.exit_code, 1);
  EXPECT_THAT(differs.err, HasSubstr("would be refused: switch ocs1 holds 8 circuits"));
  CommandResult health = fleetctl({"health"});
  EXPECT_THAT(health.out, HasSubstr("overall: ok")) << health.out;

  // Forced onto a port that never answers: the event names the fields; health reports the
  // switch unreachable after its probe's 2 s, not the driver's 10 s, with the rest.
  SilentListener silent;
  std::string text = ReadWhole(own);
  const size_t at = text.find("port: " + tl1_port);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 6 + tl1_port.size(), absl::StrCat("port: ", silent.port()));
  const std::string moved = state + "/moved.yaml";
  std::ofstream(moved) << text;
  CommandResult forced = fleetctl({"apply", "--force", "-f", moved});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(forced.out, HasSubstr(absl::StrCat("updated switch ocs1: port ", tl1_port, " -> ",
                                                 silent.port())));
  CommandResult events = fleetctl({"get", "events", "--kind", "switch"});
  EXPECT_THAT(events.out,
              HasSubstr(absl::StrCat("updated switch ocs1: port ", tl1_port, " -> ", silent.port(),
                                     " (forced while it held 8 ", "circuits")))
      << events.out;
  // The probe's own words: the driver's 10 s timeout would name itself instead.
  health = fleetctl({"health"});
  EXPECT_THAT(health.out, HasSubstr(absl::StrCat("unreachable at 127.0.0.1:", silent.port(),
                                                 " (tl1): no answer within 2s")))
      << health.out << health.err;
  EXPECT_THAT(health.out, HasSubstr("store"));
  EXPECT_THAT(health.out, HasSubstr("mutual TLS"));
  // Back to the emulator: reachable again.
  ASSERT_EQ(fleetctl({"apply", "--force", "-f", own}).exit_code, 0);
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(fleetctl({"health"}).out, "overall: ok"); },
                         absl::Seconds(60)));
}

// The demo's CA outlives a restart on the same state directory, so a certificate issued from
// it with `fleetctl certs issue --ca-dir STATE/pki` goes on working.
TEST(DemoTest, ARestartKeepsTheCaAndWhatItIssued) {
  const std::string state = testing::FreshDirectory("ca-kept");
  const std::vector<std::string> argv = {BinaryPath("fleetd"), "--demo", "--state-dir",    state,
                                         "--grpc-port",        "0",      "--metrics-port", "0"};
  auto start = [&]() -> std::pair<std::unique_ptr<Daemon>, std::string> {
    absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(argv);
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok()) return {};
    absl::StatusOr<std::string> grpc = (*started)->WaitForLine("grpc: ");
    EXPECT_TRUE(grpc.ok()) << (*started)->Stderr();
    EXPECT_TRUE((*started)->WaitForLine("state: ").ok());
    return {std::move(*started), grpc.value_or("")};
  };
  auto [fleetd, grpc] = start();
  ASSERT_NE(fleetd, nullptr);
  const std::string pki = state + "/pki";
  const std::string ca_before = ReadWhole(pki + "/ca.pem");
  const std::string out = state + "/issued-team-q";
  CommandResult issued = RunCommand({BinaryPath("fleetctl"), "certs", "issue", "--ca-dir", pki,
                                     "--identity", "spiffe://demo.fleet/job/team-q", "--out", out});
  ASSERT_EQ(issued.exit_code, 0) << issued.err;
  auto list_as_team_q = [&](const std::string& server) {
    return RunCommand({BinaryPath("fleetctl"), "--server", server, "--ca", pki + "/ca.pem",
                       "--cert", out + ".pem", "--key", out + ".key", "get", "allocations"});
  };
  CommandResult listed = list_as_team_q(grpc);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;

  ASSERT_TRUE(fleetd->Stop(SIGTERM).ok());
  fleetd.reset();
  std::tie(fleetd, grpc) = start();
  ASSERT_NE(fleetd, nullptr);
  EXPECT_EQ(ReadWhole(pki + "/ca.pem"), ca_before);
  listed = list_as_team_q(grpc);
  EXPECT_EQ(listed.exit_code, 0) << listed.err << fleetd->Stderr();

  // A CA that cannot sign (its key lost) is replaced, saying why.
  ASSERT_TRUE(fleetd->Stop(SIGTERM).ok());
  fleetd.reset();
  std::filesystem::remove(pki + "/ca.key");
  std::tie(fleetd, grpc) = start();
  ASSERT_NE(fleetd, nullptr);
  EXPECT_NE(ReadWhole(pki + "/ca.pem"), ca_before);
  EXPECT_THAT(fleetd->Stderr(), HasSubstr("making a new CA"));
  EXPECT_EQ(list_as_team_q(grpc).exit_code, 1);
}

// Four real agents stay up while fleetd is killed and started again on the same port and
// state: every agent reconnects and registers again.
TEST(AgentsTest, AllComeBackWhenFleetdRestarts) {
  const std::string dir = testing::FreshDirectory("restart");
  const std::string gen1 = std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml";
  absl::StatusOr<std::unique_ptr<Daemon>> emu =
      Daemon::Start({BinaryPath("polatis-emu"), "--size", "384x384", "--tl1-port", "0",
                     "--rest-port", "0", "--switch-ms", "0"});
  ASSERT_TRUE(emu.ok()) << emu.status();
  ASSERT_TRUE((*emu)->WaitForLine("tl1: ").ok());
  absl::StatusOr<std::string> rest = (*emu)->WaitForLine("rest: ");
  ASSERT_TRUE(rest.ok()) << rest.status();

  auto start_fleetd = [&](const std::string& port) {
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(
        {BinaryPath("fleetd"), "--insecure", "--state-dir", dir + "/state", "--grpc-port", port,
         "--metrics-port", "0", "--inventory", gen1, "--agent-heartbeat-ms", "100"});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  };
  std::unique_ptr<Daemon> fleetd = start_fleetd("0");
  ASSERT_NE(fleetd, nullptr);
  absl::StatusOr<std::string> grpc = fleetd->WaitForLine("grpc: ");
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  const std::string port = grpc->substr(grpc->rfind(':') + 1);

  // One agent per host, its O-NICs and fibers from the inventory.
  absl::StatusOr<v1::Inventory> site = inventory::ReadInventoryFile(gen1);
  ASSERT_TRUE(site.ok()) << site.status();
  std::vector<std::unique_ptr<Daemon>> agents;
  for (const v1::Host& host : site->hosts()) {
    std::string config = "backend: emulated\ninsecure: true\nonics:\n";
    for (const v1::Onic& onic : site->onics()) {
      if (onic.device().rfind(host.name() + "-", 0) != 0) continue;  // serverN-cpuM
      absl::StrAppend(&config, "  - serial: ", onic.serial(), "\n    pcie: \"", onic.pcie_address(),
                      "\"\n    ports:\n");
      for (const v1::OnicPort& p : onic.ports()) {
        absl::StrAppend(&config, "      - {tx_ingress: ", p.tx().port(),
                        ", rx_egress: ", p.rx().port(), "}\n");
      }
    }
    const std::string path = dir + "/" + host.name() + ".yaml";
    std::ofstream(path) << config;
    absl::StatusOr<std::unique_ptr<Daemon>> agent =
        Daemon::Start({BinaryPath("fleet-onic-agent"), "--config", path, "--host", host.name(),
                       "--controller", *grpc, "--simulator", *rest, "--metrics-port", "0"});
    ASSERT_TRUE(agent.ok()) << agent.status();
    agents.push_back(std::move(*agent));
  }
  ASSERT_EQ(agents.size(), 4u);
  ASSERT_TRUE(Eventually([&] { return testing::ConnectedAgents(*grpc) == 4; }));

  ASSERT_TRUE(fleetd->Stop(SIGKILL).ok());
  fleetd = start_fleetd(port);
  ASSERT_NE(fleetd, nullptr);
  ASSERT_TRUE(fleetd->WaitForLine("grpc: ").ok()) << fleetd->Stderr();
  EXPECT_TRUE(Eventually([&] { return testing::ConnectedAgents(*grpc) == 4; })) << fleetd->Stderr();
  for (auto& agent : agents) EXPECT_TRUE(agent->Stop(SIGTERM).ok());
}

}  // namespace
}  // namespace fleet
