// One switch's programming queue: concurrent reconfigurations hand in their cross-connect
// changes, and changes that arrive while the switch is busy go out together as one batch
// (group commit). The switch is never sent two batches at once, and a batch never holds two
// changes to one port, because the store admits no port into two desired circuits.
//
// Contract:
// - Program() blocks until the caller's changes were applied and verified by read-back, or
//   failed. A caller that finds the switch free leads the batch on its own thread (no thread
//   is woken on the common path of one switch) and applies everything queued by then, in one
//   OpticalSwitch::Apply (removes before adds).
// - Submit() queues changes and returns at once; the switch's own thread (a serial executor,
//   started with it and joined by its destructor) leads the batch that takes them, unless a
//   caller of Program leads first; Wait() blocks until they are done. A change across k
//   switches leads one switch itself and submits the others (SwitchProgrammers::Program), so
//   no thread is made per call.
// - `going`, if set, runs once, just before the batch holding the caller's changes goes to
//   the switch (on the leader's thread), or not at all if the changes never go out. Work
//   that should start as the switch moves, and not hold up the batch behind it, goes there;
//   it must not wait for this switch.
// - On failure of a combined batch the switch is rolled back to what it held before the
//   batch (the adds that landed are removed, the removes that landed are restored), and each
//   change set is then tried alone, so one bad request cannot fail its neighbours. A change
//   set that fails alone is rolled back too and gets the switch's error.
// - Exclusive() runs a function with the switch to itself (reconciliation, a sync's look at
//   its cross-connects), between batches, on the caller's thread. Sections waiting go before
//   the next batch, but each lets the batch queued behind it go next, so neither starves.
#ifndef FLEET_CONTROLLER_ENGINE_SWITCH_PROGRAMMER_H_
#define FLEET_CONTROLLER_ENGINE_SWITCH_PROGRAMMER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "switch_adapters/optical_switch.h"

namespace fleet::engine {

struct ProgramOutcome {
  absl::Status status;          // The switch's error, with its message, when not OK.
  absl::Duration program_time;  // From the batch's start to the end of its changes.
  absl::Duration verify_time;   // The read-back and comparison.
  int batch_size = 1;           // Change sets that went out in the same batch.
  bool rolled_back = false;     // Changes that landed were undone after a failure.
  absl::Status rollback_error;  // The rollback itself failed: the switch may differ (drift).
  // The changes went out twice: a combined batch failed and was undone, then this change set
  // was applied alone. The light at its ports came and went before it came to stay.
  bool retried = false;
};

class SwitchProgrammer {
  struct Ticket;

 public:
  // `name` is the switch id, for messages. `driver` is not owned; it outlives this.
  SwitchProgrammer(std::string name, switch_adapters::OpticalSwitch* driver);
  // Sends what is queued, then joins the switch's thread.
  ~SwitchProgrammer();
  SwitchProgrammer(const SwitchProgrammer&) = delete;
  SwitchProgrammer& operator=(const SwitchProgrammer&) = delete;

  using Pending = std::shared_ptr<Ticket>;
  Pending Submit(const switch_adapters::CrossConnectBatch& changes,
                 std::function<void()> going = {});
  ProgramOutcome Wait(const Pending& pending);
  ProgramOutcome Program(const switch_adapters::CrossConnectBatch& changes,
                         std::function<void()> going = {});

  // Runs `fn` on the driver while no batch is in flight and none starts.
  void Exclusive(const std::function<void(switch_adapters::OpticalSwitch&)>& fn);

  // The driver, for reads outside the queue (the switch monitor's): the driver serializes its
  // own calls, so a read waits for a command in flight and changes nothing.
  switch_adapters::OpticalSwitch& driver() const { return *driver_; }

  // Batches applied since construction (a retry of one change set counts too).
  int batches() const;
  // Change sets waiting for the next batch.
  int queued() const;
  // Exclusive sections waiting for the switch (for tests).
  int ExclusiveWaitingForTest() const;

 private:
  struct Ticket {
    switch_adapters::CrossConnectBatch changes;
    std::function<void()> going;
    bool done = false;
    ProgramOutcome outcome;
  };

  // The switch's thread: leads a batch whenever submitted changes wait and the switch is free.
  void Run();
  bool MaySend() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leads one batch of everything queued; with mu_ held, released while the switch works.
  void SendQueued() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A batch or an exclusive section ended: wakes whoever may lead next.
  void Ended() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies `batch`, rolling back on failure. Runs with busy_ held, without mu_.
  ProgramOutcome ApplyWithRollback(const switch_adapters::CrossConnectBatch& batch);
  void RunBatch(std::deque<std::shared_ptr<Ticket>> tickets);

  const std::string name_;
  switch_adapters::OpticalSwitch* const driver_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;                   // A batch or an exclusive section ended.
  absl::CondVar submitted_cv_;              // For the switch's thread: submitted work, or stopping.
  int submitted_ ABSL_GUARDED_BY(mu_) = 0;  // Submitted tickets in queue_.
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int exclusive_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  // An exclusive section ended with a batch queued: that batch goes before the next section.
  bool batch_owed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<Ticket>> queue_ ABSL_GUARDED_BY(mu_);
  int batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // Last: started once the rest is built.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_SWITCH_PROGRAMMER_H_
