// fleet_polatis_bench: programs a full 192-link reconfiguration (384 cross-connects torn
// down and 384 made) on a 384x384 polatis-emu, through TL1 and REST, as one batch and as
// one command per cross-connect (the way the ONOS driver and many scripts do it), and
// prints the times and their ratio. Run with the emulator's switching time at 0 ms (the
// protocols' own cost) and at 25 ms (a real switch's physics).
//
//   fleet_polatis_bench [--switch-ms 0,25] [--repeat 5]
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace {

using fleet::polatis::Protocol;
using fleet::switch_adapters::CrossConnect;
using fleet::switch_adapters::CrossConnectBatch;

// Topology `shift`: ingress i → egress 385 + (i - 1 + shift) mod 384. Shifts 0 and 1 share
// no cross-connect, so moving between them changes all 384.
std::vector<CrossConnect> Topology(uint32_t shift) {
  std::vector<CrossConnect> out;
  for (uint32_t i = 1; i <= 384; ++i) out.push_back({i, 385 + (i - 1 + shift) % 384});
  return out;
}

struct Figures {
  double median_ms = 0;
  int commands = 0;
};

// Moves between topologies `shift` and `shift ^ 1` `repeat` times; `shift` is the topology
// the switch holds, before and after.
Figures Measure(fleet::switch_adapters::OpticalSwitch& sw, int repeat, uint32_t& shift) {
  std::vector<double> ms;
  int commands = 0;
  for (int r = 0; r < repeat; ++r) {
    CrossConnectBatch batch{Topology(shift), Topology(shift ^ 1)};
    shift ^= 1;
    const absl::Time start = absl::Now();
    fleet::switch_adapters::ApplyResult result = sw.Apply(batch);
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!result.status.ok()) {
      std::cerr << "apply failed: " << result.status.ToString().substr(0, 300) << "\n";
      std::exit(1);
    }
    commands = result.commands;
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], commands};
}

}  // namespace

int main(int argc, char** argv) {
  std::string switch_ms_list = "0,25";
  int64_t repeat = 5;
  fleet::FlagSet flags("fleet_polatis_bench [--switch-ms 0,25] [--repeat N]",
                       "Times a full 384-cross-connect reconfiguration through polatis-emu.");
  flags.String("switch-ms", &switch_ms_list, "emulated switching times to run, comma-separated");
  flags.Int("repeat", &repeat, "reconfigurations per bulk measurement (median printed)");
  absl::StatusOr<std::vector<std::string>> rest =
      flags.Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!rest.ok() || flags.help_requested()) {
    std::cerr << (rest.ok() ? flags.Help() : std::string(rest.status().message())) << "\n";
    return rest.ok() ? 0 : 2;
  }
  std::printf("%-5s %-9s %-26s %12s %9s\n", "proto", "switch-ms", "mode", "median ms", "commands");
  for (absl::string_view text : absl::StrSplit(switch_ms_list, ',')) {
    int switch_ms = 0;
    if (!absl::SimpleAtoi(text, &switch_ms)) {
      std::cerr << "bad --switch-ms value '" << text << "'\n";
      return 2;
    }
    for (Protocol protocol : {Protocol::kTl1, Protocol::kRest}) {
      absl::StatusOr<std::unique_ptr<fleet::testing::Daemon>> emu = fleet::testing::Daemon::Start(
          {fleet::testing::BinaryPath("polatis-emu"), "--size", "384x384", "--tl1-port", "0",
           "--rest-port", "0", "--switch-ms", absl::StrCat(switch_ms)});
      if (!emu.ok()) {
        std::cerr << emu.status() << "\n";
        return 1;
      }
      absl::StatusOr<std::string> tl1 = (*emu)->WaitForLine("tl1: ");
      absl::StatusOr<std::string> http = (*emu)->WaitForLine("rest: ");
      if (!tl1.ok() || !http.ok()) {
        std::cerr << "polatis-emu did not start\n";
        return 1;
      }
      const std::string& address = protocol == Protocol::kTl1 ? *tl1 : *http;
      const size_t colon = address.rfind(':');
      fleet::polatis::PolatisSwitchOptions options;
      options.name = "bench";
      options.protocol = protocol;
      options.host = address.substr(0, colon);
      options.port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
      options.credentials = {"admin", "root"};
      options.insecure_http = true;  // The emulator here serves plain HTTP.
      options.command_timeout = absl::Seconds(120);
      const char* name = protocol == Protocol::kTl1 ? "tl1" : "rest";

      auto bulk = fleet::polatis::NewPolatisSwitch(options);
      if (!bulk->Apply({{}, Topology(0)}).status.ok()) {
        std::cerr << "initial topology failed\n";
        return 1;
      }
      uint32_t shift = 0;
      Figures one_batch = Measure(*bulk, static_cast<int>(repeat), shift);
      options.bulk = false;
      auto single = fleet::polatis::NewPolatisSwitch(options);
      // One command per cross-connect is slow with real switching times: fewer repeats.
      Figures per_command = Measure(*single, switch_ms > 0 ? 1 : static_cast<int>(repeat), shift);
      std::printf("%-5s %-9d %-26s %12.1f %9d\n", name, switch_ms, "one batch", one_batch.median_ms,
                  one_batch.commands);
      std::printf("%-5s %-9d %-26s %12.1f %9d\n", name, switch_ms, "one command per xconnect",
                  per_command.median_ms, per_command.commands);
      std::printf("%-5s %-9d %-26s %12.1fx\n", name, switch_ms, "ratio (per-command/batch)",
                  per_command.median_ms / one_batch.median_ms);
      std::fflush(stdout);
    }
  }
  return 0;
}
