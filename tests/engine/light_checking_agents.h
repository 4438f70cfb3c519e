// Agents that check the light, for the engine's tests: a fake agent_registry::CommandSender over a
// fleet::testing::FakeOpticalSwitch.
#ifndef FLEET_TESTS_ENGINE_LIGHT_CHECKING_AGENTS_H_
#define FLEET_TESTS_ENGINE_LIGHT_CHECKING_AGENTS_H_

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "controller/agent_registry/agent_registry.h"
#include "testing/fake_optical_switch.h"

namespace fleet::engine {

// Agents for every O-NIC of the site. Retrain answers OK only if the switch carries light
// from the expected peer's tx ingress to this port's rx egress.
class LightCheckingAgents : public agent_registry::CommandSender {
 public:
  LightCheckingAgents(const v1::Inventory& site, fleet::testing::FakeOpticalSwitch* sw) : sw_(sw) {
    for (const v1::Onic& o : site.onics()) {
      for (int p = 0; p < o.ports_size(); ++p) {
        ports_[{o.serial(), p + 1}] = {o.ports(p).tx().port(), o.ports(p).rx().port()};
        sender_[o.ports(p).tx().port()] = absl::StrCat(o.serial(), "/", p + 1);
      }
    }
  }

  // Answers as the commands are handed over, except armed retrains (await_light): those
  // wait, as an agent waits for the light, and are answered when collected, from the switch
  // as it is then, or CANCELLED when their port was quiesced after they were armed.
  std::unique_ptr<agent_registry::SentCommands> Send(
      std::vector<agent_registry::AddressedCommand> commands, absl::Time) override {
    auto sent = std::make_unique<Sent>();
    std::vector<agent_registry::AddressedCommand> now;
    for (agent_registry::AddressedCommand& c : commands) {
      if (c.command.has_retrain() && c.command.retrain().has_await_light()) {
        absl::MutexLock lock(&mu_);
        sent_.push_back(c.command);
        ++armed_;
        sent->armed.push_back({sent->results.size(), sent_.size(), std::move(c)});
        sent->results.emplace_back(absl::InternalError("not answered"));
      } else {
        sent->results.push_back(Answer({c}).front());
      }
    }
    return sent;
  }
  std::vector<absl::StatusOr<v1::CommandResult>> Await(
      std::unique_ptr<agent_registry::SentCommands> handed) override {
    Sent& sent = static_cast<Sent&>(*handed);
    for (Sent::Armed& armed : sent.armed) {
      const v1::RetrainPort& r = armed.command.command.retrain();
      bool quiesced_since = false;
      {
        absl::MutexLock lock(&mu_);
        for (size_t i = armed.sent_at; i < sent_.size(); ++i) {
          quiesced_since |= sent_[i].has_quiesce() &&
                            sent_[i].quiesce().onic_serial() == r.onic_serial() &&
                            sent_[i].quiesce().port() == r.port();
        }
        if (quiesced_since) ++cancelled_;
      }
      bool runs_out = false;
      {
        absl::MutexLock lock(&mu_);
        runs_out = armed_waits_run_out_;
      }
      if (runs_out) {
        v1::CommandResult untrained;
        untrained.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
        untrained.set_message("no usable light by the end of the wait; not trained");
        sent.results[armed.index] = untrained;
      } else if (quiesced_since) {
        v1::CommandResult cancelled;
        cancelled.set_code(static_cast<int>(absl::StatusCode::kCancelled));
        cancelled.set_message("stopped waiting for light; the port was quiesced");
        sent.results[armed.index] = cancelled;
      } else {
        sent.results[armed.index] = Judge(armed.command);
      }
    }
    return std::move(sent.results);
  }
  bool ArmsRetrains(const std::string& serial) override {
    absl::MutexLock lock(&mu_);
    return !gone_.contains(serial) && (arm_all_ || arming_.contains(serial));
  }
  // Which agents arm retrains: every one, or those owning `serials`.
  void ArmRetrains(bool all, std::set<std::string> serials = {}) {
    absl::MutexLock lock(&mu_);
    arm_all_ = all;
    arming_ = std::move(serials);
  }
  // Armed retrains answer that their light did not come in time (a switch slower than the
  // wait), untrained.
  void ArmedWaitsRunOut(bool run_out) {
    absl::MutexLock lock(&mu_);
    armed_waits_run_out_ = run_out;
  }
  // Armed retrains handed over (with await_light), and armed retrains cancelled by a quiesce.
  int armed() {
    absl::MutexLock lock(&mu_);
    return armed_;
  }
  int cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  std::vector<absl::StatusOr<v1::CommandResult>> Answer(
      const std::vector<agent_registry::AddressedCommand>& commands) {
    absl::MutexLock lock(&mu_);
    std::vector<absl::StatusOr<v1::CommandResult>> out;
    for (const agent_registry::AddressedCommand& c : commands) {
      sent_.push_back(c.command);
      if (gone_.contains(c.onic_serial)) {
        out.push_back(absl::UnavailableError("agent went away"));
        continue;
      }
      v1::CommandResult result;
      if (c.command.has_quiesce() && refuse_quiesce_) {
        result.set_code(static_cast<int>(absl::StatusCode::kFailedPrecondition));
        result.set_message("driver busy");
      } else if (c.command.has_quiesce()) {
        quiesced_.insert({c.command.quiesce().onic_serial(), c.command.quiesce().port()});
      } else if (c.command.has_read_port()) {
        // Up with whoever's light arrives, as a link that kept working reports.
        const uint32_t egress =
            ports_[{c.command.read_port().onic_serial(), c.command.read_port().port()}].second;
        result.mutable_link()->set_status(v1::LINK_STATUS_DOWN);
        for (const switch_adapters::CrossConnect& x :
             sw_->ReadCrossConnects().value_or(std::vector<switch_adapters::CrossConnect>{})) {
          if (x.egress != egress || !Bright(egress)) continue;
          result.mutable_link()->set_status(v1::LINK_STATUS_UP);
          result.mutable_link()->set_peer_seen(sender_[x.ingress]);
        }
      } else if (c.command.has_retrain()) {
        const v1::RetrainPort& r = c.command.retrain();
        quiesced_.erase({r.onic_serial(), r.port()});
        if (!Lit(r)) {
          result.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
          result.set_message("no light");
        }
      }
      out.push_back(result);
    }
    return out;
  }
  // An armed retrain's answer once the wait is over: as a retrain handed over now.
  absl::StatusOr<v1::CommandResult> Judge(const agent_registry::AddressedCommand& armed) {
    absl::MutexLock lock(&mu_);
    if (gone_.contains(armed.onic_serial)) return absl::UnavailableError("agent went away");
    const v1::RetrainPort& r = armed.command.retrain();
    quiesced_.erase({r.onic_serial(), r.port()});
    v1::CommandResult result;
    if (!Lit(r)) {
      result.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
      result.set_message("no light");
    }
    return result;
  }
  // Whether the switch carries the expected peer's light to the retrained port.
  bool Lit(const v1::RetrainPort& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const uint32_t egress = ports_[{r.onic_serial(), r.port()}].second;
    const uint32_t ingress =
        ports_[{r.expected_peer().onic_serial(), r.expected_peer().port()}].first;
    std::vector<switch_adapters::CrossConnect> xs =
        sw_->ReadCrossConnects().value_or(std::vector<switch_adapters::CrossConnect>{});
    return std::find(xs.begin(), xs.end(), switch_adapters::CrossConnect{ingress, egress}) !=
               xs.end() &&
           Bright(egress);
  }
  // Whether the light the switch reads at `egress` is enough to train on (a failed port or a
  // power drop below the agents' -20 dBm is not). A switch whose management is unreachable
  // still passes light.
  bool Bright(uint32_t egress) {
    absl::StatusOr<std::vector<switch_adapters::PortPower>> power = sw_->ReadPower({egress});
    return !power.ok() || power->empty() || power->front().dbm >= -20.0;
  }

