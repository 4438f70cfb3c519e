// SwitchRegistry: drivers built by the factory registered for each switch's protocol.
#include "controller/switch_registry/switch_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

#include "testing/fake_optical_switch.h"

namespace fleet::switch_registry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Switch Switch(const std::string& id, v1::SwitchProtocol protocol, const std::string& address) {
  v1::Switch sw;
  sw.set_id(id);
  sw.set_protocol(protocol);
  sw.set_address(address);
  sw.set_ingress_ports(8);
  sw.set_egress_ports(8);
  return sw;
}

class SwitchRegistryTest : public ::testing::Test {
 protected:
  SwitchRegistryTest()
      : registry_({{"ocs1", {"admin", "root"}}, {"ocs2", {"admin", "root"}}}, "creds.yaml", nullptr,
                  &commit_point_) {
    registry_.RegisterDriver(v1::SWITCH_PROTOCOL_TL1, Factory("tl1"));
  }

  // A factory building fake switches, recording "NAME:SWITCH@ADDRESS as USER" for each.
  SwitchRegistry::DriverFactory Factory(const std::string& name) {
    return [this, name](const v1::Switch& sw, const SwitchCredentials& login,
                        const switch_adapters::ChangeGate& before_change)
               -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
      built_.push_back(name + ":" + sw.id() + "@" + sw.address() + " as " + login.user);
      last_gate_ = before_change;
      auto fake = std::make_unique<fleet::testing::FakeOpticalSwitch>(8, 8);
      last_built_ = fake.get();
      return fake;
    };
  }

  std::vector<std::string> built_;
  fleet::testing::FakeOpticalSwitch* last_built_ = nullptr;
  switch_adapters::ChangeGate last_gate_;  // The one handed to the last driver built.
  CommitPoint commit_point_;               // No fence unless a test sets one.
  SwitchRegistry registry_;
};

TEST_F(SwitchRegistryTest, EachSwitchGetsTheDriverOfItsProtocolBuiltOnceUntilItsAddressChanges) {
  registry_.RegisterDriver(v1::SWITCH_PROTOCOL_REST, Factory("rest"));
  const v1::Switch ocs1 = Switch("ocs1", v1::SWITCH_PROTOCOL_TL1, "192.0.2.10");
  absl::StatusOr<switch_adapters::OpticalSwitch*> first = registry_.Driver(ocs1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*registry_.Driver(ocs1), *first);
  ASSERT_TRUE(registry_.Driver(Switch("ocs2", v1::SWITCH_PROTOCOL_REST, "192.0.2.11")).ok());
  ASSERT_TRUE(registry_.Driver(Switch("ocs1", v1::SWITCH_PROTOCOL_TL1, "192.0.2.12")).ok());
  EXPECT_THAT(built_, ElementsAre("tl1:ocs1@192.0.2.10 as admin", "rest:ocs2@192.0.2.11 as admin",
                                  "tl1:ocs1@192.0.2.12 as admin"));
}

// A fenced commit point (a replica that does not lead) lets no command that changes a switch
// through its driver, rollbacks and shutters included; reads pass.
TEST_F(SwitchRegistryTest, AFencedCommitPointSendsTheSwitchNoChangeButLetsReadsThrough) {
  absl::StatusOr<switch_adapters::OpticalSwitch*> driver =
      registry_.Driver(Switch("ocs1", v1::SWITCH_PROTOCOL_TL1, "192.0.2.10"));
  ASSERT_TRUE(driver.ok()) << driver.status();
  switch_adapters::CrossConnectBatch connect;
  connect.add = {{1, 9}};
  ASSERT_TRUE((*driver)->Apply(connect).status.ok());
  std::vector<Effect> asked;
  commit_point_.SetFence([&asked](Effect effect) {
    asked.push_back(effect);
    return absl::UnavailableError("not the leader");
  });
  switch_adapters::CrossConnectBatch change;
  change.remove = {{1, 9}};
  change.add = {{2, 10}};
  switch_adapters::ApplyResult refused = (*driver)->Apply(change);
  EXPECT_EQ(refused.status, absl::UnavailableError("not the leader"));
  EXPECT_TRUE(refused.added.empty() && refused.removed.empty());
  EXPECT_EQ((*driver)->SetShutters({1}, false), absl::UnavailableError("not the leader"));
  absl::StatusOr<std::vector<switch_adapters::CrossConnect>> held = (*driver)->ReadCrossConnects();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_THAT(*held, ElementsAre(switch_adapters::CrossConnect{1, 9}));
  EXPECT_EQ(last_built_->ReadCrossConnects().value(), *held);
  absl::StatusOr<std::vector<switch_adapters::PortState>> ports = (*driver)->ReadPorts();
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(ports->front().status, switch_adapters::PortStatus::kEnabled);  // Shutter still open.
  EXPECT_EQ(asked, std::vector<Effect>(2, Effect::kSwitchCommand));
  // The driver was handed the same fence, to ask before each command it writes (resends too).
  ASSERT_TRUE(last_gate_);
  const absl::Status gated = last_gate_();
  EXPECT_EQ(gated.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gated.message(), "not the leader");
  EXPECT_EQ(asked, std::vector<Effect>(3, Effect::kSwitchCommand));
  // Let in again, the same change goes out.
  commit_point_.SetFence({});
  ASSERT_TRUE((*driver)->Apply(change).status.ok());
  EXPECT_THAT(last_built_->ReadCrossConnects().value(),
              ElementsAre(switch_adapters::CrossConnect{2, 10}));
}

