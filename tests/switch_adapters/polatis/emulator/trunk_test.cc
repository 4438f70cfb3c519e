// Trunk fibers between emulators (docs/polatis-emulator.md, "Trunk fibers"): first two or more
// SwitchModels joined in one process by a FakeSite, no sockets; then two in-process emulators
// on port 0 asking each other over real HTTP.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "switch_adapters/polatis/emulator/emulator.h"
#include "switch_adapters/polatis/emulator/switch_model.h"
#include "testing/fake_clock.h"
#include "tests/integration/subprocess.h"
#include "tests/switch_adapters/polatis/emulator/raw_clients.h"

namespace fleet::polatis_emu {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kSiteA[] = "10.0.0.1:8008";
constexpr char kSiteB[] = "10.0.0.2:8008";

// The emulators of a site by REST address, asked by calling their models directly: light
// crosses a trunk as it would over HTTP, without sockets. An address not added, or taken
// down, is unreachable.
class FakeSite : public RemoteLight {
 public:
  void Add(const std::string& address, const SwitchModel* model) {
    absl::MutexLock lock(&mu_);
    models_[address] = model;
  }
  void TakeDown(const std::string& address) {
    absl::MutexLock lock(&mu_);
    models_.erase(address);
  }
  int fetches() const {
    absl::MutexLock lock(&mu_);
    return fetches_;
  }

  absl::StatusOr<Light> Fetch(const std::string& from, int egress, int hops) override {
    const SwitchModel* model = nullptr;
    {
      absl::MutexLock lock(&mu_);
      ++fetches_;
      auto it = models_.find(from);
      if (it == models_.end()) {
        return absl::UnavailableError(absl::StrCat(from, ": connection refused"));
      }
      model = it->second;
    }
    // Unlocked: the far model may ask this site back (a loop of trunks).
    return model->LightAt(egress, hops);
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, const SwitchModel*> models_ ABSL_GUARDED_BY(mu_);
  int fetches_ ABSL_GUARDED_BY(mu_) = 0;
};

Trunk TrunkFrom(int ingress, std::string from, int egress, double loss_db = 0.5) {
  Trunk trunk;
  trunk.ingress = ingress;
  trunk.from = std::move(from);
  trunk.egress = egress;
  trunk.loss_db = loss_db;
  return trunk;
}

class TrunkTest : public ::testing::Test {
 protected:
  // A 384x384 switch (ingress 1..384, egress 385..768) losing 1.5 dB, switching in 25 ms of
  // fake time, reachable on the site at `address`.
  std::unique_ptr<SwitchModel> Make(const std::string& address, SwitchSize size = {384, 384},
                                    std::string state_file = "") {
    absl::StatusOr<std::unique_ptr<SwitchModel>> model =
        SwitchModel::Create({.size = size,
                             .switch_time = absl::Milliseconds(25),
                             .insertion_loss_db = 1.5,
                             .state_file = std::move(state_file)},
                            &clock_, &site_);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    site_.Add(address, model->get());
    return std::move(*model);
  }

  void Connect(SwitchModel& model, int ingress, int egress) {
    ASSERT_TRUE(model.Connect({{ingress, egress}}, ConnectMode::kReplace).ok());
  }

  // The brief's circuit: an O-NIC on A ingress 1, A 1->673, a trunk fiber from A 673 to B
  // ingress 289, B 289->400 towards the receiving O-NIC; everything settled.
  void MakeCircuit() {
    a_ = Make(kSiteA);
    b_ = Make(kSiteB);
    ASSERT_TRUE(a_->SetSignal(1, "FLT-S1C0-N0/1", 0.0).ok());
    Connect(*a_, 1, 673);
    ASSERT_TRUE(b_->SetTrunk(TrunkFrom(289, kSiteA, 673)).ok());
    Connect(*b_, 289, 400);
    clock_.Advance(absl::Milliseconds(25));
  }

