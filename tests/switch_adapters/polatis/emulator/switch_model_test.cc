// The emulator's switch model on its own: invariants, settling on a fleet::testing::FakeClock,
// light and power, faults, counters and the state file.
#include "switch_adapters/polatis/emulator/switch_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/fake_clock.h"
#include "tests/integration/subprocess.h"

namespace fleet::polatis_emu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

FaultUpdate DenyNext(int64_t n) {
  FaultUpdate update;
  update.deny_next = n;
  return update;
}

FaultUpdate FailBulkAfter(int64_t k) {
  FaultUpdate update;
  update.fail_bulk_after = std::optional<int64_t>(k);
  return update;
}

SwitchModelOptions SizeAndState(SwitchSize size, std::string state_file) {
  SwitchModelOptions options;
  options.size = size;
  options.state_file = std::move(state_file);
  return options;
}

class SwitchModelTest : public ::testing::Test {
 protected:
  // A 16x16 switch (ingress 1..16, egress 17..32) switching in 25 ms of fake time.
  std::unique_ptr<SwitchModel> Make(std::string state_file = "") {
    absl::StatusOr<std::unique_ptr<SwitchModel>> model =
        SwitchModel::Create({.size = {16, 16},
                             .switch_time = absl::Milliseconds(25),
                             .insertion_loss_db = 1.5,
                             .state_file = std::move(state_file)},
                            &clock_);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? std::move(*model) : nullptr;
  }

  fleet::testing::FakeClock clock_;
};

TEST(SwitchSizeTest, ParsesNxM) {
  absl::StatusOr<SwitchSize> size = ParseSwitchSize("384x384");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->ingress, 384);
  EXPECT_EQ(size->egress, 384);
  EXPECT_TRUE(size->IsIngress(384));
  EXPECT_TRUE(size->IsEgress(385));
  EXPECT_FALSE(size->IsEgress(769));
  EXPECT_EQ(ParseSwitchSize("8X4")->ToString(), "8x4");
  for (const char* bad : {"", "384", "0x4", "4x0", "x4", "4x", "axb", "4x4x4", "5000x1"}) {
    EXPECT_FALSE(ParseSwitchSize(bad).ok()) << bad;
  }
}

TEST(SwitchIdentityTest, SerialFollowsSid) {
  SwitchIdentity a = MakeSwitchIdentity({384, 384}, "A");
  EXPECT_EQ(a.manufacturer, "Polatis");
  EXPECT_EQ(a.model_name, "N-VST-384x384-EMU");
  EXPECT_EQ(a.serial_number, MakeSwitchIdentity({384, 384}, "A").serial_number);
  EXPECT_NE(a.serial_number, MakeSwitchIdentity({384, 384}, "B").serial_number);
}

TEST_F(SwitchModelTest, OneEgressPerIngressAndOneIngressPerEgress) {
  auto model = Make();
  ASSERT_TRUE(model->Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{1, 17}, CrossConnect{2, 18}));

  absl::StatusOr<ChangeResult> ingress_busy = model->Connect({{1, 19}}, ConnectMode::kRefuseInUse);
  EXPECT_EQ(ingress_busy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ingress_busy.status().message(), "Port in use: 1");
  absl::StatusOr<ChangeResult> egress_busy = model->Connect({{3, 18}}, ConnectMode::kRefuseInUse);
  EXPECT_EQ(egress_busy.status().message(), "Port in use: 18");

  // Re-entering an identical patch is accepted and changes nothing.
  absl::StatusOr<ChangeResult> again = model->Connect({{1, 17}}, ConnectMode::kRefuseInUse);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->changed, 0);
  EXPECT_EQ(again->settled_at, absl::InfinitePast());

  // A port twice in one batch is in use by the batch itself.
  EXPECT_EQ(model->Connect({{5, 20}, {6, 20}}, ConnectMode::kRefuseInUse).status().message(),
            "Port in use: 20");
  EXPECT_EQ(model->Connect({{5, 20}, {5, 21}}, ConnectMode::kReplace).status().message(),
            "Port in use: 5");
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{1, 17}, CrossConnect{2, 18}));
}

