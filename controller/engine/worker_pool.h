// Claims on allocations and the pooled threads their transactions run on.
//
// A claim marks an allocation as being in a change of this process (a transaction, a
// release, a sync, a lease check, a reconciliation pass): at most one holder at a time.
// A task is spawned with the claim it drops once done; workers are pooled, so a task does
// not wait for a thread to be made, and one idle for a while leaves. Every state here is
// under one mutex, and `changed` (claims dropped, tasks done, stopping) wakes every waiter.
//
// Bounded: at most `max_workers` workers run spawned tasks; more wait in the queue, in order.
// A task that a running task waits for (SpawnAwaited: a transaction's store commit running
// beside its switch batch) goes first and gets a worker at once, beyond the bound if need
// be, so a full pool never waits for itself; such helpers are short and at most a few per
// running task, so the threads stay below max_workers × (1 + helpers per task). The queue's
// own bound is for callers to ask (HasRoom) before they take on new work; Spawn itself never
// refuses work it was handed, except while stopping.
//
// Claim waits give up at deadlines on the pool's Clock (a test's fake one moves them); how long
// an idle worker lingers is real time (it is about threads, not about the engine's logic).
//
// Stopping: Stop() refuses new tasks (and drops their claims); tasks already queued still
// run; WaitIdle() waits for them; JoinWorkers() then joins every thread, so none outlives
// the pool's owner.
#ifndef FLEET_CONTROLLER_ENGINE_WORKER_POOL_H_
#define FLEET_CONTROLLER_ENGINE_WORKER_POOL_H_

#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace fleet::engine {

class WorkerPool {
 public:
  struct Options {
    int max_workers = 64;
    // What HasRoom allows to wait for a worker.
    size_t max_queued = 1024;
    // How long an idle worker waits for a task before it leaves.
    absl::Duration linger = absl::Seconds(10);
  };
  WorkerPool() : WorkerPool(Options{}) {}
  // `clock` is not owned and must outlive the pool.
  explicit WorkerPool(Options options, const Clock* clock = &SystemClock::Get())
      : options_(options), clock_(*clock) {}
  ~WorkerPool();  // Stops, waits for the queued tasks and joins every worker.
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Called with each claim dropped (Unclaim, or a task's end), without the lock and before the
  // task counts as done, so WaitIdle also waits for what it spawns. Set before any task.
  void OnUnclaimed(std::function<void(const std::string& id)> fn) { on_unclaimed_ = std::move(fn); }

  // Claims `id`; false if another holds it.
  bool Claim(const std::string& id);
  void Unclaim(const std::string& id);
  // Claims `id`, waiting for its holder to let go while `may_wait()` (asked after each
  // refused claim, without the lock) says so, up to `give_up`. False when `may_wait` says
  // no, when stopping, or past `give_up`.
  bool ClaimWhenFree(const std::string& id, absl::Time give_up,
                     const std::function<bool()>& may_wait);
  enum class Claimed { kClaimed, kStopping, kBusy };
  // Waits for `id` to be free (up to `give_up`, or until stopping) and claims it.
  Claimed WaitAndClaim(const std::string& id, absl::Time give_up);
  // Waits until none of `ids` is claimed, up to `give_up` or until stopping.
  void WaitUnclaimed(const std::vector<std::string>& ids, absl::Time give_up);
  // The claims held now.
  std::set<std::string> Claims();

  // Runs `fn` on a worker holding the claim on `id` (if not empty), dropped after it, once a
  // worker is free. False (and `fn` dropped, the claim too) once stopping.
  bool Spawn(const std::string& id, std::function<void()> fn);
  // Runs `fn`, which a running task waits for, ahead of the queue and on a worker at once.
  // False (and `fn` dropped) once stopping: the caller runs it itself.
  bool SpawnAwaited(std::function<void()> fn);
  // Whether fewer than max_queued tasks wait for a worker: new work may be taken on.
  bool HasRoom();

  // Begins stopping; false if it had begun already.
  bool Stop();
  bool stopping();
  // Waits for every spawned task to finish, and every unclaim hook in flight.
  void WaitIdle();
  // Waits until no task runs and no claim is held (a thread that claimed may be about to
  // spawn); for tests.
  void WaitQuiet();
  // After Stop and WaitIdle: the idle workers leave and every worker is joined.
  void JoinWorkers();

  // Workers alive now (running or idle), for tests and benches.
  int WorkersForTest();
  // The most workers alive at once since construction.
  int PeakWorkers();

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};  // Left WorkerLoop: ready to join.
  };
  struct Task {
    std::string id;  // The claim dropped after it; empty for none.
    std::function<void()> fn;
  };
  void WorkerLoop();
  // Queues `task` (first if `awaited`) and makes a worker if none is idle for it and the bound
  // (ignored for `awaited`) allows.
  bool Queue(Task task, bool awaited);

  const Options options_;
  const Clock& clock_;
  std::function<void(const std::string&)> on_unclaimed_;
  absl::Mutex mu_;
  absl::CondVar changed_;      // A claim dropped, a task done, or stopping.
  absl::CondVar task_queued_;  // For idle workers.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // Spawned tasks not yet done.
  // Every worker thread, joined once done (reaped by Spawn, all of them by JoinWorkers).
  std::list<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);  // Spawned, not yet taken by a worker.
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int alive_ ABSL_GUARDED_BY(mu_) = 0;  // Workers not yet out of WorkerLoop.
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
  int hooks_running_ ABSL_GUARDED_BY(mu_) = 0;  // Unclaim hooks called and not yet back.
  std::set<std::string> claimed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_WORKER_POOL_H_
