#include "testing/fake_optical_switch.h"

#include "absl/strings/str_cat.h"

namespace fleet::testing {

using switch_adapters::ApplyResult;
using switch_adapters::BatchDriver;
using switch_adapters::CrossConnect;
using switch_adapters::CrossConnectBatch;
using switch_adapters::PortPower;
using switch_adapters::PortState;
using switch_adapters::PortStatus;
using switch_adapters::SwitchIdentity;

FakeOpticalSwitch::FakeOpticalSwitch(uint32_t ingress_ports, uint32_t egress_ports)
    : ingress_ports_(ingress_ports), egress_ports_(egress_ports) {}

absl::Status FakeOpticalSwitch::CheckReachable() const { return unreachable_; }

std::vector<CrossConnect> FakeOpticalSwitch::SortedLocked() const {
  std::vector<CrossConnect> out;
  for (const auto& [in, eg] : by_ingress_) out.push_back({in, eg});
  return out;
}

absl::StatusOr<SwitchIdentity> FakeOpticalSwitch::Identity() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  return SwitchIdentity{"fake",         absl::StrCat("fake-", ingress_ports_, "x", egress_ports_),
                        "FAKE-0001",    "1.0",
                        ingress_ports_, egress_ports_};
}

absl::StatusOr<std::vector<CrossConnect>> FakeOpticalSwitch::ReadCrossConnects() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  return SortedLocked();
}

absl::StatusOr<std::vector<PortState>> FakeOpticalSwitch::ReadPorts() {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  std::vector<PortState> out;
  for (uint32_t p = 1; p <= ingress_ports_ + egress_ports_; ++p) {
    PortStatus status = failed_.contains(p)   ? PortStatus::kFailed
                        : closed_.contains(p) ? PortStatus::kDisabled
                                              : PortStatus::kEnabled;
    out.push_back({p, status});
  }
  return out;
}

absl::StatusOr<std::vector<PortPower>> FakeOpticalSwitch::ReadPower(
    const std::vector<uint32_t>& ports) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  std::map<uint32_t, uint32_t> by_egress;
  for (const auto& [ingress, egress] : by_ingress_) by_egress[egress] = ingress;
  auto dark = [&](uint32_t p) { return failed_.contains(p) || closed_.contains(p); };
  auto drop = [&](uint32_t p) {
    auto it = drops_.find(p);
    return it == drops_.end() ? 0.0 : it->second;
  };
  auto reading = [&](uint32_t p) {
    PortPower power{.port = p};
    if (p <= ingress_ports_) {
      if (!dark(p)) power.dbm = kLaunchDbm - drop(p);
    } else if (auto in = by_egress.find(p);
               in != by_egress.end() && !dark(p) && !dark(in->second)) {
      power.dbm = kLaunchDbm - kLossDb - drop(in->second) - drop(p);
    }
    return power;
  };
  std::vector<PortPower> out;
  if (ports.empty()) {
    for (uint32_t p = 1; p <= ingress_ports_ + egress_ports_; ++p) out.push_back(reading(p));
  } else {
    for (uint32_t p : ports) out.push_back(reading(p));
  }
  return out;
}

absl::Status FakeOpticalSwitch::SetShutters(const std::vector<uint32_t>& ports, bool open) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckReachable(); !s.ok()) return s;
  for (uint32_t p : ports) {
    if (p == 0 || p > ingress_ports_ + egress_ports_) {
      return absl::InvalidArgumentError(absl::StrCat("port ", p, " is outside the switch"));
    }
  }
  for (uint32_t p : ports) {
    if (open) {
      closed_.erase(p);
    } else {
      closed_.insert(p);
    }
  }
  return absl::OkStatus();
}

ApplyResult FakeOpticalSwitch::Apply(const CrossConnectBatch& batch) {
  absl::MutexLock lock(&mu_);
  ApplyResult result;
  result.status = CheckReachable();
  if (!result.status.ok()) return result;
  int budget = fail_after_;
  fail_after_ = -1;
  ++held_;
  mu_.Await(absl::Condition(
      +[](bool* hold) { return !*hold; }, &hold_));
  --held_;
  // Applies each change while the injected failure budget lasts.
  auto change = [&](const std::vector<CrossConnect>& xs, bool add) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    ++result.commands;
    for (const CrossConnect& x : xs) {
      if (budget == 0) return absl::UnavailableError("injected failure part-way through a batch");
      if (budget > 0) --budget;
      if (add) {
        by_ingress_[x.ingress] = x.egress;
      } else {
        by_ingress_.erase(x.ingress);
      }
      ++changes_;
    }
    return absl::OkStatus();
  };
  BatchDriver driver{[&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                       ++result.commands;
                       return absl::StatusOr<std::vector<CrossConnect>>(SortedLocked());
                     },
                     [&](const std::vector<CrossConnect>& xs) { return change(xs, false); },
                     [&](const std::vector<CrossConnect>& xs) { return change(xs, true); }};
  result.status = RunApply(batch, ingress_ports_, egress_ports_, driver, result);
  return result;
}

void FakeOpticalSwitch::SetUnreachable(absl::Status status) {
  absl::MutexLock lock(&mu_);
  unreachable_ = std::move(status);
}

void FakeOpticalSwitch::FailNextApplyAfter(int changes) {
  absl::MutexLock lock(&mu_);
  fail_after_ = changes;
}

void FakeOpticalSwitch::ForceCrossConnect(CrossConnect x) {
  absl::MutexLock lock(&mu_);
  by_ingress_[x.ingress] = x.egress;
}

void FakeOpticalSwitch::SetPowerDrop(uint32_t port, double db) {
  absl::MutexLock lock(&mu_);
  if (db == 0) {
    drops_.erase(port);
  } else {
    drops_[port] = db;
  }
}

void FakeOpticalSwitch::SetPortFailed(uint32_t port, bool failed) {
  absl::MutexLock lock(&mu_);
  if (failed) {
    failed_.insert(port);
  } else {
    failed_.erase(port);
  }
}

void FakeOpticalSwitch::HoldApplies(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_ = hold;
}

int FakeOpticalSwitch::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

int FakeOpticalSwitch::changes() const {
  absl::MutexLock lock(&mu_);
  return changes_;
}

}  // namespace fleet::testing
