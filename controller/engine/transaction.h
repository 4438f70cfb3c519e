// One reconfiguration of an allocation (engine.h describes the sequence and its faults), run
// to its end on a worker that holds the allocation's claim. Its stages, in order:
//   Load      the allocation (the circuits to make: desired and not ACTIVE)
//   Quiesce   the intent synced, then the ports whose light changes quiesced; PROGRAMMING
//             committed on another worker meanwhile (or as the batch goes)
//   Arm       as the batch goes to the switch, retrains to the agents that can wait for light
//   Program   one batch per switch (a phase switch's removes first), verified
//   Train     TRAINING committed while the other links retrain
//   Finish    READY, or DEGRADED naming the links (retried with backoff)
// A quiesce or switch refusal fails the allocation (Fail), or, for a phase switch, goes back
// to the phase it was from. Every state is committed in order: a later one waits for
// PROGRAMMING. EngineOptions::fault_point is called at the kFaultPoints as today.
#ifndef FLEET_CONTROLLER_ENGINE_TRANSACTION_H_
#define FLEET_CONTROLLER_ENGINE_TRANSACTION_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "controller/engine/engine_context.h"
#include "controller/engine/inventory_cache.h"
#include "controller/engine/link_trainer.h"
#include "controller/engine/stage_costs.h"
#include "controller/engine/switch_programmers.h"
#include "controller/engine/sync_queue.h"
#include "controller/engine/worker_pool.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

// What a transaction takes off the switch before it makes the new circuits.
struct PhaseSwitch {
  // The phase active before; for a resumed transaction, the phase of the circuits it left
  // on the switch when that is certain (InterruptedSwitchFrom), else empty. A transaction
  // with one that fails at the switch goes back to it, DEGRADED until its links retrain.
  std::string from;
  // Circuits of a phase no longer active (or a member change's removals), removed in the
  // same batch before the adds.
  std::vector<v1::Circuit> removes;
};

// The parts a transaction works with; all outlive it.
struct TransactionParts {
  const EngineContext& ctx;
  WorkerPool& pool;
  InventoryCache& inventory;
  LinkTrainer& trainer;
  SwitchProgrammers& programmers;
  SyncQueue& syncs;
  StageCosts& costs;  // Where the stages of a change of circuits are recorded.
};

class Transaction {
 public:
  // `admitted`: the plan and persist timings of a fresh request; empty when resuming.
  Transaction(const TransactionParts& parts, std::string id, std::vector<v1::StageTiming> admitted,
              PhaseSwitch phase_switch);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Runs the stages. `stored`: the allocation as admission just stored it, which saves
  // reading it back.
  void Run(const v1::Allocation* stored = nullptr);

 private:
  bool Load(const v1::Allocation* stored);
  bool Quiesce();
  void Arm();
  absl::Status Program();
  bool Programmed(const absl::Status& programmed);
  bool Train();
  void Finish();
  void Fail(const absl::Status& why, const std::string& stage);
  // Counts the outcome and the stages this run timed.
  void Count(const std::string& outcome);
  // PROGRAMMING: started once (on another worker), waited for by every later state.
  void StartProgramming();
  void CommitProgramming();
  bool ProgrammingRecorded();

  const TransactionParts p_;
  const std::string id_;
  const PhaseSwitch phase_switch_;
  // A resumed transaction keeps the plan's timing and times its own stages again.
  const bool resumed_;
  std::vector<v1::StageTiming> timings_;
  size_t first_timed_here_ = 0;
  v1::Allocation loaded_;
  std::vector<v1::Circuit> circuits_;  // To make and retrain.

  store::AllocationUpdate programming_;
  absl::Notification programming_done_;
  bool recorded_ = false;
  absl::once_flag programming_started_;

  std::vector<const v1::Circuit*> armable_, unarmed_;
  LinkTrainer::Training armed_;
  absl::Notification arming_done_;
  absl::once_flag arming_started_;
  bool retried_ = false;          // A switch applied the batch twice.
  LinkTrainer::Failures failed_;  // The links that did not train.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_TRANSACTION_H_
