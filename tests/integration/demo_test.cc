// `fleetd --demo` with the real binaries: the emulator, the Gen1 inventory and one emulated
// agent per host, driven with fleetctl.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using testing::Daemon;
using ::testing::HasSubstr;
using testing::RunCommand;

template <typename F>
bool Eventually(F done, absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

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
  auto fleetctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {BinaryPath("fleetctl"), "--server", *grpc});
    return RunCommand(args);
  };

  // Four hosts, four agents, all connected and agreeing with inventory.
  auto connected = [&] {
    std::string out = fleetctl({"get", "agents"}).out;
    int yes = 0;
    for (size_t at = out.find("  yes  "); at != std::string::npos;
         at = out.find("  yes  ", at + 1)) {
      ++yes;
    }
    return yes;
  };
  ASSERT_TRUE(Eventually([&] { return connected() == 4; })) << fleetctl({"get", "agents"}).out;
  // Every agent agrees with inventory: no mismatch is reported.
  CommandResult json = fleetctl({"get", "agents", "-o", "json"});
  EXPECT_THAT(json.out, HasSubstr("\"onic_serials\""));
  EXPECT_THAT(json.out, ::testing::Not(HasSubstr("inventory_mismatches")));
  CommandResult health = fleetctl({"health"});
  EXPECT_THAT(health.out, HasSubstr("switch/ocs1"));
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
  EXPECT_EQ(ChildrenRunning(fleetd->pid(), BinaryPath("fleet-onic-agent")).size(), 4u);
  kill(server4[0], SIGKILL);
  ASSERT_TRUE(Eventually([&] { return connected() == 3; }));
  CommandResult gone = fleetctl({"link", "status", "s4c0-n0"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(gone.err, HasSubstr("server4"));

  CommandResult status = fleetctl({"link", "status", "gpu1-n0"});
  EXPECT_EQ(status.exit_code, 1);  // GPUs have no agent in the demo: a clear error.
  EXPECT_THAT(status.err, HasSubstr("UNAVAILABLE"));

  absl::StatusOr<int> code = fleetd->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << fleetd->Stderr();
  EXPECT_TRUE(ChildrenRunning(fleetd->pid(), BinaryPath("polatis-emu")).empty());
}

}  // namespace
}  // namespace fleet
