// The real fleetd and fleetctl binaries against each other over loopback.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fleet/v1/inventory.pb.h"
#include "tests/integration/subprocess.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using ::testing::ContainsRegex;
using testing::Daemon;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;

const std::string kGen1 = std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml";

class FleetdFleetctlTest : public ::testing::Test {
 protected:
  void SetUp() override { state_dir_ = testing::FreshDirectory("state"); }

  // Starts fleetd on free ports with `extra` flags and learns its addresses.
  void StartFleetd(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        BinaryPath("fleetd"), "--insecure", "--state-dir",    state_dir_,
        "--grpc-port",        "0",          "--metrics-port", "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(argv);
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = std::move(*started);
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ");
    ASSERT_TRUE(grpc.ok()) << grpc.status();
    absl::StatusOr<std::string> metrics = fleetd_->WaitForLine("metrics: ");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    grpc_address_ = *grpc;
    metrics_address_ = *metrics;
  }

  CommandResult Fleetctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {BinaryPath("fleetctl"), "--insecure", "--server",
                                     grpc_address_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = testing::FreshDirectory("file") + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::string state_dir_;
  std::unique_ptr<Daemon> fleetd_;
  std::string grpc_address_;
  std::string metrics_address_;
};

int DataLines(const std::string& table) {
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  return static_cast<int>(lines.size()) - 1;  // Less the header.
}

TEST_F(FleetdFleetctlTest, Gen1PortsAndOnicsAreListed) {
  StartFleetd({"--inventory", kGen1});
  CommandResult ports = Fleetctl({"get", "ports", "--switch", "ocs1"});
  ASSERT_EQ(ports.exit_code, 0) << ports.err;
  EXPECT_EQ(DataLines(ports.out), 768);
  EXPECT_THAT(ports.out, HasSubstr("onic s1c0-n0/1 tx"));
  EXPECT_THAT(ports.out, HasSubstr("onic s1c0-n0/1 rx"));
  EXPECT_THAT(ports.out, HasSubstr("trunk"));

  CommandResult onics = Fleetctl({"get", "onics", "-o", "json"});
  ASSERT_EQ(onics.exit_code, 0) << onics.err;
  v1::ListOnicsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(onics.out, &parsed).ok()) << onics.out;
  EXPECT_EQ(parsed.onics_size(), 36);

  CommandResult table = Fleetctl({"get", "onics"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(DataLines(table.out), 36);
  EXPECT_THAT(table.out, HasSubstr("gpu8-n0"));
}

TEST_F(FleetdFleetctlTest, ApplyIsIdempotentAndBrokenFilesChangeNothing) {
  StartFleetd();
  CommandResult first = Fleetctl({"apply", "-f", kGen1});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("created 59, updated 0, unchanged 0"));
  CommandResult again = Fleetctl({"apply", "-f", kGen1});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("created 0, updated 0, unchanged 59"));