  fleet::testing::FakeClock clock_;
  FakeSite site_;
  std::unique_ptr<SwitchModel> a_, b_;
};

TEST_F(TrunkTest, LightCrossesATrunkLessItsLossAndTheSwitchLosses) {
  MakeCircuit();
  // 0 dBm, less A's insertion loss, the trunk's 0.5 dB (the default) and B's insertion loss.
  absl::StatusOr<Light> light = b_->LightAt(400);
  ASSERT_TRUE(light.ok()) << light.status();
  EXPECT_EQ(light->signal, "FLT-S1C0-N0/1");
  EXPECT_DOUBLE_EQ(light->power_dbm, -3.5);

  // Power drops on either switch count; B's readings are rounded like a local signal's.
  ASSERT_TRUE(a_->SetPowerDrop(673, 1.0).ok());
  ASSERT_TRUE(b_->SetPowerDrop(289, 0.25).ok());
  ASSERT_TRUE(b_->SetPowerDrop(400, 0.004).ok());
  EXPECT_DOUBLE_EQ(b_->LightAt(400)->power_dbm, -4.75);
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(289, kSiteA, 673, 2.0)).ok());
  EXPECT_DOUBLE_EQ(b_->LightAt(400)->power_dbm, -6.25);

  // Port monitors read the light that is there, as a real switch's do: the trunk-fed ingress
  // what the trunk fiber brings (A's 673: 0 - 1.5 - 1.0; less the trunk's 2.0 and the 0.25
  // dropped on 289), the egress what arrives (LightAt). Read for state alone, nothing is
  // fetched.
  const int fetches = site_.fetches();
  std::vector<PortReading> readings = b_->ReadPorts({289, 400});
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_DOUBLE_EQ(readings[0].power_dbm, -4.75);
  EXPECT_DOUBLE_EQ(readings[1].power_dbm, -6.25);
  EXPECT_EQ(site_.fetches(), fetches + 2);
  readings = b_->ReadPorts({289, 400}, /*power=*/false);
  EXPECT_DOUBLE_EQ(readings[0].power_dbm, kNoLightDbm);
  EXPECT_DOUBLE_EQ(readings[1].power_dbm, kNoLightDbm);
  EXPECT_EQ(site_.fetches(), fetches + 2);
}

// A far emulator that does not answer is asked once per read, however many of the ports read
// its trunks feed: a monitor's read waits at most one fetch timeout on it.
TEST_F(TrunkTest, PowerReadingsAskASilentFarEmulatorOncePerRead) {
  MakeCircuit();
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(290, kSiteA, 674)).ok());
  Connect(*b_, 290, 401);
  clock_.Advance(absl::Milliseconds(25));
  site_.TakeDown(kSiteA);
  const int fetches = site_.fetches();
  std::vector<PortReading> readings = b_->ReadPorts({289, 290, 400, 401});
  ASSERT_EQ(readings.size(), 4u);
  for (const PortReading& r : readings) EXPECT_DOUBLE_EQ(r.power_dbm, kNoLightDbm) << r.port;
  EXPECT_EQ(site_.fetches(), fetches + 1);
}

// A far emulator that refuses one trunk (its far port is not an egress) has answered: the
// other ports it feeds are still asked and read their light.
TEST_F(TrunkTest, AFarRefusalDarkensOnlyItsOwnTrunk) {
  MakeCircuit();
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(290, kSiteA, 5)).ok());  // A's port 5 is an ingress.
  Connect(*b_, 290, 401);
  clock_.Advance(absl::Milliseconds(25));
  std::vector<PortReading> readings = b_->ReadPorts({401, 400});
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_DOUBLE_EQ(readings[0].power_dbm, kNoLightDbm);
  EXPECT_DOUBLE_EQ(readings[1].power_dbm, -3.5);
}

TEST_F(TrunkTest, NoLightUntilTheLocalCrossConnectSettles) {
  a_ = Make(kSiteA);
  b_ = Make(kSiteB);
  ASSERT_TRUE(a_->SetSignal(1, "sig", 0.0).ok());
  Connect(*a_, 1, 673);
  clock_.Advance(absl::Milliseconds(25));
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(289, kSiteA, 673)).ok());
  Connect(*b_, 289, 400);
  clock_.Advance(absl::Milliseconds(24));
  EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
  EXPECT_DOUBLE_EQ(b_->LightAt(400)->power_dbm, kNoLightDbm);
  // While the beam moves the far end is not even asked.
  EXPECT_EQ(site_.fetches(), 0);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(b_->LightAt(400)->signal, "sig");
}

