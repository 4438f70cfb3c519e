// Tl1Session's recovery against a scripted switch: which commands reach the wire, and that a
// changing command's change gate is asked before every write of it, the resend included.
#include "switch_adapters/polatis/tl1_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fleet::polatis {
namespace {

using ::testing::ElementsAre;

// What the scripted switch saw and how it misbehaves, shared by every connection.
struct Script {
  std::vector<std::string> written;  // "VERB AID" of each command, in order, logins included.
  int connections = 0;
  // The command (by verb) whose answer never comes on the first connection: it reads as a
  // dropped connection, after the command was written.
  std::string drop_after;
  // The verb answered "Not logged in" once (a session the switch timed out).
  std::string expire_at;
};

class ScriptedStream : public ByteStream {
 public:
  ScriptedStream(Script& script, int connection) : script_(script), connection_(connection) {}

  absl::Status Write(absl::string_view bytes, absl::Time) override {
    // VERB::AID:CTAG:TAIL;
    std::vector<std::string> fields = absl::StrSplit(bytes, ':');
    const std::string& verb = fields[0];
    script_.written.push_back(absl::StrCat(verb, " ", fields[2]));
    const std::string& ctag = fields[3];
    if (verb == script_.drop_after && connection_ == 1) {
      dropped_ = true;
    } else if (verb == script_.expire_at) {
      script_.expire_at.clear();
      answers_.push_back(
          absl::StrCat("M  ", ctag, " DENY\r\n   IENE\r\n   /* Not logged in */\r\n;"));
    } else {
      answers_.push_back(absl::StrCat("M  ", ctag, " COMPLD\r\n;"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Read(absl::Time) override {
    if (dropped_ || answers_.empty()) return absl::UnavailableError("connection reset by peer");
    std::string answer = std::move(answers_.front());
    answers_.pop_front();
    return answer;
  }

 private:
  Script& script_;
  const int connection_;
  std::deque<std::string> answers_;
  bool dropped_ = false;
};

class ScriptedDialer : public StreamDialer {
 public:
  explicit ScriptedDialer(Script& script) : script_(script) {}
  absl::StatusOr<std::unique_ptr<ByteStream>> Dial(const std::string&, uint16_t,
                                                   absl::Time) override {
    return std::make_unique<ScriptedStream>(script_, ++script_.connections);
  }

 private:
  Script& script_;
};

class Tl1SessionTest : public ::testing::Test {
 protected:
  Tl1Session Session() {
    return Tl1Session({.name = "ocs1", .host = "192.0.2.10", .user = "admin", .password = "pw"},
                      std::make_unique<ScriptedDialer>(script_));
  }

  // A gate answering OK `open` times, then refusing as a replica that lost its lease does.
  switch_adapters::ChangeGate Gate(int open) {
    return [this, open] {
      ++gate_asked_;
      return gate_asked_ <= open ? absl::OkStatus() : absl::UnavailableError("lease lost");
    };
  }

  Script script_;
  int gate_asked_ = 0;
};

TEST_F(Tl1SessionTest, AChangeResentAfterADroppedConnectionAsksTheGateAgain) {
  script_.drop_after = "ENT-PATCH";
  Tl1Session session = Session();
  absl::StatusOr<Tl1Response> done = session.ExecuteChange(Gate(2), "ENT-PATCH", "1,17");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(gate_asked_, 2);
  EXPECT_EQ(script_.connections, 2);
  EXPECT_THAT(script_.written,
              ElementsAre("ACT-USER admin", "ENT-PATCH 1,17", "ACT-USER admin", "ENT-PATCH 1,17"));
}

// The old leader's case: the first write went out under an open fence, the connection died,
// and by the time the session has reconnected the lease may be gone. The resend is not written.
TEST_F(Tl1SessionTest, AGateThatClosedBeforeTheResendKeepsItOffTheWire) {
  script_.drop_after = "DLT-PATCH";
  Tl1Session session = Session();
  absl::StatusOr<Tl1Response> done = session.ExecuteChange(Gate(1), "DLT-PATCH", "1");
  EXPECT_EQ(done.status(), absl::UnavailableError("lease lost"));
  EXPECT_EQ(gate_asked_, 2);
  EXPECT_THAT(script_.written, ElementsAre("ACT-USER admin", "DLT-PATCH 1", "ACT-USER admin"));
}

TEST_F(Tl1SessionTest, AnExpiredSessionsResendAsksTheGateAgain) {
  script_.expire_at = "OPR-PORT-SHUTTER";
  Tl1Session session = Session();
  absl::StatusOr<Tl1Response> done = session.ExecuteChange(Gate(1), "OPR-PORT-SHUTTER", "3");
  EXPECT_EQ(done.status(), absl::UnavailableError("lease lost"));
  EXPECT_EQ(gate_asked_, 2);
  EXPECT_THAT(script_.written,
              ElementsAre("ACT-USER admin", "OPR-PORT-SHUTTER 3", "ACT-USER admin"));
}

// A refusal is final: it is not taken for a transport failure and retried on a new connection.
TEST_F(Tl1SessionTest, AClosedGateSendsNothingAndKeepsTheConnection) {
  Tl1Session session = Session();
  EXPECT_EQ(session.ExecuteChange(Gate(0), "ENT-PATCH", "1,17").status(),
            absl::UnavailableError("lease lost"));
  EXPECT_EQ(gate_asked_, 1);
  ASSERT_TRUE(session.Execute("RTRV-PATCH", "").ok());
  EXPECT_EQ(script_.connections, 1);
  EXPECT_THAT(script_.written, ElementsAre("ACT-USER admin", "RTRV-PATCH "));
}

TEST_F(Tl1SessionTest, ReadsAndAnEmptyGateAreNotGated) {
  Tl1Session session = Session();
  ASSERT_TRUE(session.Execute("RTRV-PATCH", "").ok());
  ASSERT_TRUE(session.ExecuteChange({}, "ENT-PATCH", "2,18").ok());
  EXPECT_EQ(gate_asked_, 0);
  EXPECT_THAT(script_.written, ElementsAre("ACT-USER admin", "RTRV-PATCH ", "ENT-PATCH 2,18"));
}

}  // namespace
}  // namespace fleet::polatis
