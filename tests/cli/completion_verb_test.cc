// `fleetctl completion`: the scripts follow the parser's own verbs, kinds and flags.
#include "tests/cli/fleetctl_fixture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fleet::cli {
namespace {

using ::testing::HasSubstr;

TEST_F(FleetctlTest, CompletionScriptsOfferTheParsersVerbsKindsAndFlags) {
  const CommandLineSpec spec = FleetctlCommandLine();
  for (const char* shell : {"bash", "zsh"}) {
    ASSERT_EQ(Run({"completion", shell}), kExitOk) << err();
    const std::string script = out();
    for (const VerbSpec& verb : spec.verbs) {
      EXPECT_THAT(script, HasSubstr(verb.name)) << shell;
      for (const FlagSpec& flag : verb.flags) {
        EXPECT_THAT(script, HasSubstr(" --" + flag.name + " ")) << shell << " " << verb.name;
      }
    }
  }
  // The spec is the parser's: every get kind, and each verb's flags as its help shows them.
  const VerbSpec* get = nullptr;
  for (const VerbSpec& verb : spec.verbs) {
    if (verb.name == "get") get = &verb;
  }
  ASSERT_NE(get, nullptr);
  EXPECT_THAT(get->words,
              ::testing::ElementsAre("switches", "ports", "hosts", "agents", "devices", "onics",
                                     "trunks", "circuits", "allocations", "events"));
  ASSERT_EQ(Run({"get", "--help"}), kExitOk);
  const std::string help = out();
  for (const FlagSpec& flag : get->flags) EXPECT_THAT(help, HasSubstr("--" + flag.name));
  for (const VerbSpec& verb : spec.verbs) {
    if (verb.name == "help") continue;
    ASSERT_EQ(Run({verb.name, "--help"}), kExitOk) << verb.name;
  }
}

TEST_F(FleetctlTest, CompletionArgumentsAreChecked) {
  EXPECT_EQ(Run({"completion", "fish"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("unknown shell 'fish'; shells: bash, zsh"));
  EXPECT_EQ(Run({"completion"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("completion needs one shell (bash, zsh), got nothing"));
  EXPECT_EQ(Run({"completion", "bash", "-o", "json"}), kExitUsage);
  EXPECT_THAT(err(), HasSubstr("-o applies to commands that print objects"));
}

}  // namespace
}  // namespace fleet::cli