TEST_F(TrunkTest, ClosedShutterOrFailedPortOnEitherLocalPortStopsTrunkLight) {
  MakeCircuit();
  for (int port : {289, 400}) {
    ASSERT_TRUE(b_->SetShutters({{port, false}}).ok());
    EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt) << "shutter " << port;
    ASSERT_TRUE(b_->SetShutters({{port, true}}).ok());
    EXPECT_EQ(b_->LightAt(400)->signal, "FLT-S1C0-N0/1") << "shutter " << port;

    ASSERT_TRUE(b_->SetPortFailed(port, true).ok());
    EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt) << "failed " << port;
    ASSERT_TRUE(b_->SetPortFailed(port, false).ok());
    EXPECT_EQ(b_->LightAt(400)->signal, "FLT-S1C0-N0/1") << "failed " << port;
  }
}

TEST_F(TrunkTest, NoLightWhenTheFarEgressIsDark) {
  MakeCircuit();
  ASSERT_TRUE(a_->SetShutters({{673, false}}).ok());
  EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
  ASSERT_TRUE(a_->SetShutters({{673, true}}).ok());
  ASSERT_TRUE(a_->ClearSignal(1).ok());
  absl::StatusOr<Light> light = b_->LightAt(400);
  ASSERT_TRUE(light.ok());
  EXPECT_EQ(light->signal, std::nullopt);
  EXPECT_DOUBLE_EQ(light->power_dbm, kNoLightDbm);
}

TEST_F(TrunkTest, NoLightWhenTheFarEmulatorIsDownOrRefuses) {
  MakeCircuit();
  site_.TakeDown(kSiteA);
  absl::StatusOr<Light> light = b_->LightAt(400);
  ASSERT_TRUE(light.ok()) << light.status();
  EXPECT_EQ(light->signal, std::nullopt);
  EXPECT_DOUBLE_EQ(light->power_dbm, kNoLightDbm);

  // Up again, but the trunk names a port that is not an egress there: A refuses to answer.
  site_.Add(kSiteA, a_.get());
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(289, kSiteA, 5)).ok());
  EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
}

// How many lines of `text` contain `needle`.
int LinesWith(const std::string& text, const std::string& needle) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) ++count;
  }
  return count;
}

TEST_F(TrunkTest, AFailingTrunkIsLoggedOncePerChangeNotPerRead) {
  MakeCircuit();
  ::testing::internal::CaptureStderr();
  site_.TakeDown(kSiteA);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
  site_.Add(kSiteA, a_.get());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b_->LightAt(400)->signal, "FLT-S1C0-N0/1");
  // Dark but answering is not a problem of the trunk: nothing more is logged.
  ASSERT_TRUE(a_->ClearSignal(1).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(LinesWith(log,
                      "trunk from 10.0.0.1:8008 egress 673 into ingress 289 brings no "
                      "light: 10.0.0.1:8008: connection refused"),
            1)
      << log;
  EXPECT_EQ(LinesWith(log, "trunk from 10.0.0.1:8008 egress 673 into ingress 289 answers again"), 1)
      << log;
  EXPECT_EQ(LinesWith(log, "trunk from"), 2) << log;
}

TEST_F(TrunkTest, ALoopOfTrunksAnswersNoLightAfterEightHops) {
  a_ = Make(kSiteA);
  b_ = Make(kSiteB);
  // Each switch's ingress 1 is fed by the other's egress 400, and cross-connected to it.
  ASSERT_TRUE(a_->SetTrunk(TrunkFrom(1, kSiteB, 400)).ok());
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(1, kSiteA, 400)).ok());
  Connect(*a_, 1, 400);
  Connect(*b_, 1, 400);
  clock_.Advance(absl::Milliseconds(25));
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Light> light = a_->LightAt(400);
  ASSERT_TRUE(light.ok()) << light.status();
  EXPECT_EQ(light->signal, std::nullopt);
  EXPECT_EQ(site_.fetches(), kMaxTrunkHops);
  // Each read crosses the same trunks at several depths; the deepest (A's when A is read
  // first, B's when B is) is the one that stops, and says so once, not on every read.
  EXPECT_EQ(a_->LightAt(400)->signal, std::nullopt);
  EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
  EXPECT_EQ(b_->LightAt(400)->signal, std::nullopt);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(LinesWith(log,
                      "trunk from 10.0.0.2:8008 egress 400 into ingress 1 brings no light: "
                      "light that has crossed 8 trunks would cross more than 8"),
            1)
      << log;
  EXPECT_EQ(LinesWith(log, "trunk from 10.0.0.1:8008 egress 400 into ingress 1 brings no light"), 1)
      << log;
  EXPECT_EQ(LinesWith(log, "trunk from"), 2) << log;
}