TEST_F(SwitchModelTest, PortsOutOfRangeOrOnTheWrongSideAreInvalid) {
  auto model = Make();
  for (CrossConnect bad : {CrossConnect{0, 17}, CrossConnect{17, 18}, CrossConnect{1, 16},
                           CrossConnect{1, 33}, CrossConnect{1000, 17}}) {
    absl::StatusOr<ChangeResult> result = model->Connect({bad}, ConnectMode::kRefuseInUse);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.ingress << "," << bad.egress;
  }
  EXPECT_EQ(model->Connect({{1, 1000}}, ConnectMode::kReplace).status().message(),
            "Invalid OXC port: 1000");
  EXPECT_EQ(model->Disconnect({33}).status().message(), "Invalid OXC port: 33");
  EXPECT_THAT(model->CrossConnects(), IsEmpty());
}

TEST_F(SwitchModelTest, BatchIsAllOrNothing) {
  auto model = Make();
  ASSERT_TRUE(model->Connect({{4, 20}}, ConnectMode::kRefuseInUse).ok());
  // The third pair wants an egress held by ingress 4: nothing of the batch is made.
  absl::StatusOr<ChangeResult> result =
      model->Connect({{1, 17}, {2, 18}, {3, 20}}, ConnectMode::kRefuseInUse);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{4, 20}));
  // An invalid port late in the batch: the same.
  EXPECT_FALSE(model->Connect({{1, 17}, {2, 99}}, ConnectMode::kRefuseInUse).ok());
  EXPECT_FALSE(model->Disconnect({4, 99}).ok());
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{4, 20}));
}

TEST_F(SwitchModelTest, ReplaceMovesIngressAndSwapsWithinTheBatch) {
  auto model = Make();
  ASSERT_TRUE(model->Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
  absl::StatusOr<ChangeResult> moved = model->Connect({{1, 19}}, ConnectMode::kReplace);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->created, 0);
  EXPECT_EQ(moved->changed, 2);  // 1->17 removed, 1->19 made
  // Egress 18 belongs to ingress 2, which is not in the batch.
  EXPECT_EQ(model->Connect({{3, 18}}, ConnectMode::kReplace).status().message(), "Port in use: 18");
  // A swap inside one batch is fine.
  ASSERT_TRUE(model->Connect({{1, 18}, {2, 19}}, ConnectMode::kReplace).ok());
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{1, 18}, CrossConnect{2, 19}));
  absl::StatusOr<ChangeResult> created = model->Connect({{5, 21}}, ConnectMode::kReplace);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->created, 1);
}

TEST_F(SwitchModelTest, DisconnectTakesEitherSideAndAll) {
  auto model = Make();
  ASSERT_TRUE(model->Connect({{1, 17}, {2, 18}, {3, 19}}, ConnectMode::kRefuseInUse).ok());
  absl::StatusOr<ChangeResult> result = model->Disconnect({1, 18, 5});  // 5 has none: fine
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->changed, 2);
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{3, 19}));
  EXPECT_EQ(model->EgressOf(3), 19);
  EXPECT_EQ(model->EgressOf(1), std::nullopt);
  ASSERT_TRUE(model->DisconnectAll().ok());
  EXPECT_THAT(model->CrossConnects(), IsEmpty());
}

