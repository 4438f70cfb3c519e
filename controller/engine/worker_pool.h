// Claims on allocations and the pooled threads their transactions run on.
//
// A claim marks an allocation as being in a change of this process (a transaction, a
// release, a retry, a lease check, a reconciliation pass): at most one holder at a time.
// A task is spawned with the claim it drops once done; workers are pooled, so a task does
// not wait for a thread to be made, and one idle for a while leaves. Every state here is
// under one mutex, and `changed` (claims dropped, tasks done, stopping) wakes every waiter.
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

namespace fleet::engine {

class WorkerPool {
 public:
  // `linger`: how long an idle worker waits for a task before it leaves.
  explicit WorkerPool(absl::Duration linger = absl::Seconds(10)) : linger_(linger) {}
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

  // Runs `fn` on a worker holding the claim on `id` (if not empty), dropped after it. False
  // (and `fn` dropped, the claim too) once stopping.
  bool Spawn(const std::string& id, std::function<void()> fn);

  // Begins stopping; false if it had begun already.
  bool Stop();
  bool stopping();
  // Waits for every spawned task to finish.
  void WaitIdle();
  // Waits until no task runs and no claim is held (a thread that claimed may be about to
  // spawn); for tests.
  void WaitQuiet();
  // After Stop and WaitIdle: the idle workers leave and every worker is joined.
  void JoinWorkers();

  // Workers alive now (running or idle), for tests.
  int WorkersForTest();

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

  const absl::Duration linger_;
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
  std::set<std::string> claimed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_WORKER_POOL_H_