TEST_F(TrunkTest, LightCrossesEightTrunksButNotNine) {
  // Ten 4x4 switches in a row (ingress 1..4, egress 5..8): switch 0 lights its ingress 1,
  // every switch connects 1->5, and a trunk joins each switch's egress 5 to the next one's
  // ingress 1.
  std::vector<std::unique_ptr<SwitchModel>> row;
  for (int i = 0; i < 10; ++i) {
    row.push_back(Make(absl::StrCat("10.0.1.", i, ":8008"), {4, 4}));
    ASSERT_NE(row.back(), nullptr);
    if (i > 0) {
      ASSERT_TRUE(row[i]->SetTrunk(TrunkFrom(1, absl::StrCat("10.0.1.", i - 1, ":8008"), 5)).ok());
    }
    Connect(*row[i], 1, 5);
  }
  ASSERT_TRUE(row[0]->SetSignal(1, "far", 0.0).ok());
  clock_.Advance(absl::Milliseconds(25));
  absl::StatusOr<Light> eight = row[8]->LightAt(5);
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->signal, "far");
  EXPECT_DOUBLE_EQ(eight->power_dbm, -(9 * 1.5 + 8 * 0.5));
  EXPECT_EQ(row[9]->LightAt(5)->signal, std::nullopt);
  // A reader that says the light has already crossed trunks gets fewer.
  EXPECT_EQ(row[1]->LightAt(5, kMaxTrunkHops - 1)->signal, "far");
  EXPECT_EQ(row[1]->LightAt(5, kMaxTrunkHops)->signal, std::nullopt);
  EXPECT_EQ(row[0]->LightAt(5, kMaxTrunkHops)->signal, "far");  // a local signal crosses none
  EXPECT_FALSE(row[0]->LightAt(5, -1).ok());
}

TEST_F(TrunkTest, RefusedTrunksChangeNothing) {
  b_ = Make(kSiteB);
  const Trunk existing = TrunkFrom(290, kSiteA, 674, 1.0);
  ASSERT_TRUE(b_->SetTrunk(existing).ok());
  ASSERT_TRUE(b_->SetSignal(289, "local", 0.0).ok());

  struct Case {
    Trunk trunk;
    absl::StatusCode code;
    std::string message;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Case> cases = {
      {TrunkFrom(400, kSiteA, 673), absl::StatusCode::kInvalidArgument,
       "port 400 is not an ingress port (1..384)"},
      {TrunkFrom(0, kSiteA, 673), absl::StatusCode::kInvalidArgument,
       "port 0 is not an ingress port (1..384)"},
      {TrunkFrom(290, kSiteA, 0), absl::StatusCode::kInvalidArgument,
       "egress 0 must be a positive integer"},
      {TrunkFrom(290, kSiteA, -3), absl::StatusCode::kInvalidArgument,
       "egress -3 must be a positive integer"},
      {TrunkFrom(290, kSiteA, 673, -1), absl::StatusCode::kInvalidArgument,
       "loss_db -1 must be a finite number >= 0"},
      {TrunkFrom(290, kSiteA, 673, nan), absl::StatusCode::kInvalidArgument,
       "must be a finite number >= 0"},
      {TrunkFrom(290, kSiteA, 673, inf), absl::StatusCode::kInvalidArgument,
       "must be a finite number >= 0"},
      {TrunkFrom(289, kSiteA, 673), absl::StatusCode::kFailedPrecondition,
       "ingress 289 carries the local signal 'local'"},
  };
  for (const char* from :
       {"", "host", "host:", ":8008", "host:abc", "host:0", "host:65536", "host:+80", "host: 80",
        "host:123456", "a/b:80", "a b:80", "a@b:80", "[::1]:80", "host:80:80"}) {
    cases.push_back({TrunkFrom(290, from, 673), absl::StatusCode::kInvalidArgument,
                     absl::StrCat("from '", from, "' must be HOST:PORT")});
  }
  for (const Case& c : cases) {
    absl::Status status = b_->SetTrunk(c.trunk);
    EXPECT_EQ(status.code(), c.code) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_THAT(b_->Trunks(), ElementsAre(existing)) << c.message;
  }
  // The refused trunk left the local signal on 289 alone.
  EXPECT_DOUBLE_EQ(b_->ReadPorts({289})[0].power_dbm, 0.0);
}

TEST_F(TrunkTest, ASignalOnATrunkFedIngressIsRefused) {
  MakeCircuit();
  absl::Status status = b_->SetSignal(289, "local", 3.0);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("ingress 289 is fed by a trunk from 10.0.0.1:8008 egress 673"));
  // Nothing changed: the light is still the trunk's (0 dBm less A's 1.5 and the trunk's 0.5
  // at the ingress monitor), not the refused 3 dBm signal.
  EXPECT_EQ(b_->LightAt(400)->signal, "FLT-S1C0-N0/1");
  EXPECT_DOUBLE_EQ(b_->ReadPorts({289})[0].power_dbm, -2.0);
  // Without the trunk the port takes a signal again.
  ASSERT_TRUE(b_->ClearTrunk(289).ok());
  ASSERT_TRUE(b_->SetSignal(289, "local", 3.0).ok());
  EXPECT_EQ(b_->LightAt(400)->signal, "local");
}

