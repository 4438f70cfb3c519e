// The emulated O-NIC backend against the real polatis-emu: light, shutters and wiring.
#include "onic_agent/emulated_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/notification.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet::onic_agent {
namespace {

using switch_adapters::CrossConnect;
using ::testing::HasSubstr;

class EmulatedBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<fleet::testing::Daemon>> emu =
        fleet::testing::Daemon::Start({fleet::testing::BinaryPath("polatis-emu"), "--size", "8x8",
                                       "--tl1-port", "0", "--rest-port", "0", "--switch-ms", "5"});
    ASSERT_TRUE(emu.ok()) << emu.status();
    emu_ = std::move(*emu);
    absl::StatusOr<std::string> tl1 = emu_->WaitForLine("tl1: ");
    absl::StatusOr<std::string> rest = emu_->WaitForLine("rest: ");
    ASSERT_TRUE(tl1.ok() && rest.ok());
    rest_ = *rest;
    const size_t colon = tl1->rfind(':');
    switch_ = polatis::NewPolatisSwitch({"emu",
                                         polatis::Protocol::kTl1,
                                         tl1->substr(0, colon),
                                         static_cast<uint16_t>(std::stoi(tl1->substr(colon + 1))),
                                         {"admin", "root"}});
    backend_ = NewBackend(absl::Milliseconds(10));
  }

  // Two O-NICs: A's ports on ingress 1, 2 / egress 9, 10; B's on 3, 4 / 11, 12.
  std::unique_ptr<EmulatedBackend> NewBackend(absl::Duration training_time) {
    EmulatedBackend::Options options;
    options.onics = {{"A", "0000:17:00.0", {1, 2}, {9, 10}},
                     {"B", "0000:3a:00.0", {3, 4}, {11, 12}}};
    options.training_time = training_time;
    options.light_wait = absl::Milliseconds(200);
    absl::StatusOr<std::unique_ptr<EmulatedBackend>> backend =
        EmulatedBackend::Create(options, NewHttpLightSimulator(rest_));
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *std::move(backend) : nullptr;
  }

  v1::PeerIdentity Peer(const std::string& serial, uint32_t port) {
    v1::PeerIdentity peer;
    peer.set_onic_serial(serial);
    peer.set_port(port);
    return peer;
  }

  absl::Time Deadline() { return absl::Now() + absl::Seconds(10); }

  std::unique_ptr<fleet::testing::Daemon> emu_;
  std::string rest_;
  std::unique_ptr<switch_adapters::OpticalSwitch> switch_;
  std::unique_ptr<EmulatedBackend> backend_;
};

TEST_F(EmulatedBackendTest, ACorrectCircuitTrains) {
  // A port 1 tx (ingress 1) → B port 1 rx (egress 11).
  ASSERT_TRUE(switch_->Apply({{}, {{1, 11}}}).status.ok());
  CommandOutcome outcome = backend_->Retrain("B", 1, Peer("A", 1), Deadline());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.link.status(), v1::LINK_STATUS_UP);
  EXPECT_EQ(outcome.link.peer_seen(), "A/1");
  EXPECT_NEAR(outcome.link.rx_power_dbm(), -1.5, 0.01);
  EXPECT_EQ(outcome.link.link_width(), 16u);
  // Reading it changes nothing and agrees.
  EXPECT_EQ(backend_->ReadPort("B", 1).link.status(), v1::LINK_STATUS_UP);
}

TEST_F(EmulatedBackendTest, AReceiverThatSeesItsPeerInItsOwnReadingDoesNotAskTheSimulator) {
  // A's two ports to B's two ports and back: four receivers retrain at once, five times.
  ASSERT_TRUE(switch_->Apply({{}, {{1, 11}, {2, 12}, {3, 9}, {4, 10}}}).status.ok());
  auto sim_requests = [&] { return fleet::testing::EmulatorCounter(rest_, "sim_requests"); };
  const std::vector<std::tuple<std::string, uint32_t, std::string, uint32_t>> links = {
      {"B", 1, "A", 1}, {"B", 2, "A", 2}, {"A", 1, "B", 1}, {"A", 2, "B", 2}};
  auto retrain_all = [&] {
    std::vector<CommandOutcome> outcomes(links.size());
    std::vector<std::thread> workers;
    for (size_t i = 0; i < links.size(); ++i) {
      workers.emplace_back([&, i] {
        const auto& [serial, port, peer, peer_port] = links[i];
        outcomes[i] = backend_->Retrain(serial, port, Peer(peer, peer_port), Deadline());
      });
    }
    for (std::thread& t : workers) t.join();
    for (size_t i = 0; i < links.size(); ++i) {
      ASSERT_TRUE(outcomes[i].status.ok()) << i << ": " << outcomes[i].status;
      EXPECT_EQ(outcomes[i].link.peer_seen(),
                absl::StrCat(std::get<2>(links[i]), "/", std::get<3>(links[i])));
    }
  };
  // The first round may ask: the copy of the light may not have caught up with the switch.
  retrain_all();
  // Until the copy's long poll has answered every change and waits again, the counter moves
  // by more than this read.
  int before = sim_requests();
  for (int settled = 0; settled < 3;) {
    const int now = sim_requests();
    settled = now - before == 1 ? settled + 1 : 0;
    before = now;
  }
  for (int round = 0; round < 5; ++round) retrain_all();
  // Every receiver saw its own peer in its copy: no request but the counters read.
  EXPECT_EQ(sim_requests() - before, 1);
}