  bool HasOwner(const std::string& serial) override {
    std::function<void()> on_back;
    bool owned = false;
    {
      absl::MutexLock lock(&mu_);
      owned = !gone_.contains(serial);
      if (!owned && back_.serial == serial && --back_.asked == 0) {
        gone_.erase(serial);
        on_back.swap(back_.on_back);
        back_ = {};
      }
    }
    if (on_back) on_back();
    return owned;
  }

  // As the registry: what the agent last said of the port in its current connection.
  bool KnownQuiesced(const std::string& serial, uint32_t port) override {
    absl::MutexLock lock(&mu_);
    return !gone_.contains(serial) && quiesced_.contains({serial, port});
  }

  void SetGone(const std::string& serial, bool gone) {
    absl::MutexLock lock(&mu_);
    if (gone) {
      gone_.insert(serial);
      std::erase_if(quiesced_, [&](const auto& p) { return p.first == serial; });
    } else {
      gone_.erase(serial);
    }
  }
  // The gone agent of `serial` comes back just after the `asked`-th HasOwner(serial) has
  // answered no: `on_back` runs then, as the registry tells the engine of a connecting agent.
  void BackAfterAsked(const std::string& serial, int asked, std::function<void()> on_back) {
    absl::MutexLock lock(&mu_);
    back_ = {serial, asked, std::move(on_back)};
  }
  void RefuseQuiesce(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_quiesce_ = refuse;
  }
  int Count(v1::Command::ActionCase action) {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(std::count_if(sent_.begin(), sent_.end(), [&](const v1::Command& c) {
      return c.action_case() == action;
    }));
  }
  // SERIAL/PORT of each quiesce command handed over, in order.
  std::vector<std::string> QuiescedPorts() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const v1::Command& c : sent_) {
      if (c.has_quiesce())
        out.push_back(absl::StrCat(c.quiesce().onic_serial(), "/", c.quiesce().port()));
    }
    return out;
  }

 private:
  struct Sent : agent_registry::SentCommands {
    struct Armed {
      size_t index;    // In `results`.
      size_t sent_at;  // Commands handed over before it, itself included.
      agent_registry::AddressedCommand command;
    };
    std::vector<absl::StatusOr<v1::CommandResult>> results;
    std::vector<Armed> armed;
  };

  fleet::testing::FakeOpticalSwitch* const sw_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, int>, std::pair<uint32_t, uint32_t>> ports_;
  std::map<uint32_t, std::string> sender_;  // Ingress → the O-NIC port whose tx enters it.
  std::set<std::string> gone_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, uint32_t>> quiesced_ ABSL_GUARDED_BY(mu_);
  bool refuse_quiesce_ ABSL_GUARDED_BY(mu_) = false;
  struct Back {
    std::string serial;
    int asked = 0;
    std::function<void()> on_back;
  } back_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Command> sent_ ABSL_GUARDED_BY(mu_);
  bool arm_all_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> arming_ ABSL_GUARDED_BY(mu_);
  int armed_ ABSL_GUARDED_BY(mu_) = 0;
  bool armed_waits_run_out_ ABSL_GUARDED_BY(mu_) = false;
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fleet::engine

#endif  // FLEET_TESTS_ENGINE_LIGHT_CHECKING_AGENTS_H_