TEST_F(TrunkTest, TrunksAreListedByIngressReplacedAndDeleted) {
  b_ = Make(kSiteB);
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(300, kSiteA, 700)).ok());
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(289, kSiteA, 673)).ok());
  EXPECT_THAT(b_->Trunks(), ElementsAre(TrunkFrom(289, kSiteA, 673), TrunkFrom(300, kSiteA, 700)));
  ASSERT_TRUE(b_->SetTrunk(TrunkFrom(289, "emu-c:9000", 401, 3.0)).ok());
  EXPECT_THAT(b_->Trunks(),
              ElementsAre(TrunkFrom(289, "emu-c:9000", 401, 3.0), TrunkFrom(300, kSiteA, 700)));
  ASSERT_TRUE(b_->ClearTrunk(289).ok());
  ASSERT_TRUE(b_->ClearTrunk(289).ok());  // none left: still fine
  EXPECT_THAT(b_->Trunks(), ElementsAre(TrunkFrom(300, kSiteA, 700)));
  EXPECT_EQ(b_->ClearTrunk(400).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TrunkTest, TrunksAreNotWrittenToTheStateFile) {
  const std::string path = fleet::testing::FreshDirectory("state") + "/switch.json";
  {
    auto model = Make(kSiteB, {384, 384}, path);
    ASSERT_TRUE(model->SetTrunk(TrunkFrom(289, kSiteA, 673)).ok());
    Connect(*model, 289, 400);  // a change, so the file is written with the trunk in place
  }
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"egress\": 400"));
  EXPECT_THAT(text.str(), ::testing::Not(HasSubstr(kSiteA)));
  auto restored = Make(kSiteB, {384, 384}, path);
  ASSERT_NE(restored, nullptr);
  EXPECT_THAT(restored->Trunks(), IsEmpty());
}

TEST(TrunkWithoutRemoteLightTest, IsRefused) {
  fleet::testing::FakeClock clock;
  SwitchModelOptions options;
  options.size = {16, 16};
  absl::StatusOr<std::unique_ptr<SwitchModel>> model = SwitchModel::Create(options, &clock);
  ASSERT_TRUE(model.ok());
  absl::Status status = (*model)->SetTrunk(TrunkFrom(1, kSiteA, 17));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("takes no trunks"));
  EXPECT_THAT((*model)->Trunks(), IsEmpty());
}

// --- Two emulators on loopback, asking each other over HTTP ---------------------------------

constexpr char kLightAt400[] = R"({"egress":400,"signal":"FLT-S1C0-N0/1","power_dbm":-3.5})";
constexpr char kDarkAt400[] = R"({"egress":400,"signal":null,"power_dbm":-99.99})";

class TrunkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (std::unique_ptr<Emulator>* emulator : {&a_, &b_}) {
      EmulatorOptions options;  // 384x384
      options.tl1_port = 0;
      options.rest_port = 0;
      options.switch_time = absl::ZeroDuration();
      absl::StatusOr<std::unique_ptr<Emulator>> started = Emulator::Start(options, &clock_);
      ASSERT_TRUE(started.ok()) << started.status();
      *emulator = std::move(*started);
    }
  }

  raw::HttpReply Request(Emulator& emulator, const std::string& method, const std::string& path,
                         const std::string& body = "") {
    return raw::Http(emulator.rest_address(), method, path, body);
  }

  void CrossConnect(Emulator& emulator, int ingress, int egress) {
    ASSERT_EQ(
        Request(emulator, "PUT",
                absl::StrCat("/api/data/optical-switch:cross-connects/pair=", ingress),
                absl::StrCat(R"({"pair":[{"ingress":)", ingress, R"(,"egress":)", egress, "}]}"))
            .status,
        201);
  }

  std::string TrunkBody(const Emulator& from, int egress) {
    return absl::StrCat(R"({"from":")", from.rest_address(), R"(","egress":)", egress, "}");
  }

  // The brief's circuit, over the side-channel and the REST API.
  void MakeCircuit() {
    ASSERT_EQ(Request(*a_, "PUT", "/sim/v1/signals/1", R"({"name":"FLT-S1C0-N0/1"})").status, 204);
    CrossConnect(*a_, 1, 673);
    ASSERT_EQ(Request(*b_, "PUT", "/sim/v1/trunks/289", TrunkBody(*a_, 673)).status, 204);
    CrossConnect(*b_, 289, 400);
  }

  fleet::testing::FakeClock clock_;
  std::unique_ptr<Emulator> a_, b_;
};

TEST_F(TrunkServerTest, LightCrossesATrunkBetweenTwoEmulatorServers) {
  MakeCircuit();
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400").body, kLightAt400);
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/trunks").body,
            absl::StrCat(R"({"trunks":[{"ingress":289,"from":")", a_->rest_address(),
                         R"(","egress":673,"loss_db":0.5}]})"));

  // A answers with an error (its 5 is an ingress): no light at B.
  ASSERT_EQ(Request(*b_, "PUT", "/sim/v1/trunks/289", TrunkBody(*a_, 5)).status, 204);
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400").body, kDarkAt400);
  ASSERT_EQ(Request(*b_, "PUT", "/sim/v1/trunks/289", TrunkBody(*a_, 673)).status, 204);
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400").body, kLightAt400);

  // A gone: no light at B, and B still answers.
  a_->Stop();
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400").body, kDarkAt400);
}

TEST_F(TrunkServerTest, HopsInTheQueryLimitTheTrunksCrossed) {
  MakeCircuit();
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400?hops=7").body, kLightAt400);
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400?hops=8").body, kDarkAt400);
  for (const char* query : {"hops=-1", "hops=x", "hops=", "color=red"}) {
    raw::HttpReply reply = Request(*b_, "GET", absl::StrCat("/sim/v1/light/400?", query));
    EXPECT_EQ(reply.status, 400) << query;
  }
  EXPECT_THAT(Request(*b_, "GET", "/sim/v1/light/400?hops=x").body,
              HasSubstr("hops 'x' must be an integer >= 0"));
}

TEST_F(TrunkServerTest, ALoopOfTrunksBetweenTwoServersAnswersNoLight) {
  ASSERT_EQ(Request(*a_, "PUT", "/sim/v1/trunks/1", TrunkBody(*b_, 400)).status, 204);
  ASSERT_EQ(Request(*b_, "PUT", "/sim/v1/trunks/1", TrunkBody(*a_, 400)).status, 204);
  CrossConnect(*a_, 1, 400);
  CrossConnect(*b_, 1, 400);
  raw::HttpReply reply = Request(*a_, "GET", "/sim/v1/light/400");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, kDarkAt400);
}