TEST_F(EmulatedBackendTest, LightReadsThatArriveTogetherShareARequest) {
  ASSERT_TRUE(switch_->Apply({{}, {{1, 11}, {2, 12}, {3, 9}, {4, 10}}}).status.ok());
  std::unique_ptr<LightSimulator> simulator = NewHttpLightSimulator(rest_);
  auto sim_requests = [&] { return fleet::testing::EmulatorCounter(rest_, "sim_requests"); };
  const std::vector<std::pair<uint32_t, std::string>> reads = {
      {11, "A/1"}, {12, "A/2"}, {9, "B/1"}, {10, "B/2"}};
  constexpr int kRounds = 5;
  const int before = sim_requests();
  for (int round = 0; round < kRounds; ++round) {
    std::vector<absl::StatusOr<LightSimulator::Light>> lights(reads.size());
    std::vector<std::thread> readers;
    for (size_t i = 0; i < reads.size(); ++i) {
      readers.emplace_back([&, i] { lights[i] = simulator->ReadLight(reads[i].first); });
    }
    for (std::thread& t : readers) t.join();
    for (size_t i = 0; i < reads.size(); ++i) {
      ASSERT_TRUE(lights[i].ok()) << lights[i].status();
      EXPECT_EQ(lights[i]->signal, reads[i].second);
    }
  }
  // 20 reads in fewer requests: reads that came while one was out went together in the next
  // (the counters read is one more).
  const int sent = sim_requests() - before - 1;
  EXPECT_GE(sent, kRounds);
  EXPECT_LT(sent, kRounds * static_cast<int>(reads.size()));
}

TEST_F(EmulatedBackendTest, AnArmedWaitEndsWhenItsPeersLightArrivesAndNotForAnother) {
  ASSERT_TRUE(switch_->Apply({{}, {{2, 11}}}).status.ok());  // B/1 hears A/2: the old circuit.
  std::atomic<bool> cancelled{false};
  absl::StatusOr<absl::Time> other =
      backend_->AwaitLight("B", 1, Peer("A", 1), absl::Now() + absl::Milliseconds(50), cancelled);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDeadlineExceeded) << other.status();
  // Waits for A/`port`'s light at B/`port` on a thread of its own, returning once that
  // thread is about to wait: what ends the wait happens while it is under way.
  auto start_wait = [&](uint32_t port, absl::StatusOr<absl::Time>* outcome) {
    // Shared: the thread may still be inside Notify when this returns.
    auto waiting = std::make_shared<absl::Notification>();
    std::thread waiter([&, port, outcome, waiting] {
      waiting->Notify();
      *outcome = backend_->AwaitLight("B", port, Peer("A", port), Deadline(), cancelled);
    });
    waiting->WaitForNotification();
    return waiter;
  };
  absl::StatusOr<absl::Time> arrived = absl::UnknownError("not run");
  std::thread waiter = start_wait(1, &arrived);
  const absl::Time moved = absl::Now();
  ASSERT_TRUE(switch_->Apply({{{2, 11}}, {{1, 11}}}).status.ok());  // The new circuit.
  waiter.join();
  ASSERT_TRUE(arrived.ok()) << arrived.status();
  EXPECT_GE(*arrived, moved);  // Not the old circuit's light.
  EXPECT_LE(*arrived, absl::Now());
  // A wait for light that does not come ends when it is cancelled, not at its deadline.
  absl::StatusOr<absl::Time> stopped = absl::UnknownError("not run");
  std::thread dark = start_wait(2, &stopped);
  cancelled = true;
  dark.join();
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
}

