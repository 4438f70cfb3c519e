#include "controller/engine/link_trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "testing/fake_clock.h"
#include "tests/engine/gen1_store.h"

namespace fleet::engine {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;

// Agents that answer as the commands are handed over, as `answer` says (OK by default).
class ScriptedAgents : public agent_registry::CommandSender {
 public:
  std::unique_ptr<agent_registry::SentCommands> Send(
      std::vector<agent_registry::AddressedCommand> commands, absl::Time) override {
    std::vector<absl::StatusOr<v1::CommandResult>> results;
    for (const agent_registry::AddressedCommand& c : commands) {
      sent.push_back(c.command);
      results.push_back(answer(c.command));
    }
    return std::make_unique<agent_registry::AnsweredCommands>(std::move(results));
  }
  std::vector<absl::StatusOr<v1::CommandResult>> Await(
      std::unique_ptr<agent_registry::SentCommands> sent) override {
    return static_cast<agent_registry::AnsweredCommands&>(*sent).results;
  }
  bool HasOwner(const std::string& serial) override { return owners.contains(serial); }
  bool KnownQuiesced(const std::string& serial, uint32_t port) override {
    return quiesced.contains({serial, port});
  }
  bool ArmsRetrains(const std::string& serial) override { return arming.contains(serial); }

  std::set<std::string> owners = {"FLT-GPU1-N0", "FLT-GPU2-N0"};
  std::set<std::pair<std::string, uint32_t>> quiesced;
  std::set<std::string> arming;
  std::function<absl::StatusOr<v1::CommandResult>(const v1::Command&)> answer =
      [](const v1::Command&) { return v1::CommandResult(); };
  std::vector<v1::Command> sent;
};

v1::Circuit Between(const std::string& id, const std::string& src, const std::string& dst) {
  v1::Circuit c;
  c.set_id(id);
  c.mutable_source()->set_onic(src);
  c.mutable_source()->set_port(1);
  c.mutable_destination()->set_onic(dst);
  c.mutable_destination()->set_port(1);
  return c;
}

class LinkTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenGen1Store(&clock_, &store_));
    ctx_ = std::make_unique<EngineContext>(EngineContext{options_, store_.get(), &agents_, &clock_,
                                                         metrics::ControllerMetrics::Discarded()});
    inventory_ = std::make_unique<InventoryCache>(store_.get());
    trainer_ = std::make_unique<LinkTrainer>(*ctx_, inventory_.get());
  }
  std::vector<std::string> Events() {
    std::vector<std::string> out;
    const std::vector<v1::Event> events = store_->ListEvents({0, 100, "", ""}).value();
    for (const v1::Event& e : events) {
      out.push_back(e.kind() + ": " + e.message());
    }
    return out;
  }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  ScriptedAgents agents_;
  EngineOptions options_;
  std::unique_ptr<EngineContext> ctx_;
  std::unique_ptr<InventoryCache> inventory_;
  std::unique_ptr<LinkTrainer> trainer_;
};

TEST_F(LinkTrainerTest, QuiesceSendsOnlyWhatIsNeededAndSaysWhatItSkipped) {
  agents_.quiesced = {{"FLT-GPU1-N0", 1}};
  agents_.owners = {"FLT-GPU1-N0", "FLT-GPU2-N0"};
  int meanwhile = 0;
  // gpu1-n0/1 is quiesced already; gpu2-n0/1 is not; gpu3-n0 has no agent.
  ASSERT_TRUE(
      trainer_
          ->Quiesce({Between("c1", "gpu1-n0", "gpu2-n0"), Between("c2", "gpu3-n0", "gpu1-n0")},
                    "a-1", [&] { ++meanwhile; })
          .ok());
  ASSERT_THAT(agents_.sent, SizeIs(1));
  EXPECT_EQ(agents_.sent[0].quiesce().onic_serial(), "FLT-GPU2-N0");
  EXPECT_EQ(agents_.sent[0].quiesce().port(), 1u);
  EXPECT_EQ(meanwhile, 1);
  EXPECT_THAT(Events(), Contains(HasSubstr("allocation.quiesce_skipped: allocation a-1: no "
                                           "connected agent to quiesce gpu3-n0/1")));
  // Nothing to send: `meanwhile` does not run.
  agents_.quiesced.insert({"FLT-GPU2-N0", 1});
  ASSERT_TRUE(
      trainer_->Quiesce({Between("c1", "gpu1-n0", "gpu2-n0")}, "a-1", [&] { ++meanwhile; }).ok());
  EXPECT_EQ(meanwhile, 1);
}