TEST_F(SwitchRegistryTest, ChangingHowARestSwitchIsReachedBuildsANewDriver) {
  registry_.RegisterDriver(v1::SWITCH_PROTOCOL_REST, Factory("rest"));
  v1::Switch ocs2 = Switch("ocs2", v1::SWITCH_PROTOCOL_REST, "192.0.2.11");
  ASSERT_TRUE(registry_.Driver(ocs2).ok());
  ocs2.set_ca_bundle("/etc/fleet/ocs2-ca.pem");
  ASSERT_TRUE(registry_.Driver(ocs2).ok());
  ASSERT_TRUE(registry_.Driver(ocs2).ok());
  ocs2.clear_ca_bundle();
  ocs2.set_insecure_http(true);
  ASSERT_TRUE(registry_.Driver(ocs2).ok());
  EXPECT_EQ(built_.size(), 3u);
}

TEST_F(SwitchRegistryTest, NoCredentialsNoDriverAndAFailedFactoryAreErrors) {
  absl::StatusOr<switch_adapters::OpticalSwitch*> unknown =
      registry_.Driver(Switch("ocs9", v1::SWITCH_PROTOCOL_TL1, "192.0.2.19"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("no credentials for switch ocs9 in creds.yaml"));

  absl::StatusOr<switch_adapters::OpticalSwitch*> rest =
      registry_.Driver(Switch("ocs2", v1::SWITCH_PROTOCOL_REST, "192.0.2.11"));
  EXPECT_EQ(rest.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rest.status().message(), HasSubstr("switch ocs2: no driver for protocol rest"));

  registry_.RegisterDriver(
      v1::SWITCH_PROTOCOL_REST,
      [](const v1::Switch&, const SwitchCredentials&, const switch_adapters::ChangeGate&)
          -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
        return absl::InvalidArgumentError("bad address");
      });
  rest = registry_.Driver(Switch("ocs2", v1::SWITCH_PROTOCOL_REST, "192.0.2.11"));
  EXPECT_EQ(rest.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(built_.empty());
}

TEST_F(SwitchRegistryTest, AProbeComparesTheSwitchWithItsInventorySize) {
  v1::Switch ocs1 = Switch("ocs1", v1::SWITCH_PROTOCOL_TL1, "192.0.2.10");
  SwitchRegistry::Probe probe = registry_.ProbeSwitch(ocs1);
  EXPECT_TRUE(probe.status.ok()) << probe.status;
  EXPECT_THAT(probe.description, HasSubstr("0 cross-connects"));
  ocs1.set_ingress_ports(16);
  probe = registry_.ProbeSwitch(ocs1);
  EXPECT_EQ(probe.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(probe.status.message(), HasSubstr("reports 8x8 ports but inventory says 16x8"));
}

// A switch that takes a connection and never answers, until let go.
class SilentSwitch : public fleet::testing::FakeOpticalSwitch {
 public:
  SilentSwitch(absl::Notification* answer, std::atomic<int>* asked)
      : FakeOpticalSwitch(8, 8), answer_(answer), asked_(asked) {}
  absl::StatusOr<switch_adapters::SwitchIdentity> Identity() override {
    ++*asked_;
    answer_->WaitForNotification();
    return FakeOpticalSwitch::Identity();
  }

 private:
  absl::Notification* answer_;
  std::atomic<int>* asked_;
};

// Lets a silent switch answer when the test ends, however it ends, so that no probe is left
// waiting on it when the registry joins its threads.
struct AnswerAtEnd {
  absl::Notification* answer;
  ~AnswerAtEnd() {
    if (!answer->HasBeenNotified()) answer->Notify();
  }
};

TEST_F(SwitchRegistryTest, ProbesAnswerInTimeNamingASwitchThatDoesNotAndNeverPileUp) {
  absl::Notification answer;
  std::atomic<int> silent_probes = 0;  // Identity() asked of the silent switch.
  SwitchRegistry registry({{"ocs1", {"admin", "root"}}, {"ocs2", {"admin", "root"}}}, "creds");
  AnswerAtEnd answer_at_end{&answer};
  registry.RegisterDriver(
      v1::SWITCH_PROTOCOL_TL1,
      [](const v1::Switch&, const SwitchCredentials&, const switch_adapters::ChangeGate&)
          -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
        return std::make_unique<fleet::testing::FakeOpticalSwitch>(8, 8);
      });
  registry.RegisterDriver(
      v1::SWITCH_PROTOCOL_REST,
      [&](const v1::Switch&, const SwitchCredentials&, const switch_adapters::ChangeGate&)
          -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
        return std::make_unique<SilentSwitch>(&answer, &silent_probes);
      });
  v1::Switch silent = Switch("ocs2", v1::SWITCH_PROTOCOL_REST, "192.0.2.11");
  silent.set_management_port(8443);
  const std::vector<v1::Switch> site = {Switch("ocs1", v1::SWITCH_PROTOCOL_TL1, "192.0.2.10"),
                                        silent};
  for (int round = 0; round < 3; ++round) {
    std::vector<SwitchRegistry::Probe> probes =
        registry.ProbeSwitches(site, absl::Milliseconds(50));
    ASSERT_EQ(probes.size(), 2u);
    EXPECT_TRUE(probes[0].status.ok()) << probes[0].status;
    EXPECT_TRUE(probes[1].unreachable);
    EXPECT_EQ(probes[1].status.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(probes[1].status.message(),
              "unreachable at 192.0.2.11:8443 (rest): no answer within 50ms");
  }
  // One probe waits on the silent switch however often it is asked...
  for (int i = 0; i < 1000 && silent_probes.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(silent_probes.load(), 1);
  // ... at one address: the switch reached at another gets a probe of its own.
  v1::Switch moved = silent;
  moved.set_address("192.0.2.12");
  SwitchRegistry::Probe probe = registry.ProbeSwitches({moved}, absl::Milliseconds(50)).front();
  EXPECT_EQ(probe.status.message(), "unreachable at 192.0.2.12:8443 (rest): no answer within 50ms");
  for (int i = 0; i < 1000 && silent_probes.load() < 2; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(silent_probes.load(), 2);
  // Once it answers, the next call reports it.
  answer.Notify();
  std::vector<SwitchRegistry::Probe> probes = registry.ProbeSwitches(site, absl::Seconds(30));
  EXPECT_TRUE(probes[1].status.ok()) << probes[1].status;
  probes = registry.ProbeSwitches(site, absl::Seconds(30));
  EXPECT_TRUE(probes[1].status.ok()) << probes[1].status;
}

TEST_F(SwitchRegistryTest, AnUnreachableSwitchIsNamedWithItsAddressAndTheError) {
  fleet::testing::FakeOpticalSwitch* fake = nullptr;
  SwitchRegistry registry({{"ocs1", {"admin", "root"}}}, "creds");
  registry.RegisterDriver(
      v1::SWITCH_PROTOCOL_TL1,
      [&](const v1::Switch&, const SwitchCredentials&, const switch_adapters::ChangeGate&)
          -> absl::StatusOr<std::unique_ptr<switch_adapters::OpticalSwitch>> {
        auto sw = std::make_unique<fleet::testing::FakeOpticalSwitch>(8, 8);
        fake = sw.get();
        return sw;
      });
  const v1::Switch ocs1 = Switch("ocs1", v1::SWITCH_PROTOCOL_TL1, "192.0.2.10");
  ASSERT_TRUE(registry.ProbeSwitch(ocs1).status.ok());
  fake->SetUnreachable(absl::UnavailableError("connect: Connection refused"));
  SwitchRegistry::Probe probe = registry.ProbeSwitches({ocs1}, absl::Seconds(30)).front();
  EXPECT_TRUE(probe.unreachable);
  EXPECT_EQ(probe.status.message(), "unreachable at 192.0.2.10 (tl1): connect: Connection refused");
  fake->SetUnreachable(absl::PermissionDeniedError("login refused"));
  probe = registry.ProbeSwitch(ocs1);
  EXPECT_FALSE(probe.unreachable);
  EXPECT_EQ(probe.status.code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace fleet::switch_registry
