// The engine's parts as the higher ones (release, leases, drain, member changes,
// reconciliation, agent events) reach them. Engine (engine.h) owns them all, wires them and
// joins their threads before any of them goes.
#ifndef FLEET_CONTROLLER_ENGINE_ENGINE_PARTS_H_
#define FLEET_CONTROLLER_ENGINE_ENGINE_PARTS_H_

#include <string>
#include <utility>
#include <vector>

#include "controller/engine/admission.h"
#include "controller/engine/engine_context.h"
#include "controller/engine/inventory_cache.h"
#include "controller/engine/link_trainer.h"
#include "controller/engine/stage_costs.h"
#include "controller/engine/switch_programmers.h"
#include "controller/engine/sync_queue.h"
#include "controller/engine/transaction.h"
#include "controller/engine/worker_pool.h"

namespace fleet::engine {

struct EngineParts {
  const EngineContext& ctx;
  WorkerPool& pool;
  InventoryCache& inventory;
  SyncQueue& syncs;
  LinkTrainer& trainer;
  SwitchProgrammers& programmers;
  Admission& admission;
  StageCosts& costs;

  // Runs a transaction of allocation `id` (Transaction), with its claim held.
  void Reconfigure(const std::string& id, std::vector<v1::StageTiming> admitted,
                   PhaseSwitch phase_switch = {}, const v1::Allocation* stored = nullptr) const {
    Transaction(TransactionParts{ctx, pool, inventory, trainer, programmers, syncs, costs}, id,
                std::move(admitted), std::move(phase_switch))
        .Run(stored);
  }
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_ENGINE_PARTS_H_