TEST_F(LinkTrainerTest, AQuiesceTheAgentRefusesNamesThePort) {
  agents_.answer = [](const v1::Command&) {
    v1::CommandResult r;
    r.set_code(9);
    r.set_message("port busy");
    return r;
  };
  const absl::Status s = trainer_->Quiesce({Between("c1", "gpu1-n0", "gpu2-n0")}, "a-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("refused to quiesce O-NIC port gpu1-n0/1: port busy"));
}

TEST_F(LinkTrainerTest, ARetrainGoesToTheReceivingEndNamingTheSenderAsPeer) {
  agents_.owners = {"FLT-GPU2-N0"};
  agents_.answer = [](const v1::Command& c) {
    v1::CommandResult r;
    if (c.retrain().onic_serial() == "FLT-GPU1-N0") {
      r.set_code(4);
      r.set_message("no light");
    }
    return r;
  };
  const LinkTrainer::Failures failed =
      trainer_->Retrain({Between("c1", "gpu1-n0", "gpu2-n0"), Between("c2", "gpu2-n0", "gpu1-n0")},
                        /*check_first=*/false);
  ASSERT_THAT(agents_.sent, SizeIs(1));
  const v1::RetrainPort& retrain = agents_.sent[0].retrain();
  EXPECT_EQ(retrain.onic_serial(), "FLT-GPU2-N0");
  EXPECT_EQ(retrain.port(), 1u);
  EXPECT_EQ(retrain.expected_peer().onic_serial(), "FLT-GPU1-N0");
  EXPECT_EQ(retrain.expected_peer().port(), 1u);
  EXPECT_FALSE(retrain.has_await_light());
  // c2's receiving end has no agent.
  EXPECT_THAT(failed.why, ElementsAre(Pair("c2", HasSubstr("link gpu2-n0/1 -> gpu1-n0/1: no "
                                                           "connected agent for O-NIC gpu1-n0"))));
  // Reaching no agent is told apart from a link that did not train.
  EXPECT_THAT(failed.no_agent, ElementsAre("c2"));
}

// A host's O-NIC port enumerates the device at the far end of its link: its retrain carries
// that device's PCIe identity from inventory, so a pcie-sysfs agent can check what appeared. A
// device's own O-NIC enumerates nothing of the host: its retrain carries none.
TEST_F(LinkTrainerTest, AHostsRetrainCarriesThePcieIdentityOfTheDeviceItAttaches) {
  v1::Inventory site = inventory::ReadInventoryFile(std::string(FLEET_SOURCE_DIR) +
                                                    "/deploy/inventory/fleet-gen1.yaml")
                           .value();
  for (v1::Device& d : *site.mutable_devices()) {
    if (d.id() != "gpu1") continue;
    d.mutable_pcie()->set_vendor(0x10de);
    d.mutable_pcie()->set_device(0x20b5);
    d.mutable_pcie()->set_dsn(0xffee000000000001ULL);  // The top bit set: kept whole.
  }
  inventory::InventoryApplier applier(store_.get());
  ASSERT_TRUE(applier.Apply(site, {}, "operator:test").ok());
  agents_.owners = {"FLT-S1C0-N0", "FLT-GPU1-N0"};

  trainer_->Retrain({Between("c1", "gpu1-n0", "s1c0-n0"), Between("c2", "s1c0-n0", "gpu1-n0")},
                    /*check_first=*/false);
  ASSERT_THAT(agents_.sent, SizeIs(2));
  const v1::PeerIdentity& at_host = agents_.sent[0].retrain().expected_peer();
  EXPECT_EQ(agents_.sent[0].retrain().onic_serial(), "FLT-S1C0-N0");
  EXPECT_EQ(at_host.onic_serial(), "FLT-GPU1-N0");
  EXPECT_EQ(at_host.pcie_vendor_id(), 0x10deu);
  EXPECT_EQ(at_host.pcie_device_id(), 0x20b5u);
  EXPECT_EQ(at_host.device_serial_number(), 0xffee000000000001ULL);
  const v1::PeerIdentity& at_gpu = agents_.sent[1].retrain().expected_peer();
  EXPECT_EQ(at_gpu.onic_serial(), "FLT-S1C0-N0");
  EXPECT_EQ(at_gpu.pcie_vendor_id(), 0u);
  EXPECT_EQ(at_gpu.device_serial_number(), 0u);
}

TEST_F(LinkTrainerTest, ALinkThatFailsWithNoAgentAtItsSendingEndSaysNothingOfTheReceiver) {
  agents_.owners = {"FLT-GPU2-N0"};  // gpu1-n0's agent is away: its light may be out.
  agents_.answer = [](const v1::Command&) {
    v1::CommandResult r;
    r.set_code(4);
    r.set_message("no light");
    return r;
  };
  const LinkTrainer::Failures failed =
      trainer_->Retrain({Between("c1", "gpu1-n0", "gpu2-n0")}, /*check_first=*/false);
  EXPECT_THAT(failed.why, ElementsAre(Pair("c1", HasSubstr("no light"))));
  EXPECT_THAT(failed.no_agent, ElementsAre("c1"));
  // Both agents there: the receiver's failure is its own.
  agents_.owners = {"FLT-GPU1-N0", "FLT-GPU2-N0"};
  EXPECT_THAT(trainer_->Retrain({Between("c1", "gpu1-n0", "gpu2-n0")}, false).no_agent, IsEmpty());
}

TEST_F(LinkTrainerTest, ALinkUpWithItsExpectedPeerIsNotRetrainedWhenCheckedFirst) {
  agents_.answer = [](const v1::Command& c) {
    v1::CommandResult r;
    if (c.has_read_port() && c.read_port().onic_serial() == "FLT-GPU2-N0") {
      r.mutable_link()->set_status(v1::LINK_STATUS_UP);
      r.mutable_link()->set_peer_seen("FLT-GPU1-N0/1");
    }
    return r;
  };
  const LinkTrainer::Failures failed =
      trainer_->Retrain({Between("c1", "gpu1-n0", "gpu2-n0"), Between("c2", "gpu2-n0", "gpu1-n0")},
                        /*check_first=*/true);
  EXPECT_THAT(failed.why, IsEmpty());
  std::vector<std::string> retrained;
  for (const v1::Command& c : agents_.sent) {
    if (c.has_retrain()) retrained.push_back(c.retrain().onic_serial());
  }
  EXPECT_THAT(retrained, ElementsAre("FLT-GPU1-N0"));
}

TEST_F(LinkTrainerTest, OnlyAgentsThatArmRetrainsGetThemBeforeTheSwitchMoves) {
  agents_.arming = {"FLT-GPU2-N0"};
  const v1::Circuit to_arming = Between("c1", "gpu1-n0", "gpu2-n0");
  const v1::Circuit to_other = Between("c2", "gpu2-n0", "gpu1-n0");
  std::vector<const v1::Circuit*> unarmed;
  LinkTrainer::Training armed =
      trainer_->StartRetrain({&to_arming, &to_other}, /*armed=*/true, &unarmed);
  EXPECT_THAT(unarmed, ElementsAre(&to_other));
  ASSERT_THAT(agents_.sent, SizeIs(1));
  EXPECT_TRUE(agents_.sent[0].retrain().has_await_light());
  LinkTrainer::Failures failed;
  trainer_->FinishRetrain(std::move(armed), failed);
  EXPECT_THAT(failed.why, IsEmpty());
  // The switch was not programmed: the armed port is quiesced.
  LinkTrainer::Training again = trainer_->StartRetrain({&to_arming}, /*armed=*/true);
  trainer_->Disarm(std::move(again));
  EXPECT_TRUE(agents_.sent.back().has_quiesce());
  EXPECT_EQ(agents_.sent.back().quiesce().onic_serial(), "FLT-GPU2-N0");
}

}  // namespace
}  // namespace fleet::engine
