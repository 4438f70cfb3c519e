#include "controller/engine/switch_programmer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"

namespace fleet::engine {

ProgramOutcome SwitchProgrammer::ApplyWithRollback(
    const switch_adapters::CrossConnectBatch& batch) {
  ProgramOutcome outcome;
  // Real time, as the driver's verify_time is: this measures the switch itself.
  const absl::Time start = absl::Now();
  switch_adapters::ApplyResult result = driver_->Apply(batch);
  {
    absl::MutexLock lock(&mu_);
    ++batches_;
  }
  outcome.verify_time = result.verify_time;
  outcome.program_time = absl::Now() - start - result.verify_time;
  outcome.status = result.status;
  if (result.status.ok() || (result.added.empty() && result.removed.empty())) return outcome;
  // Back to the last good cross-connects: undo exactly what this call changed.
  switch_adapters::CrossConnectBatch undo;
  undo.remove = result.added;
  undo.add = result.removed;
  switch_adapters::ApplyResult undone = driver_->Apply(undo);
  outcome.rolled_back = undone.status.ok();
  if (!undone.status.ok()) {
    outcome.rollback_error = absl::Status(
        undone.status.code(),
        absl::StrCat("rolling back switch ", name_, " failed: ", undone.status.message()));
  }
  return outcome;
}

void SwitchProgrammer::RunBatch(std::deque<std::shared_ptr<Ticket>> tickets) {
  for (const auto& t : tickets) {
    if (t->going) std::exchange(t->going, nullptr)();
  }
  if (tickets.size() == 1) {
    tickets.front()->outcome = ApplyWithRollback(tickets.front()->changes);
    return;
  }
  switch_adapters::CrossConnectBatch combined;
  for (const auto& t : tickets) {
    combined.remove.insert(combined.remove.end(), t->changes.remove.begin(),
                           t->changes.remove.end());
    combined.add.insert(combined.add.end(), t->changes.add.begin(), t->changes.add.end());
  }
  ProgramOutcome together = ApplyWithRollback(combined);
  if (together.status.ok()) {
    for (auto& t : tickets) {
      t->outcome = together;
      t->outcome.batch_size = static_cast<int>(tickets.size());
    }
    return;
  }
  // Find the culprit: each change set alone. A rollback that failed leaves the switch
  // unknown; then nobody is retried and everyone gets the error.
  for (auto& t : tickets) {
    if (!together.rollback_error.ok()) {
      t->outcome = together;
      continue;
    }
    t->outcome = ApplyWithRollback(t->changes);
    t->outcome.retried = true;
  }
}

SwitchProgrammer::SwitchProgrammer(std::string name, switch_adapters::OpticalSwitch* driver)
    : name_(std::move(name)), driver_(driver), thread_([this] {
        NameThisThread("sw " + name_);
        Run();
      }) {}

SwitchProgrammer::~SwitchProgrammer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    submitted_cv_.Signal();
  }
  thread_.join();
}

bool SwitchProgrammer::MaySend() const {
  return !queue_.empty() && !busy_ && (exclusive_waiting_ == 0 || batch_owed_);
}

void SwitchProgrammer::SendQueued() {
  busy_ = true;
  batch_owed_ = false;
  submitted_ = 0;  // Every ticket queued goes, whoever leads.
  std::deque<std::shared_ptr<Ticket>> batch;
  batch.swap(queue_);
  mu_.Unlock();
  RunBatch(batch);
  mu_.Lock();
  for (auto& t : batch) t->done = true;
  busy_ = false;
  Ended();
}

void SwitchProgrammer::Ended() {
  changed_.SignalAll();
  if (submitted_ > 0) submitted_cv_.Signal();
}

ProgramOutcome SwitchProgrammer::Program(const switch_adapters::CrossConnectBatch& changes,
                                         std::function<void()> going) {
  auto ticket = std::make_shared<Ticket>();
  ticket->changes = changes;
  ticket->going = std::move(going);
  absl::MutexLock lock(&mu_);
  queue_.push_back(ticket);
  while (!ticket->done) {
    if (MaySend()) {
      SendQueued();  // Lead: everything queued by now, our own ticket included.
    } else {
      changed_.Wait(&mu_);
    }
  }
  return ticket->outcome;
}

SwitchProgrammer::Pending SwitchProgrammer::Submit(
    const switch_adapters::CrossConnectBatch& changes, std::function<void()> going) {
  auto ticket = std::make_shared<Ticket>();
  ticket->changes = changes;
  ticket->going = std::move(going);
  absl::MutexLock lock(&mu_);
  queue_.push_back(ticket);
  ++submitted_;
  submitted_cv_.Signal();
  return ticket;
}

ProgramOutcome SwitchProgrammer::Wait(const Pending& pending) {
  absl::MutexLock lock(&mu_);
  while (!pending->done) changed_.Wait(&mu_);
  return pending->outcome;
}

void SwitchProgrammer::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    // Submitted changes go out even while stopping: their callers wait for them.
    while (!(submitted_ > 0 && MaySend()) && !(stopping_ && submitted_ == 0)) {
      submitted_cv_.Wait(&mu_);
    }
    if (submitted_ == 0) return;
    SendQueued();
  }
}

void SwitchProgrammer::Exclusive(const std::function<void(switch_adapters::OpticalSwitch&)>& fn) {
  {
    absl::MutexLock lock(&mu_);
    ++exclusive_waiting_;
    while (busy_ || batch_owed_) changed_.Wait(&mu_);
    --exclusive_waiting_;
    busy_ = true;
  }
  fn(*driver_);
  absl::MutexLock lock(&mu_);
  busy_ = false;
  batch_owed_ = !queue_.empty();
  Ended();
}

int SwitchProgrammer::batches() const {
  absl::MutexLock lock(&mu_);
  return batches_;
}

int SwitchProgrammer::ExclusiveWaitingForTest() const {
  absl::MutexLock lock(&mu_);
  return exclusive_waiting_;
}

int SwitchProgrammer::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

}  // namespace fleet::engine
