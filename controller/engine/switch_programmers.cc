#include "controller/engine/switch_programmers.h"

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace fleet::engine {
namespace {

// The message of a switch's failed part, with its rollback.
std::string FailureOf(const std::string& switch_id, const ProgramOutcome& outcome) {
  std::string message = absl::StrCat("switch ", switch_id, ": ", outcome.status.message());
  if (outcome.rolled_back) absl::StrAppend(&message, " (rolled back)");
  if (!outcome.rollback_error.ok())
    absl::StrAppend(&message, "; ", outcome.rollback_error.message());
  return message;
}

}  // namespace

absl::StatusOr<SwitchProgrammer*> SwitchProgrammers::For(const std::string& switch_id) {
  // From the cached inventory, not a database read on the way to the switch: a change of the
  // switch's address is an inventory change, and reloads the cache.
  ASSIGN_OR_RETURN(std::shared_ptr<const CachedInventory> inventory, inventory_->Current());
  auto sw = absl::c_find_if(inventory->site.switches(),
                            [&](const v1::Switch& s) { return s.id() == switch_id; });
  if (sw == inventory->site.switches().end()) {
    return absl::NotFoundError(absl::StrCat("switch ", switch_id, " not found"));
  }
  ASSIGN_OR_RETURN(switch_adapters::OpticalSwitch * driver, switches_->Driver(*sw));
  absl::MutexLock lock(&mu_);
  auto& programmer = programmers_[switch_id];
  // A rebuilt driver (the switch's address changed) gets a fresh queue.
  if (programmer == nullptr || drivers_[switch_id] != driver) {
    if (programmer != nullptr) retired_.push_back(std::move(programmer));
    programmer = std::make_unique<SwitchProgrammer>(switch_id, driver);
    drivers_[switch_id] = driver;
  }
  return programmer.get();
}

std::map<std::string, SwitchProgrammers::Queue> SwitchProgrammers::Queues() {
  absl::MutexLock lock(&mu_);
  std::map<std::string, Queue> out;
  for (const auto& [id, p] : programmers_) out[id] = {p->batches(), p->queued()};
  return out;
}

absl::Status SwitchProgrammers::Program(const std::vector<v1::Circuit>& removes,
                                        const std::vector<v1::Circuit>& adds,
                                        absl::Duration* program_time, absl::Duration* verify_time,
                                        bool* retried, const std::function<void()>& going) {
  std::map<std::string, switch_adapters::CrossConnectBatch> by_switch;
  for (const auto& [circuits, remove] : {std::pair{&removes, true}, std::pair{&adds, false}}) {
    for (const v1::Circuit& c : *circuits) {
      for (const v1::CrossConnect& x : c.cross_connects()) {
        switch_adapters::CrossConnectBatch& b = by_switch[x.switch_id()];
        (remove ? b.remove : b.add).push_back({x.ingress(), x.egress()});
      }
    }
  }
  // Every switch is found before any is touched, then the switches program at once: a circuit
  // across a trunk waits for the slower switch, not for the sum of both.
  std::vector<std::pair<SwitchProgrammer*, const switch_adapters::CrossConnectBatch*>> parts;
  for (const auto& [switch_id, batch] : by_switch) {
    absl::StatusOr<SwitchProgrammer*> programmer = For(switch_id);
    if (!programmer.ok()) {
      return absl::Status(programmer.status().code(),
                          absl::StrCat("switch ", switch_id, ": ", programmer.status().message()));
    }
    parts.push_back({*programmer, &batch});
  }
  std::vector<ProgramOutcome> outcomes(parts.size());
  {
    absl::once_flag first_going;
    auto part_going = [&] {
      if (going) absl::call_once(first_going, going);
    };
    // Every switch but the first to its own thread, the first led here; then wait for all.
    std::vector<SwitchProgrammer::Pending> pending(parts.size());
    for (size_t i = 1; i < parts.size(); ++i) {
      pending[i] = parts[i].first->Submit(*parts[i].second, part_going);
    }
    if (!parts.empty()) outcomes[0] = parts[0].first->Program(*parts[0].second, part_going);
    for (size_t i = 1; i < parts.size(); ++i) outcomes[i] = parts[i].first->Wait(pending[i]);
  }
  std::vector<std::pair<SwitchProgrammer*, switch_adapters::CrossConnectBatch>> done;
  absl::Status failure;
  auto switch_id = by_switch.begin();
  for (size_t i = 0; i < parts.size(); ++i, ++switch_id) {
    const ProgramOutcome& outcome = outcomes[i];
    if (program_time) *program_time = std::max(*program_time, outcome.program_time);
    if (verify_time) *verify_time = std::max(*verify_time, outcome.verify_time);
    if (retried) *retried = *retried || outcome.retried;
    if (outcome.status.ok()) {
      done.push_back({parts[i].first, *parts[i].second});
      continue;
    }
    const std::string message = FailureOf(switch_id->first, outcome);
    if (failure.ok()) {
      failure = absl::Status(outcome.status.code(), message);
    } else {
      failure = absl::Status(failure.code(), absl::StrCat(failure.message(), "; ", message));
    }
  }
  if (failure.ok()) return failure;
  // Undo the switches that took their part, so the fabric is as it was before the request.
  for (auto& [programmer, batch] : done) {
    switch_adapters::CrossConnectBatch undo;
    undo.remove = batch.add;
    undo.add = batch.remove;
    ProgramOutcome undone = programmer->Program(undo);
    if (!undone.status.ok()) {
      failure =
          absl::Status(failure.code(),
                       absl::StrCat(failure.message(),
                                    "; undoing another switch failed: ", undone.status.message()));
    }
  }
  return failure;
}

}  // namespace fleet::engine