TEST_F(SwitchModelTest, LightArrivesOnlyAfterTheSwitchTime) {
  auto model = Make();
  ASSERT_TRUE(model->SetSignal(1, "FLT-S1C0-N0/1", 0.0).ok());
  ASSERT_TRUE(model->SetSignal(2, "FLT-S1C0-N0/2", 0.0).ok());
  absl::StatusOr<ChangeResult> result =
      model->Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse);
  ASSERT_TRUE(result.ok());
  // The whole batch settles together, one switch time after the command.
  EXPECT_EQ(result->settled_at, clock_.Now() + absl::Milliseconds(25));
  EXPECT_EQ(model->LightAt(17)->signal, std::nullopt);
  EXPECT_EQ(model->LightAt(17)->power_dbm, kNoLightDbm);
  clock_.Advance(absl::Milliseconds(24));
  EXPECT_EQ(model->LightAt(18)->signal, std::nullopt);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(model->LightAt(17)->signal, "FLT-S1C0-N0/1");
  EXPECT_EQ(model->LightAt(18)->signal, "FLT-S1C0-N0/2");
  EXPECT_DOUBLE_EQ(model->LightAt(17)->power_dbm, -1.5);
}

TEST_F(SwitchModelTest, InsertionLossAndPowerDrops) {
  auto model = Make();
  ASSERT_TRUE(model->SetSignal(3, "s", -2.0).ok());
  ASSERT_TRUE(model->Connect({{3, 20}}, ConnectMode::kRefuseInUse).ok());
  clock_.Advance(absl::Milliseconds(25));
  EXPECT_DOUBLE_EQ(model->LightAt(20)->power_dbm, -3.5);
  ASSERT_TRUE(model->SetPowerDrop(3, 3.0).ok());
  ASSERT_TRUE(model->SetPowerDrop(20, 0.25).ok());
  EXPECT_DOUBLE_EQ(model->LightAt(20)->power_dbm, -6.75);
  std::vector<PortReading> readings = model->ReadPorts({3, 20, 21});
  ASSERT_EQ(readings.size(), 3u);
  EXPECT_DOUBLE_EQ(readings[0].power_dbm, -5.0);  // ingress: launch less its drop
  EXPECT_DOUBLE_EQ(readings[1].power_dbm, -6.75);
  EXPECT_DOUBLE_EQ(readings[2].power_dbm, kNoLightDbm);
  EXPECT_THAT(model->Alarms(),
              ElementsAre(Alarm{3, Alarm::Kind::kLowPower}, Alarm{20, Alarm::Kind::kLowPower}));
  ASSERT_TRUE(model->SetPowerDrop(3, 0).ok());  // 0 clears
  EXPECT_DOUBLE_EQ(model->LightAt(20)->power_dbm, -3.75);
  EXPECT_FALSE(model->SetPowerDrop(3, -1).ok());
  EXPECT_FALSE(model->SetSignal(17, "egress", 0).ok());
  EXPECT_FALSE(model->LightAt(3).ok());
  ASSERT_TRUE(model->ClearSignal(3).ok());
  EXPECT_EQ(model->LightAt(20)->signal, std::nullopt);
}

TEST_F(SwitchModelTest, ClosedShutterOrFailedPortStopsLight) {
  auto model = Make();
  ASSERT_TRUE(model->SetSignal(1, "s", 0).ok());
  ASSERT_TRUE(model->Connect({{1, 17}}, ConnectMode::kRefuseInUse).ok());
  clock_.Advance(absl::Milliseconds(25));
  ASSERT_TRUE(model->LightAt(17)->signal.has_value());

  for (int port : {1, 17}) {
    ASSERT_TRUE(model->SetShutters({{port, false}}).ok());
    EXPECT_EQ(model->LightAt(17)->signal, std::nullopt) << "shutter " << port;
    EXPECT_EQ(model->ReadPorts({port})[0].status, PortStatus::kDisabled);
    ASSERT_TRUE(model->SetShutters({{port, true}}).ok());
    EXPECT_TRUE(model->LightAt(17)->signal.has_value());

    ASSERT_TRUE(model->SetPortFailed(port, true).ok());
    EXPECT_EQ(model->LightAt(17)->signal, std::nullopt) << "failed " << port;
    EXPECT_EQ(model->ReadPorts({port})[0].status, PortStatus::kFailed);
    EXPECT_THAT(model->Alarms(), ElementsAre(Alarm{port, Alarm::Kind::kPortFailed}));
    ASSERT_TRUE(model->SetPortFailed(port, false).ok());
    EXPECT_TRUE(model->LightAt(17)->signal.has_value());
  }
  // A failed ingress gives no reading; a closed ingress shutter still reads the input.
  ASSERT_TRUE(model->SetShutters({{1, false}}).ok());
  EXPECT_DOUBLE_EQ(model->ReadPorts({1})[0].power_dbm, 0.0);
  ASSERT_TRUE(model->SetPortFailed(1, true).ok());
  EXPECT_DOUBLE_EQ(model->ReadPorts({1})[0].power_dbm, kNoLightDbm);
  // Shutter changes are all-or-nothing too.
  EXPECT_FALSE(model->SetShutters({{2, false}, {99, false}}).ok());
  EXPECT_TRUE(model->ReadPorts({2})[0].shutter_open);
}