TEST_F(TrunkServerTest, RefusedRequestsSayWhyAndChangeNothing) {
  MakeCircuit();
  const std::string listed = Request(*b_, "GET", "/sim/v1/trunks").body;
  ASSERT_EQ(Request(*b_, "PUT", "/sim/v1/signals/290", R"({"name":"local"})").status, 204);
  const std::string a = a_->rest_address();
  struct Case {
    std::string path;
    std::string body;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/sim/v1/trunks/400", TrunkBody(*a_, 673), "port 400 is not an ingress port (1..384)"},
      {"/sim/v1/trunks/x", TrunkBody(*a_, 673), "port 'x' is not a number"},
      {"/sim/v1/trunks/289", R"({"egress":673})", "'from' must be a string HOST:PORT"},
      {"/sim/v1/trunks/289", R"({"from":8008,"egress":673})", "'from' must be a string"},
      {"/sim/v1/trunks/289", R"({"from":"nohost","egress":673})",
       "from 'nohost' must be HOST:PORT"},
      {"/sim/v1/trunks/289", R"({"from":"host:port","egress":673})",
       "from 'host:port' must be HOST:PORT"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"("})"),
       "'egress' must be a positive integer"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":"673"})"),
       "'egress' must be a positive integer"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":0})"),
       "'egress' must be a positive integer"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":6.5})"),
       "'egress' must be a positive integer"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":4294967297})"),
       "'egress' must be a positive integer"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":673,"loss_db":-1})"),
       "loss_db -1 must be a finite number >= 0"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":673,"loss_db":"low"})"),
       "'loss_db' must be a number"},
      {"/sim/v1/trunks/289", absl::StrCat(R"({"from":")", a, R"(","egress":673,"to":400})"),
       "unknown member 'to'"},
      {"/sim/v1/trunks/289", "[]", "body must be a JSON object"},
      {"/sim/v1/trunks/289", "not json", "request body is not valid JSON"},
      {"/sim/v1/trunks/290", TrunkBody(*a_, 673), "ingress 290 carries the local signal 'local'"},
      {"/sim/v1/signals/289", R"({"name":"local"})",
       absl::StrCat("ingress 289 is fed by a trunk from ", a, " egress 673")},
  };
  for (const Case& c : cases) {
    raw::HttpReply reply = Request(*b_, "PUT", c.path, c.body);
    EXPECT_EQ(reply.status, 400) << c.path << " " << c.body;
    EXPECT_THAT(reply.body, HasSubstr(c.message)) << c.body;
    EXPECT_EQ(Request(*b_, "GET", "/sim/v1/trunks").body, listed) << c.body;
  }
  // The light through the trunk, and the local signal on 290, are as they were.
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400").body, kLightAt400);
  EXPECT_DOUBLE_EQ(b_->model().ReadPorts({290})[0].power_dbm, 0.0);
  EXPECT_EQ(Request(*b_, "DELETE", "/sim/v1/trunks/400").status, 400);
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/trunks/289").status, 405);
  EXPECT_EQ(Request(*b_, "PUT", "/sim/v1/trunks", "{}").status, 405);
}

TEST_F(TrunkServerTest, TrunksAreListedByIngressAndDeleted) {
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/trunks").body, R"({"trunks":[]})");
  ASSERT_EQ(Request(*b_, "PUT", "/sim/v1/trunks/300",
                    R"({"from":"emu-c:9000","egress":700,"loss_db":2.25})")
                .status,
            204);
  MakeCircuit();
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/trunks").body,
            absl::StrCat(R"({"trunks":[{"ingress":289,"from":")", a_->rest_address(),
                         R"(","egress":673,"loss_db":0.5},)",
                         R"({"ingress":300,"from":"emu-c:9000","egress":700,"loss_db":2.25}]})"));
  EXPECT_EQ(Request(*b_, "DELETE", "/sim/v1/trunks/289").status, 204);
  EXPECT_EQ(Request(*b_, "DELETE", "/sim/v1/trunks/289").status, 204);  // none: fine
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/light/400").body, kDarkAt400);
  EXPECT_EQ(Request(*b_, "GET", "/sim/v1/trunks").body,
            R"({"trunks":[{"ingress":300,"from":"emu-c:9000","egress":700,"loss_db":2.25}]})");
}

}  // namespace
}  // namespace fleet::polatis_emu