// An armed O-NIC trains on signal detect: the training time runs from the light's arrival,
// however late the agent gets to its retrain, which then only judges the link.
TEST_F(EmulatedBackendTest, AnArmedPortTrainsFromItsLightsArrivalNotFromItsRetrain) {
  constexpr absl::Duration kTraining = absl::Milliseconds(200);
  std::unique_ptr<EmulatedBackend> backend = NewBackend(kTraining);
  ASSERT_NE(backend, nullptr);
  std::atomic<bool> cancelled{false};
  absl::StatusOr<absl::Time> arrived = absl::UnknownError("not run");
  absl::Notification waiting;
  std::thread waiter([&] {
    waiting.Notify();
    arrived = backend->AwaitLight("B", 1, Peer("A", 1), Deadline(), cancelled);
  });
  waiting.WaitForNotification();
  const absl::Time moved = absl::Now();
  ASSERT_TRUE(switch_->Apply({{}, {{1, 11}}}).status.ok());
  // The switch answers once the beam has settled, and the emulator says since when its
  // light has been at B/1: then, between the move and the answer.
  const absl::Time settled = absl::Now();
  absl::StatusOr<LightSimulator::Light> light = NewHttpLightSimulator(rest_)->ReadLight(11);
  ASSERT_TRUE(light.ok()) << light.status();
  EXPECT_GE(light->since, moved);
  EXPECT_LE(light->since, settled);
  waiter.join();
  ASSERT_TRUE(arrived.ok()) << arrived.status();
  // Armed before the light came, the port began training then; armed after it (a slow
  // thread), at the arming.
  EXPECT_GE(*arrived, light->since);
  // The agent gets to the retrain only once the training time has passed: trained already.
  absl::SleepFor(*arrived + kTraining - absl::Now());
  absl::Time start = absl::Now();
  CommandOutcome outcome = backend->Retrain("B", 1, Peer("A", 1), Deadline());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.link.status(), v1::LINK_STATUS_UP);
  EXPECT_LT(absl::Now() - start, kTraining);
  // A retrain not armed trains for the whole time from its start.
  start = absl::Now();
  outcome = backend->Retrain("B", 1, Peer("A", 1), Deadline());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_GE(absl::Now() - start, kTraining);
  // Armed when the light has long been there: training begins at the arming, not when the
  // light came, so the retrain that follows takes the whole training time.
  start = absl::Now();
  arrived = backend->AwaitLight("B", 1, Peer("A", 1), Deadline(), cancelled);
  ASSERT_TRUE(arrived.ok()) << arrived.status();
  EXPECT_GE(*arrived, start);
  outcome = backend->Retrain("B", 1, Peer("A", 1), Deadline());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_GE(absl::Now() - start, kTraining);
}

TEST_F(EmulatedBackendTest, AMissingCircuitIsNoLight) {
  CommandOutcome outcome = backend_->Retrain("B", 2, Peer("A", 2), Deadline());
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("no light"));
  EXPECT_EQ(outcome.link.status(), v1::LINK_STATUS_DOWN);
}

TEST_F(EmulatedBackendTest, TheWrongPeerIsAWiringErrorNamingWhatWasSeen) {
  // A port 2 (ingress 2) lands on B port 1's rx, where A port 1 was expected.
  ASSERT_TRUE(switch_->Apply({{}, {{2, 11}}}).status.ok());
  CommandOutcome outcome = backend_->Retrain("B", 1, Peer("A", 1), Deadline());
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("saw A/2, expected A/1"));
  EXPECT_EQ(outcome.link.status(), v1::LINK_STATUS_DOWN);
}

TEST_F(EmulatedBackendTest, AClosedShutterIsNoLight) {
  ASSERT_TRUE(switch_->Apply({{}, {{3, 9}}}).status.ok());
  ASSERT_TRUE(switch_->SetShutters({9}, false).ok());
  CommandOutcome outcome = backend_->Retrain("A", 1, Peer("B", 1), Deadline());
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("no light"));
  ASSERT_TRUE(switch_->SetShutters({9}, true).ok());
  EXPECT_TRUE(backend_->Retrain("A", 1, Peer("B", 1), Deadline()).status.ok());
}

TEST_F(EmulatedBackendTest, AnUpLinkThatLosesItsCircuitReadsDown) {
  ASSERT_TRUE(switch_->Apply({{}, {{4, 10}}}).status.ok());
  ASSERT_TRUE(backend_->Retrain("A", 2, Peer("B", 2), Deadline()).status.ok());
  ASSERT_TRUE(switch_->Apply({{{4, 10}}, {}}).status.ok());
  CommandOutcome read = backend_->ReadPort("A", 2);
  EXPECT_EQ(read.link.status(), v1::LINK_STATUS_DOWN);
  EXPECT_EQ(read.link.detail(), "no light");
}

TEST_F(EmulatedBackendTest, DiscoverQuiesceAndUnknownPorts) {
  absl::StatusOr<std::vector<v1::AgentOnic>> onics = backend_->Discover();
  ASSERT_TRUE(onics.ok());
  ASSERT_EQ(onics->size(), 2u);
  EXPECT_EQ((*onics)[1].pcie_address(), "0000:3a:00.0");
  EXPECT_EQ((*onics)[1].ports_size(), 2);
  CommandOutcome quiesced = backend_->Quiesce("A", 1, Deadline());
  ASSERT_TRUE(quiesced.status.ok());
  EXPECT_EQ(quiesced.link.status(), v1::LINK_STATUS_QUIESCED);
  EXPECT_EQ(backend_->ReadPort("Z", 1).status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend_->ReadPort("A", 3).status.code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fleet::onic_agent