  CommandResult before = Fleetctl({"get", "onics", "-o", "json"});
  const std::string broken = WriteFile("broken.yaml", R"(
devices:
  - id: gpu9
    kind: gpu
    onics:
      - id: gpu9-n0
        serial: FLT-GPU9-N0
        ports:
          - {tx: ocs1/1, rx: ocs1/500}
  - id: gpu1
    kind: gpu
    model: changed
)");
  CommandResult rejected = Fleetctl({"apply", "-f", broken});
  EXPECT_EQ(rejected.exit_code, 1);
  EXPECT_THAT(rejected.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(rejected.err, HasSubstr("switch port ocs1/1 is wired twice"));
  EXPECT_THAT(rejected.err, HasSubstr("onic gpu9-n0: has 1 port;"));
  CommandResult after = Fleetctl({"get", "onics", "-o", "json"});
  EXPECT_EQ(after.out, before.out);
  CommandResult gpu1 = Fleetctl({"describe", "device", "gpu1", "-o", "json"});
  EXPECT_THAT(gpu1.out, Not(HasSubstr("changed")));
}

TEST_F(FleetdFleetctlTest, ErrorsExitNonZeroWithTheServersMessage) {
  StartFleetd({"--inventory", kGen1});
  CommandResult in_use = Fleetctl({"delete", "host", "server1"});
  EXPECT_EQ(in_use.exit_code, 1);
  EXPECT_THAT(in_use.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(in_use.err, HasSubstr("host server1 still has devices"));

  CommandResult missing = Fleetctl({"describe", "switch", "ocs9"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("switch ocs9 not found"));

  CommandResult usage = Fleetctl({"get", "widgets"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("widgets"));

  CommandResult deleted = Fleetctl({"delete", "device", "nvme2"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_THAT(deleted.out, HasSubstr("onic nvme2-n1"));
  CommandResult onics = Fleetctl({"get", "onics"});
  EXPECT_EQ(DataLines(onics.out), 34);
}

TEST_F(FleetdFleetctlTest, DescribeShowsRelatedObjects) {
  StartFleetd({"--inventory", kGen1});
  CommandResult host = Fleetctl({"describe", "host", "server1"});
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_THAT(host.out, HasSubstr("server1-cpu1"));
  CommandResult device = Fleetctl({"describe", "device", "nvme1"});
  ASSERT_EQ(device.exit_code, 0) << device.err;
  EXPECT_THAT(device.out, HasSubstr("nvme1-n1"));
  EXPECT_THAT(device.out, HasSubstr("ocs1/"));
  CommandResult sw = Fleetctl({"describe", "switch", "ocs1", "-o", "yaml"});
  ASSERT_EQ(sw.exit_code, 0) << sw.err;
  EXPECT_THAT(sw.out, HasSubstr("ingress_ports: 384"));
  CommandResult version = Fleetctl({"version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("server 0.1.0"));
}

// One fleetd per state directory: a second one is refused, naming the holder, before it
// touches the database or a switch; the lock goes with its holder, even killed.
TEST_F(FleetdFleetctlTest, ASecondFleetdOnTheSameStateIsRefusedUntilTheFirstIsGone) {
  StartFleetd();
  const std::vector<std::string> argv = {
      BinaryPath("fleetd"), "--insecure", "--state-dir",    state_dir_,
      "--grpc-port",        "0",          "--metrics-port", "0"};
  CommandResult second = RunCommand(argv);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_THAT(second.err,
              HasSubstr(absl::StrCat("state directory ", state_dir_,
                                     " is in use by another fleetd, pid ", fleetd_->pid())));
  EXPECT_THAT(second.err, HasSubstr("fleetd --insecure --state-dir"));
  EXPECT_THAT(second.out, Not(HasSubstr("grpc: ")));

  ASSERT_TRUE(fleetd_->Stop(SIGKILL).ok());
  StartFleetd();  // Comes up: the kernel let go of the lock with the killed process.
  EXPECT_EQ(Fleetctl({"health"}).exit_code, 0);
}

// A request no site could hold is answered at once with the field, the value and the limit,
// and the next request is answered as usual.
TEST_F(FleetdFleetctlTest, ARequestPastWhatTheSiteHoldsIsRefusedAndTheNextIsAnswered) {
  StartFleetd({"--inventory", kGen1});
  const std::string wide = WriteFile("wide.yaml",
                                     "tenant: a\ntopology:\n  template:\n    kind: "
                                     "ring_bidirectional\n    members: [gpu1, gpu2]\n"
                                     "    width: 1000000\n");
  for (bool dry_run : {true, false}) {
    std::vector<std::string> args = {"topology", "request", "-f", wide};
    if (dry_run) args.push_back("--dry-run");
    CommandResult refused = Fleetctl(args);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_THAT(refused.err, HasSubstr("RESOURCE_EXHAUSTED: topology.template.width: 1000000"));
    EXPECT_THAT(refused.err, HasSubstr("no device of the site has more than"));
  }
  const std::string examples = std::string(FLEET_SOURCE_DIR) + "/deploy/examples/";
  CommandResult fine =
      Fleetctl({"topology", "request", "-f", examples + "ring-8-gpus.yaml", "--dry-run"});
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  // Nothing is left planning: SIGTERM stops fleetd cleanly (Stop fails the test past 30 s).
  absl::StatusOr<int> stopped = fleetd_->Stop(SIGTERM);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, 0) << fleetd_->Stderr();
}

TEST_F(FleetdFleetctlTest, TopologyRequestsArePlannedOnDryRun) {
  StartFleetd({"--inventory", kGen1});
  const std::string examples = std::string(FLEET_SOURCE_DIR) + "/deploy/examples/";
  CommandResult ring =
      Fleetctl({"topology", "request", "-f", examples + "ring-8-gpus.yaml", "--dry-run"});
  ASSERT_EQ(ring.exit_code, 0) << ring.err;
  EXPECT_THAT(ring.out, HasSubstr("dry run: nothing was changed"));
  EXPECT_THAT(ring.out,
              HasSubstr("8 circuits, 8 cross-connects to make, 0 to remove, 8 O-NIC ports"));
  EXPECT_THAT(ring.out, HasSubstr("gpu8-n0/1"));
  for (const char* example : {"links.yaml", "bidirectional-ring-width-2.yaml"}) {
    CommandResult planned =
        Fleetctl({"topology", "request", "-f", examples + example, "--dry-run"});
    EXPECT_EQ(planned.exit_code, 0) << example << ": " << planned.err;
  }
  // All-to-all's rounds: every round's circuits, each with its round; only round-1's made.
  CommandResult rounds =
      Fleetctl({"topology", "request", "-f", examples + "all-to-all.yaml", "--dry-run"});
  ASSERT_EQ(rounds.exit_code, 0) << rounds.err;
  EXPECT_THAT(rounds.out, HasSubstr("12 circuits in 2 phases (round-1 8, round-2 4) over 8 O-NIC "
                                    "ports\nround-1 first: 8 cross-connects to make, 0 to remove\n"
                                    "SOURCE     DESTINATION  CROSS-CONNECTS  PHASE\n"));
  EXPECT_THAT(rounds.out, HasSubstr("ocs1:53→433     round-2\n"));
  // The traffic example: a plan that carries most of its bytes on direct circuits.
  CommandResult traffic =
      Fleetctl({"topology", "request", "-f", examples + "traffic.yaml", "--dry-run"});
  ASSERT_EQ(traffic.exit_code, 0) << traffic.err;
  EXPECT_THAT(traffic.out, HasSubstr("\ndirect traffic: 98.5% of the bytes on direct circuits\n"));
  // Nothing was stored.
  CommandResult circuits = Fleetctl({"get", "circuits", "-o", "json"});
  EXPECT_THAT(circuits.out, Not(HasSubstr("gpu")));

  // Programming needs the switch: this fleetd has no credentials for it, so the request is
  // admitted, then fails with the reason and holds nothing.
  CommandResult program =
      Fleetctl({"topology", "request", "-f", examples + "ring-8-gpus.yaml", "--wait"});
  EXPECT_EQ(program.exit_code, 1);
  EXPECT_THAT(program.err, HasSubstr("no credentials for switch ocs1"));
  CommandResult held = Fleetctl({"get", "circuits", "-o", "json"});
  EXPECT_THAT(held.out, Not(HasSubstr("gpu")));

  const std::string bad = WriteFile("bad-spec.yaml",
                                    "tenant: a\ntopology:\n  template:\n    kind: hexagon\n"
                                    "    members: [gpu1, gpu2]\n");
  CommandResult malformed = Fleetctl({"topology", "request", "-f", bad, "--dry-run"});
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_THAT(malformed.err, HasSubstr("bad-spec.yaml:4: template.kind 'hexagon' is not one of"));

  const std::string busy =
      WriteFile("unknown.yaml", "tenant: a\ntopology:\n  links:\n    - {a: gpu1, b: gpu42}\n");
  CommandResult unknown = Fleetctl({"topology", "request", "-f", busy, "--dry-run"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(unknown.err, HasSubstr("device gpu42 not found"));
}

TEST_F(FleetdFleetctlTest, EventsFollowShowsChangesAsTheyHappen) {
  StartFleetd({"--inventory", kGen1});
  absl::StatusOr<std::unique_ptr<Daemon>> follow =
      Daemon::Start({BinaryPath("fleetctl"), "--insecure", "--server", grpc_address_, "events",
                     "--follow", "--since", "1h", "--kind", "host", "-o", "json"});
  ASSERT_TRUE(follow.ok()) << follow.status();
  // The inventory's hosts were created before the follow began, within --since: replayed
  // first.
  absl::StatusOr<std::string> replayed = (*follow)->WaitForLine("{");
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_THAT(*replayed, HasSubstr("server1"));
  CommandResult drained = Fleetctl({"drain", "host", "server3", "--reason", "firmware update"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_THAT(drained.out, HasSubstr("no allocation uses it"));
  // Then each new event as it is recorded.
  bool seen = false;
  for (int i = 0; i < 10 && !seen; ++i) {
    absl::StatusOr<std::string> line = (*follow)->WaitForLine("{");
    ASSERT_TRUE(line.ok()) << line.status();
    seen = absl::StrContains(*line, "firmware update");
  }
  EXPECT_TRUE(seen);
  CommandResult undrained = Fleetctl({"undrain", "host", "server3"});
  EXPECT_EQ(undrained.exit_code, 0) << undrained.err;
  (*follow)->Stop(SIGTERM).IgnoreError();
}

TEST_F(FleetdFleetctlTest, GetWatchReprintsTheListWhenItChanges) {
  StartFleetd({"--inventory", kGen1});
  absl::StatusOr<std::unique_ptr<Daemon>> watch = Daemon::Start(
      {BinaryPath("fleetctl"), "--insecure", "--server", grpc_address_, "get", "hosts", "--watch"});
  ASSERT_TRUE(watch.ok()) << watch.status();
  absl::StatusOr<std::string> header = (*watch)->WaitForLine("# hosts at ");
  ASSERT_TRUE(header.ok()) << header.status();
  absl::StatusOr<std::string> before = (*watch)->WaitForLine("server3 ");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_THAT(*before, HasSubstr("enabled"));

  CommandResult drained = Fleetctl({"drain", "host", "server3"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  // The drain's event makes the watch ask again; the list changed, so it is printed again.
  header = (*watch)->WaitForLine("# hosts at ");
  ASSERT_TRUE(header.ok()) << header.status() << (*watch)->output();
  absl::StatusOr<std::string> after = (*watch)->WaitForLine("server3 ");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(*after, HasSubstr("drained"));

  // SIGTERM (as Ctrl-C's SIGINT) ends the watch cleanly.
  absl::StatusOr<int> code = (*watch)->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*watch)->Stderr();
  EXPECT_EQ((*watch)->Stderr(), "");
}

// Plaintext is never silent: fleetd warns at start and `fleetctl health` shows it.
TEST_F(FleetdFleetctlTest, AnInsecureFleetdSaysSoInItsLogAndInHealth) {
  StartFleetd({"--inventory", kGen1});
  CommandResult health = Fleetctl({"health"});
  ASSERT_EQ(health.exit_code, 0) << health.err;
  EXPECT_THAT(
      health.out,
      ContainsRegex("security +degraded +INSECURE: plaintext gRPC \\(fleetd --insecure\\)"));
  EXPECT_THAT(fleetd_->Stderr(), HasSubstr("--insecure: plaintext gRPC on "));
}

TEST_F(FleetdFleetctlTest, ColourOnlyWhenAskedThroughAPipe) {
  StartFleetd({"--inventory", kGen1});
  // RunCommand reads through a pipe: --color=auto sees no terminal.
  CommandResult piped = Fleetctl({"health"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_THAT(piped.out, HasSubstr("store"));
  EXPECT_THAT(piped.out, Not(HasSubstr("\x1b[")));
  CommandResult forced = Fleetctl({"health", "--color=always"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(forced.out, HasSubstr("\x1b[32mok\x1b[0m"));
  CommandResult bad = Fleetctl({"health", "--color=rainbow"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("unknown --color 'rainbow'; accepted: auto, always, never"));
}

TEST_F(FleetdFleetctlTest, TablesShowAgesAndJsonKeepsTimestamps) {
  StartFleetd({"--inventory", kGen1});
  CommandResult table = Fleetctl({"get", "events", "--limit", "1"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("SEQ  AGE "));
  EXPECT_THAT(table.out, Not(::testing::ContainsRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T")))
      << "no RFC 3339 time in the table";
  CommandResult json = Fleetctl({"get", "events", "--limit", "1", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"time\": \""));
  CommandResult yaml = Fleetctl({"get", "events", "--limit", "1", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, ::testing::ContainsRegex("\n    time: [0-9]{4}-[0-9]{2}-[0-9]{2}T"));
  CommandResult xml = Fleetctl({"get", "events", "-o", "xml"});
  EXPECT_EQ(xml.exit_code, 2);
  EXPECT_THAT(xml.err, HasSubstr("unknown output format 'xml'; formats: table, json, yaml"));
}

// The shell's path, or "" when it is not installed. (RunCommand does not search $PATH.)
std::string InstalledShell(const std::string& name) {
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/local/bin/"}) {
    if (std::filesystem::exists(dir + name)) return dir + name;
  }
  return "";
}

// Saves `fleetctl completion NAME` in `dir` and checks that the shell at `shell` reads it
// (`-n`: parse only); returns its path.
std::string SaveCompletion(const std::string& shell, const std::string& name,
                           const std::string& dir) {
  CommandResult script = RunCommand({BinaryPath("fleetctl"), "completion", name});
  EXPECT_EQ(script.exit_code, 0) << script.err;
  const std::string path = dir + "/fleetctl." + name;
  std::ofstream(path) << script.out;
  CommandResult syntax = RunCommand({shell, "-n", path});
  EXPECT_EQ(syntax.exit_code, 0) << name << ": " << syntax.err;
  return path;
}

TEST_F(FleetdFleetctlTest, BashCompletionOffersTheRealVerbsKindsAndValues) {
  const std::string bash = InstalledShell("bash");
  ASSERT_FALSE(bash.empty());
  const std::string path = SaveCompletion(bash, "bash", state_dir_);

  // As bash would call it on TAB: the words so far, the index of the one being completed.
  const std::string complete =
      "complete -p fleetctl\n"
      "offer() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); _fleetctl;\n"
      "  echo \"[$*]: ${COMPREPLY[*]}\"; }\n"
      "offer fleetctl ''\n"
      "offer fleetctl get ''\n"
      "offer fleetctl --server x:1 get al\n"
      "offer fleetctl get -o ''\n"
      "offer fleetctl drain ''\n"
      "offer fleetctl get hosts --w\n"
      "offer fleetctl config ''\n";
  CommandResult offered = RunCommand({bash, "-c", absl::StrCat("source ", path, "\n", complete)});
  ASSERT_EQ(offered.exit_code, 0) << offered.err;
  EXPECT_THAT(offered.out, HasSubstr("complete -F _fleetctl fleetctl\n"));
  EXPECT_THAT(
      offered.out,
      HasSubstr(
          "[fleetctl ]: get describe apply diff topology allocation delete drain "
          "undrain device what-if reconcile events link health version config certs completion "
          "help\n"));
  EXPECT_THAT(offered.out, HasSubstr("[fleetctl get ]: switches ports hosts agents devices onics "
                                     "trunks circuits allocations events\n"));
  EXPECT_THAT(offered.out, HasSubstr("[fleetctl --server x:1 get al]: allocations\n"));
  EXPECT_THAT(offered.out, HasSubstr("[fleetctl get -o ]: table json yaml dot\n"));
  EXPECT_THAT(offered.out, HasSubstr("[fleetctl drain ]: port onic host\n"));
  EXPECT_THAT(offered.out, HasSubstr("[fleetctl get hosts --w]: --watch\n"));
  EXPECT_THAT(offered.out,
              HasSubstr("[fleetctl config ]: view get-contexts use-context set-context\n"));
}

TEST_F(FleetdFleetctlTest, ZshCompletionIsValidAndOffersTheRealKinds) {
  const std::string zsh = InstalledShell("zsh");
  if (zsh.empty()) GTEST_SKIP() << "zsh is not installed; the zsh completion script is untested";
  const std::string path = SaveCompletion(zsh, "zsh", state_dir_);
  // Without compinit, stand-ins for zsh's completion builtins print what would be offered.
  const std::string complete =
      "compadd() { [[ $1 == -- ]] && shift; print -r -- \"$@\"; }\n"
      "_describe() { local -a pairs; pairs=(\"${(@P)${@[-1]}}\"); print -r -- "
      "\"${pairs[@]%%:*}\"; }\n"
      "compdef() { print -r -- \"compdef $*\"; }\n";
  CommandResult offered =
      RunCommand({zsh, "-f", "-c",
                  absl::StrCat(complete, "source ", path,
                               "\nwords=(fleetctl get ''); CURRENT=3; _fleetctl\n"
                               "words=(fleetctl ''); CURRENT=2; _fleetctl\n")});
  ASSERT_EQ(offered.exit_code, 0) << offered.err;
  EXPECT_THAT(offered.out, HasSubstr("compdef _fleetctl fleetctl\n"));
  EXPECT_THAT(offered.out, HasSubstr("switches ports hosts agents devices onics trunks circuits "
                                     "allocations events\n"));
  EXPECT_THAT(offered.out, HasSubstr("get describe apply diff topology"));
}

TEST_F(FleetdFleetctlTest, UnreachableServerIsAClearError) {
  grpc_address_ = "127.0.0.1:1";
  CommandResult result = Fleetctl({"--timeout", "2", "get", "switches"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("UNAVAILABLE"));
}

TEST_F(FleetdFleetctlTest, SigtermStopsGracefullyAndStateSurvivesARestart) {
  StartFleetd({"--inventory", kGen1});
  absl::StatusOr<std::string> metrics = testing::HttpGet(metrics_address_, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("fleet_build_info"));
  absl::StatusOr<int> code = fleetd_->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << fleetd_->Stderr();
  EXPECT_THAT(fleetd_->Stderr(), HasSubstr("stopped"));

  StartFleetd();  // No inventory this time: everything comes from the state directory.
  CommandResult switches = Fleetctl({"get", "switches"});
  ASSERT_EQ(switches.exit_code, 0) << switches.err;
  EXPECT_THAT(switches.out, HasSubstr("ocs1"));
  EXPECT_THAT(switches.out, HasSubstr("384x384"));
}

TEST_F(FleetdFleetctlTest, ConfigFileIsReadAndFlagsOverrideIt) {
  const std::string elsewhere = testing::FreshDirectory("config_state");
  const std::string config =
      WriteFile("fleetd.yaml", "state_dir: " + elsewhere + "\ngrpc_port: 1\nlog_level: warning\n");
  // The config's port 1 would fail; the flags' port 0 wins. The config's state dir is used.
  absl::StatusOr<std::unique_ptr<Daemon>> started =
      Daemon::Start({BinaryPath("fleetd"), "--insecure", "--config", config, "--grpc-port", "0",
                     "--metrics-port", "0", "--inventory", kGen1});
  ASSERT_TRUE(started.ok());
  fleetd_ = std::move(*started);
  absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ");
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  EXPECT_TRUE(std::filesystem::exists(elsewhere + "/fleet.db"));
  EXPECT_FALSE(std::filesystem::exists(state_dir_ + "/fleet.db"));
}

TEST_F(FleetdFleetctlTest, BadStartsFailWithTheReason) {
  CommandResult bad_flag = RunCommand({BinaryPath("fleetd"), "--grpc-prot", "0"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_THAT(bad_flag.err, HasSubstr("unknown flag --grpc-prot"));

  const std::string broken = WriteFile("dup.yaml", "hosts:\n  - {name: a}\n  - {name: a}\n");
  CommandResult bad_inventory =
      RunCommand({BinaryPath("fleetd"), "--insecure", "--state-dir", state_dir_, "--grpc-port", "0",
                  "--metrics-port", "0", "--inventory", broken});
  EXPECT_EQ(bad_inventory.exit_code, 1);
  EXPECT_THAT(bad_inventory.err, HasSubstr("duplicate host id 'a'"));

  CommandResult help = RunCommand({BinaryPath("fleetd"), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--inventory"));
}

}  // namespace
}  // namespace fleet
