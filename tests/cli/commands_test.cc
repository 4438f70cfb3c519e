// fleetctl's command line as a whole: global flags, help, dispatch, colour, the principal.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST_F(FleetctlTest, SendsOperatorPrincipal) {
  ASSERT_EQ(Run({"get", "switches"}), kExitOk) << err();
  EXPECT_EQ(inventory_.principal(), "operator:tester");
}

TEST_F(FleetctlTest, GlobalFlagsAreAcceptedBeforeTheVerb) {
  EXPECT_EQ(Run({"--server", address_, "-o", "json", "get", "switches"}), kExitOk) << err();
  EXPECT_EQ(connected_to_, address_);
  EXPECT_THAT(out(), HasSubstr("\"switches\""));
}

TEST_F(FleetctlTest, UnknownOutputFormatIsUsageError) {
  for (const char* verb : {"get", "describe", "health", "version", "events", "reconcile"}) {
    EXPECT_EQ(Run({verb, "-o", "xml"}), kExitUsage) << verb;
    EXPECT_THAT(err(), HasSubstr("unknown output format 'xml'; formats: table, json, yaml"));
  }
}

TEST_F(FleetctlTest, UnknownFlagIsUsageError) {
  EXPECT_EQ(Run({"get", "switches", "--colour"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --colour"));
}

TEST_F(FleetctlTest, UnknownFlagSuggestsTheNearestOfTheVerbsAndTheGlobalOnes) {
  EXPECT_EQ(Run({"get", "switches", "--colr=never"}), kExitUsage);
  EXPECT_EQ(err(),
            "error: unknown flag --colr=never (did you mean '--color'?)\n"
            "Run 'fleetctl get --help' for usage.\n");
  EXPECT_EQ(Run({"topology", "request", "-f", "x.yaml", "--dryrun"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown flag --dryrun (did you mean '--dry-run'?)\n"));
  EXPECT_TRUE(connected_to_.empty());
}

TEST_F(FleetctlTest, UnreachableServerFailsOtherVerbs) {
  std::string nowhere = "unix:" + ::testing::TempDir() + "/no-fleetd.sock";
  EXPECT_EQ(Run({"get", "hosts", "--server", nowhere}), kExitFailed);
  EXPECT_THAT(err(), StartsWith("error: UNAVAILABLE: "));
}

TEST_F(FleetctlTest, HelpListsEveryVerb) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"help"}}) {
    EXPECT_EQ(Run(args), kExitOk);
    for (const char* verb : {"get", "describe", "apply", "topology", "delete", "drain", "undrain",
                             "reconcile", "events", "link", "health", "version", "help"}) {
      EXPECT_THAT(out(), HasSubstr(std::string("\n  ") + verb + " ")) << verb;
    }
    EXPECT_THAT(out(), HasSubstr("--server"));
    EXPECT_TRUE(connected_to_.empty());
  }
}

TEST_F(FleetctlTest, VerbHelpShowsUsageKindsAndFlags) {
  EXPECT_EQ(Run({"get", "--help"}), kExitOk);
  EXPECT_THAT(out(), StartsWith("Usage: fleetctl get KIND [flags]\n"));
  EXPECT_THAT(out(), HasSubstr("  devices       --host, --kind"));
  EXPECT_THAT(out(), HasSubstr("--switch VALUE"));
  EXPECT_THAT(out(), HasSubstr("--timeout VALUE"));
  std::string get_help = out();
  EXPECT_EQ(Run({"help", "get"}), kExitOk);
  EXPECT_EQ(out(), get_help);
}

TEST_F(FleetctlTest, UnknownVerbIsUsageError) {
  EXPECT_EQ(Run({"frobnicate", "switches"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown command 'frobnicate'; commands: get, describe"));
  EXPECT_THAT(err(), HasSubstr("fleetctl --help"));
  // A slip of a verb gets the verb's name.
  EXPECT_EQ(Run({"gett", "switches"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown command 'gett' (did you mean 'get'?); commands: get, "));
  EXPECT_EQ(Run({"help", "descirbe"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown command 'descirbe' (did you mean 'describe'?)"));
}

TEST_F(FleetctlTest, TimeoutHelpSpeaksOfWaitOnlyWhereThereIsOne) {
  const std::string with_wait = "deadline of each RPC, in seconds; with --wait, of the whole wait";
  for (const char* verb : {"topology", "allocation"}) {
    EXPECT_EQ(Run({verb, "--help"}), kExitOk);
    EXPECT_THAT(out(), HasSubstr(with_wait)) << verb;
  }
  for (const char* verb : {"get", "health", "events", "drain"}) {
    EXPECT_EQ(Run({verb, "--help"}), kExitOk);
    EXPECT_THAT(out(), Not(HasSubstr("--wait"))) << verb;
    EXPECT_THAT(out(), HasSubstr("deadline of each RPC, in seconds (default 10)\n")) << verb;
  }
  EXPECT_EQ(Run({"--help"}), kExitOk);
  EXPECT_THAT(out(), HasSubstr(with_wait));
}

TEST_F(FleetctlTest, MissingVerbIsUsageError) {
  EXPECT_EQ(Run({}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("missing command"));
}

TEST_F(FleetctlTest, ColourOnlyOnATerminalUnlessForced) {
  const std::string green_ready = "\x1b[32mready\x1b[0m";
  // Not a terminal (a pipe, or NO_COLOR): no escape codes at all.
  EXPECT_EQ(Run({"get", "allocations"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("\x1b")));
  EXPECT_EQ(Run({"get", "allocations", "--color=always"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr(green_ready));

  env_.color_terminal = true;
  EXPECT_EQ(Run({"get", "allocations"}), kExitOk) << err();
  EXPECT_THAT(out(), HasSubstr(green_ready));
  EXPECT_EQ(Run({"get", "allocations", "--color", "never"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("\x1b")));
  // JSON is for programs: never coloured.
  EXPECT_EQ(Run({"get", "allocations", "-o", "json"}), kExitOk) << err();
  EXPECT_THAT(out(), Not(HasSubstr("\x1b")));
}

TEST_F(FleetctlTest, UnknownColorModeIsUsageError) {
  EXPECT_EQ(Run({"get", "switches", "--color=sometimes"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown --color 'sometimes'; accepted: auto, always, never"));
  EXPECT_TRUE(connected_to_.empty());
}

}  // namespace
}  // namespace fleet::cli