TEST_F(SwitchModelTest, CountersCountChanges) {
  auto model = Make();
  ASSERT_TRUE(model->Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
  ASSERT_TRUE(model->Connect({{1, 19}}, ConnectMode::kReplace).ok());      // a move: 2 changes
  ASSERT_TRUE(model->Connect({{2, 18}}, ConnectMode::kRefuseInUse).ok());  // no change
  ASSERT_TRUE(model->Disconnect({2}).ok());
  model->CountTl1Command();
  model->CountRestRequest();
  model->CountRestRequest();
  model->SessionOpened();
  Counters counters = model->counters();
  EXPECT_EQ(counters.cross_connects_changed, 5);
  EXPECT_EQ(counters.cross_connects, 1);
  EXPECT_EQ(counters.tl1_commands, 1);
  EXPECT_EQ(counters.rest_requests, 2);
  EXPECT_EQ(counters.commands, 3);
  EXPECT_EQ(counters.sessions, 1);
  model->SessionClosed();
  EXPECT_EQ(model->counters().sessions, 0);
}

TEST_F(SwitchModelTest, FailBulkAfterMakesTheFirstKThenFailsOnce) {
  auto model = Make();
  model->UpdateFaults(FailBulkAfter(2));
  // A single pair is not bulk: the fault waits for the next multi-pair command.
  ASSERT_TRUE(model->Connect({{9, 25}}, ConnectMode::kRefuseInUse).ok());
  absl::StatusOr<ChangeResult> result =
      model->Connect({{1, 17}, {2, 18}, {3, 19}, {4, 20}}, ConnectMode::kRefuseInUse);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(result.status().message(), "Operation failed after 2 of 4");
  EXPECT_THAT(model->CrossConnects(),
              ElementsAre(CrossConnect{1, 17}, CrossConnect{2, 18}, CrossConnect{9, 25}));
  EXPECT_EQ(model->faults().fail_bulk_after, std::nullopt);
  ASSERT_TRUE(model->Connect({{3, 19}, {4, 20}}, ConnectMode::kRefuseInUse).ok());
  EXPECT_EQ(model->counters().cross_connects, 5);
}

TEST_F(SwitchModelTest, DenialsAreCountedDownAndFaultsClear) {
  auto model = Make();
  FaultUpdate update = DenyNext(2);
  update.latency = absl::Milliseconds(5);
  model->UpdateFaults(update);
  EXPECT_TRUE(model->TakeDenial());
  EXPECT_TRUE(model->TakeDenial());
  EXPECT_FALSE(model->TakeDenial());
  EXPECT_EQ(model->faults().latency, absl::Milliseconds(5));

  const uint64_t epoch = model->session_epoch();
  FaultUpdate expire;
  expire.expire_sessions = true;
  model->UpdateFaults(expire);
  EXPECT_EQ(model->session_epoch(), epoch + 1);

  model->UpdateFaults(DenyNext(1));
  model->UpdateFaults(FailBulkAfter(0));
  ASSERT_TRUE(model->SetPortFailed(3, true).ok());
  ASSERT_TRUE(model->SetPowerDrop(4, 1).ok());
  model->ClearFaults();
  EXPECT_FALSE(model->TakeDenial());
  EXPECT_EQ(model->faults().latency, absl::ZeroDuration());
  EXPECT_EQ(model->faults().fail_bulk_after, std::nullopt);
  EXPECT_THAT(model->Alarms(), IsEmpty());
}

TEST_F(SwitchModelTest, StateFileRoundTrip) {
  const std::string path = fleet::testing::FreshDirectory("state") + "/switch.json";
  {
    auto model = Make(path);
    ASSERT_TRUE(model->Connect({{1, 17}, {2, 18}}, ConnectMode::kRefuseInUse).ok());
    ASSERT_TRUE(model->SetShutters({{5, false}, {20, false}}).ok());
    ASSERT_TRUE(model->Disconnect({2}).ok());
    ASSERT_TRUE(model->Connect({{3, 19}}, ConnectMode::kRefuseInUse).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto restored = Make(path);
  ASSERT_NE(restored, nullptr);
  EXPECT_THAT(restored->CrossConnects(), ElementsAre(CrossConnect{1, 17}, CrossConnect{3, 19}));
  EXPECT_FALSE(restored->ReadPorts({5})[0].shutter_open);
  EXPECT_FALSE(restored->ReadPorts({20})[0].shutter_open);
  EXPECT_TRUE(restored->ReadPorts({6})[0].shutter_open);
  EXPECT_EQ(restored->counters().cross_connects, 2);
  // Restored cross-connects carry light at once, like a switch booting in RESTORE mode.
  ASSERT_TRUE(restored->SetSignal(1, "s", 0).ok());
  EXPECT_TRUE(restored->LightAt(17)->signal.has_value());
}

TEST_F(SwitchModelTest, StateFileForAnotherSizeOrCorruptIsRefused) {
  const std::string dir = fleet::testing::FreshDirectory("state");
  const std::string path = dir + "/switch.json";
  { ASSERT_NE(Make(path), nullptr); }
  absl::StatusOr<std::unique_ptr<SwitchModel>> other =
      SwitchModel::Create(SizeAndState({8, 8}, path), &clock_);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("16x16"));

  for (const char* text : {"not json", "[]", R"({"format":"polatis-emu-state/1","size":"16x16"})",
                           R"({"format":"polatis-emu-state/1","size":"16x16",
                               "cross_connects":[{"ingress":1,"egress":2}],"closed_shutters":[]})"}) {
    std::ofstream(path) << text;
    absl::StatusOr<std::unique_ptr<SwitchModel>> corrupt =
        SwitchModel::Create(SizeAndState({16, 16}, path), &clock_);
    EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss) << text;
  }
  absl::StatusOr<std::unique_ptr<SwitchModel>> unwritable =
      SwitchModel::Create(SizeAndState({16, 16}, dir + "/missing/switch.json"), &clock_);
  EXPECT_FALSE(unwritable.ok());
}

TEST_F(SwitchModelTest, ChangeThatCannotBeSavedIsRefusedWhole) {
  const std::string dir = fleet::testing::FreshDirectory("state");
  auto model = Make(dir + "/switch.json");
  ASSERT_TRUE(model->Connect({{1, 17}}, ConnectMode::kRefuseInUse).ok());
  // The directory goes away: the next change cannot be persisted, so it is not made.
  std::filesystem::remove_all(dir);
  absl::StatusOr<ChangeResult> result = model->Connect({{2, 18}}, ConnectMode::kRefuseInUse);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(model->CrossConnects(), ElementsAre(CrossConnect{1, 17}));
  EXPECT_EQ(model->counters().cross_connects_changed, 1);
}

}  // namespace
}  // namespace fleet::polatis_emu
