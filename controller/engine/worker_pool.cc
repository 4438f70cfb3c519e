#include "controller/engine/worker_pool.h"
#include "common/thread_name.h"

#include <algorithm>
#include <utility>

namespace fleet::engine {

WorkerPool::~WorkerPool() {
  Stop();
  WaitIdle();
  JoinWorkers();
}

bool WorkerPool::Claim(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return claimed_.insert(id).second;
}

void WorkerPool::Unclaim(const std::string& id) {
  {
    absl::MutexLock lock(&mu_);
    claimed_.erase(id);
    ++hooks_running_;  // WaitQuiet waits for what the hook may spawn.
    changed_.SignalAll();
  }
  if (on_unclaimed_) on_unclaimed_(id);
  absl::MutexLock lock(&mu_);
  --hooks_running_;
  changed_.SignalAll();
}

bool WorkerPool::ClaimWhenFree(const std::string& id, absl::Time give_up,
                               const std::function<bool()>& may_wait) {
  while (!Claim(id)) {
    if (!may_wait()) return false;
    absl::MutexLock lock(&mu_);
    // Until the holder lets go (a released claim signals changed_), then claim again and ask
    // may_wait again if another took it first.
    while (claimed_.contains(id)) {
      if (stopping_ || clock_.Now() >= give_up) return false;
      clock_.WaitWithDeadline(changed_, mu_, give_up);
    }
  }
  return true;
}

WorkerPool::Claimed WorkerPool::WaitAndClaim(const std::string& id, absl::Time give_up) {
  absl::MutexLock lock(&mu_);
  while (claimed_.contains(id) && !stopping_ && clock_.Now() < give_up) {
    clock_.WaitWithDeadline(changed_, mu_, give_up);
  }
  if (stopping_) return Claimed::kStopping;
  if (claimed_.contains(id)) return Claimed::kBusy;
  claimed_.insert(id);
  return Claimed::kClaimed;
}

void WorkerPool::WaitUnclaimed(const std::vector<std::string>& ids, absl::Time give_up) {
  absl::MutexLock lock(&mu_);
  auto busy = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& id : ids) {
      if (claimed_.contains(id)) return true;
    }
    return false;
  };
  while (busy() && !stopping_ && clock_.Now() < give_up) {
    clock_.WaitWithDeadline(changed_, mu_, give_up);
  }
}

std::set<std::string> WorkerPool::Claims() {
  absl::MutexLock lock(&mu_);
  return claimed_;
}

bool WorkerPool::Spawn(const std::string& id, std::function<void()> fn) {
  return Queue({id, std::move(fn)}, /*awaited=*/false);
}

bool WorkerPool::SpawnAwaited(std::function<void()> fn) {
  return Queue({"", std::move(fn)}, /*awaited=*/true);
}

bool WorkerPool::HasRoom() {
  absl::MutexLock lock(&mu_);
  return tasks_.size() < options_.max_queued;
}

bool WorkerPool::Queue(Task task, bool awaited) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    // JoinWorkers is coming: a task queued now might never run. What the caller persisted
    // is resumed at the next start.
    claimed_.erase(task.id);
    changed_.SignalAll();
    return false;
  }
  // Workers that lingered and left are joined here; each is past its last touch of the pool.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if ((*it)->done.load()) {
      (*it)->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  ++running_;
  if (awaited) {
    tasks_.push_front(std::move(task));
  } else {
    tasks_.push_back(std::move(task));
  }
  if (static_cast<size_t>(idle_workers_) >= tasks_.size()) {
    task_queued_.Signal();
    return true;
  }
  if (!awaited && alive_ >= options_.max_workers) return true;  // Waits for a worker.
  auto worker = std::make_unique<Worker>();
  Worker* w = worker.get();
  ++alive_;
  peak_ = std::max(peak_, alive_);
  w->thread = std::thread([this, w] {
    NameThisThread("fleet-worker");
    WorkerLoop();
    w->done.store(true);
  });
  workers_.push_back(std::move(worker));
  return true;
}

void WorkerPool::WorkerLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_workers_;
    const absl::Time give_up = absl::Now() + options_.linger;
    while (tasks_.empty() && !stopping_ && absl::Now() < give_up) {
      task_queued_.WaitWithDeadline(&mu_, give_up);
    }
    --idle_workers_;
    // Queued tasks run even while stopping: WaitIdle waits for them (running_).
    if (tasks_.empty()) {
      --alive_;
      return;
    }
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task.fn();
    task.fn = nullptr;  // Its captures go before the claim is dropped.
    if (!task.id.empty()) {
      mu_.Lock();
      claimed_.erase(task.id);
      changed_.SignalAll();
      mu_.Unlock();
      if (on_unclaimed_) on_unclaimed_(task.id);
    }
    mu_.Lock();
    --running_;
    changed_.SignalAll();
    // A worker beyond the bound (made for an awaited task) leaves once done, so the bound
    // holds for the tasks that wait their turn.
    if (alive_ > options_.max_workers) {
      --alive_;
      return;
    }
  }
}

bool WorkerPool::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  stopping_ = true;
  changed_.SignalAll();
  return true;
}

bool WorkerPool::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void WorkerPool::WaitIdle() {
  absl::MutexLock lock(&mu_);
  while (running_ > 0 || hooks_running_ > 0) changed_.Wait(&mu_);
}

void WorkerPool::WaitQuiet() {
  absl::MutexLock lock(&mu_);
  while (running_ > 0 || hooks_running_ > 0 || !claimed_.empty()) changed_.Wait(&mu_);
}

void WorkerPool::JoinWorkers() {
  std::list<std::unique_ptr<Worker>> workers;
  {
    absl::MutexLock lock(&mu_);
    task_queued_.SignalAll();  // Idle workers leave.
    workers.swap(workers_);
  }
  for (auto& w : workers) w->thread.join();
}

int WorkerPool::PeakWorkers() {
  absl::MutexLock lock(&mu_);
  return peak_;
}

int WorkerPool::WorkersForTest() {
  absl::MutexLock lock(&mu_);
  int alive = 0;
  for (const auto& w : workers_) alive += !w->done.load();
  return alive;
}

}  // namespace fleet::engine
