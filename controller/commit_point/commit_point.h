// The commit point: the one gate every effect of a fleetd passes on its way out of the
// process. Three kinds of effect exist, each checked where it leaves:
//   - a write to the store: StoreConnection::Commit, just before SQLite's COMMIT, for every
//     write of every aggregate (inventory, allocations, events, retention's pruning);
//   - a command that changes a switch: OpticalSwitch::Apply and SetShutters of every driver
//     the switch registry hands out (its MeasuredSwitch), rollbacks and repairs included,
//     and again inside the driver before each protocol command it writes, a resend after a
//     reconnect included (switch_adapters::ChangeGate);
//   - a command to an agent: AgentRegistry::Send, before its commands are queued for the
//     agents' streams; and an agent's stream as it registers, so that agents stay connected
//     only to a fleetd that may command them.
// Reads of the store and of switches pass no gate: a replica that may not act may still
// look (every agent command is gated, a port read included). Nor does the store's upkeep of
// its own file as it opens (schema migrations, and columns derived from stored rows filled
// in), nor the hand-back of free pages (StorageControl::ReclaimFreePages).
//
// Guarantees:
// - An effect goes out only if the fence said OK for it just before, on the thread that
//   sends it: a store write under the store's connection mutex, a switch command with the
//   switch to itself (a batch of its programming queue, or an exclusive section, so between
//   any two batches) and each of its protocol commands just before it is written (so a
//   replica paused mid-batch asks again on waking, however long it slept). An agent command is
//   checked as it is queued; one queued before the fence closed may still be written to its stream,
//   and runs only until its deadline. When the fence refuses, nothing of the effect happens (the
//   store's transaction rolls back whole; no byte goes to the switch; no command is queued) and the
//   caller gets the fence's status as it is.
// - Without a fence every effect passes: a single fleetd, as today.
//
// What a fence is for: a replicated fleetd (several replicas, one leader) installs one that
// answers OK only while this replica leads and, by its own monotonic clock, will still lead
// for longer than an effect takes (its lease's remaining time less a margin), and that holds
// the leader's epoch for the replicated store's writes. A deposed leader is thereby stopped
// at its next effect, between any two switch batches, without every part knowing of leaders.
// The fence must be cheap (it runs on every effect), must not call back into what it gates,
// and counts its own refusals (it knows why it refused).
#ifndef FLEET_CONTROLLER_COMMIT_POINT_COMMIT_POINT_H_
#define FLEET_CONTROLLER_COMMIT_POINT_COMMIT_POINT_H_

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace fleet {

enum class Effect { kStoreWrite, kSwitchCommand, kAgentCommand };
// "store write", "switch command", "agent command": for messages.
absl::string_view EffectName(Effect effect);

class CommitPoint {
 public:
  // OK when this fleetd may perform `effect` now; otherwise the status the effect fails with
  // (UNAVAILABLE naming who may act, by convention). Called from any thread.
  using Fence = std::function<absl::Status(Effect effect)>;

  // Installs `fence` (empty: none) for every effect from now on. An effect already past Pass
  // goes out under the fence it passed.
  void SetFence(Fence fence) ABSL_LOCKS_EXCLUDED(mu_);

  // Asks the fence about `effect` (the guarantees above); the senders call it, nobody else.
  absl::Status Pass(Effect effect) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const Fence> fence_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet

#endif  // FLEET_CONTROLLER_COMMIT_POINT_COMMIT_POINT_H_
