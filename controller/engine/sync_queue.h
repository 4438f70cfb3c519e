// The engine's one work queue: which allocations need a sync, and when.
//
// Every event that may leave an allocation short of what it should be (an agent gone or
// back, a link down, a switch port or device failed or well again, a removal that failed,
// a restart, the periodic reconciliation) only marks it here; LinkRecovery::Sync then looks
// at what is desired and what is observed and does the next step. The queue gives:
// - Dedup: one entry per allocation, due at the earliest time it was marked for.
// - One sync of an allocation at a time: the owner takes what is Due(), claims it
//   (WorkerPool) and calls Running(); until that attempt calls RetryLater or Forget, the
//   entry is not due again. A mark that arrives while it runs is kept: the next attempt is
//   at once, since the running one may have missed what the mark was for.
// - Retries from one place: after a failed attempt the next waits an exponential backoff
//   (common/backoff.h) from `initial` up to `max`, scaled by `jitter()` so allocations that
//   failed together do not all come back at the same moment.
// - A bound: at most `max_entries` allocations wait at once; marking another is refused
//   RESOURCE_EXHAUSTED naming the queue (and counted by `refused`), and it is marked again
//   by the next periodic reconciliation, which marks every allocation that needs a sync.
// `wake` is called (without the lock) when an entry becomes due before its time, so the
// owner's loop need not wait for its tick. Thread-safe; one mutex, a leaf.
#ifndef FLEET_CONTROLLER_ENGINE_SYNC_QUEUE_H_
#define FLEET_CONTROLLER_ENGINE_SYNC_QUEUE_H_

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"

namespace fleet::engine {

class SyncQueue {
 public:
  struct Options {
    absl::Duration initial = absl::Seconds(1);
    absl::Duration max = absl::Seconds(60);
    size_t max_entries = 100000;
    // A factor for each backoff wait (called under the queue's lock; must not call back).
    // Unset: 1, no jitter.
    std::function<double()> jitter;
    // Told of each refused mark (a metric); called without the lock.
    std::function<void()> refused;
  };
  SyncQueue(const Clock* clock, Options options, std::function<void()> wake)
      : clock_(clock), options_(std::move(options)), wake_(std::move(wake)) {}

  // `id` needs a sync by `at` (now if unset): due then, or earlier if it was due earlier. Its
  // backoff goes on as it was (only Forget starts it again), so a fault reported over and over
  // cannot make an allocation retry faster. While an attempt of it runs, the next one is at
  // once. RESOURCE_EXHAUSTED when `id` has no entry and the queue is full.
  absl::Status Mark(const std::string& id, std::optional<absl::Time> at = std::nullopt);
  // `id` needs a sync now unless it is queued already (then nothing changes). What the
  // periodic reconciliation and a restart mark: an allocation already waiting for its next
  // retry keeps its time. RESOURCE_EXHAUSTED as for Mark.
  absl::Status Ensure(const std::string& id);
  // After a failed attempt: the next one after the backoff (the initial one for an id not
  // marked, else twice the last, at most `max`, times the jitter), or at once if `id` was
  // marked while the attempt ran. The holder of the allocation's claim may call it outside an
  // attempt too (a release that failed on an RPC's thread): no attempt can be running then.
  void RetryLater(const std::string& id);
  // Ends a running attempt with the next one at `at` (at once if `id` was marked while it ran),
  // its backoff as it was: a new fault's first wait, not a failed attempt's.
  void RetryAt(const std::string& id, absl::Time at);
  // The next attempt of `id` no later than `by` (a failure policy's deadline); its backoff
  // goes on as it was. Kept for when a running attempt asks for its next one. Nothing for an
  // id with no entry.
  void DueBy(const std::string& id, absl::Time by);
  // Ends a running attempt that found the mark it ran for changed nothing (a fault already
  // recorded): the next attempt is when it was due before the mark, so reports cannot make an
  // allocation retry faster; after the backoff if none was due.
  void NothingNew(const std::string& id);
  // The allocation reached what is desired: no more retries, and the backoff starts again;
  // but if `id` was marked since its last attempt began (a transaction's end calls this too,
  // while marks wait for it), it is due at once.
  void Forget(const std::string& id);
  // The ids due by the clock's now and not running, in id order.
  std::vector<std::string> Due();
  // Whether `id` is among them.
  bool IsDue(const std::string& id);
  // The earliest time after the clock's now at which an entry not running falls due; nullopt
  // when none will. The owner's loop wakes then rather than at its next tick, so a retry
  // (a failure policy's `within` run out) is not late by up to a tick. Entries due already
  // are not counted: they wait for their claim, and its release runs them.
  std::optional<absl::Time> NextDue();
  // An attempt of `id` starts (its claim held), if `id` is due and none runs: not due again
  // until it calls RetryLater, RetryAt, NothingNew or Forget. False (nothing changed) when it
  // is not due: another attempt ran between Due() and the claim.
  bool Running(const std::string& id);
  // After an attempt's work: ends it as a failed one (RetryLater) if nothing did, so no
  // error path can leave an entry running for good.
  void EndIfRunning(const std::string& id);
  // An agent connected: every entry is due now (a running one reruns once it ends).
  void AgentConnected();

  // Entries now (for tests and the thread-bound bench).
  size_t size();
  // When `id`'s next attempt is due, if any: InfiniteFuture while one runs (for tests).
  std::optional<absl::Time> DueForTest(const std::string& id);

 private:
  struct Entry {
    absl::Time due;
    fleet::Backoff backoff;  // Its last wait was the one that led to `due`.
    // When the last failed attempt (RetryLater, RetryAt) put the next one; InfiniteFuture
    // for none.
    absl::Time retry_due = absl::InfiniteFuture();
    bool running = false;
    // Marked (or an agent connected) since the last attempt began (cleared only by Running):
    // the attempt that ends next is followed by another at once, and Forget keeps the entry.
    bool marked = false;
    // A DueBy that came while an attempt ran, applied when it asks for the next.
    absl::Time due_by = absl::InfiniteFuture();
  };
  Entry NewEntry(absl::Time due) const;
  // RetryLater on `entry`, with the lock held; true when it is due at once (marked).
  bool RetryLaterLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Mark (`again`) or Ensure.
  absl::Status Add(const std::string& id, std::optional<absl::Time> at, bool again);
  // Ends `entry`'s running attempt with its next retry at `retry_at` (at most its due_by);
  // due at `now` instead when it was marked meanwhile (then true).
  static bool EndAttempt(Entry& entry, absl::Time retry_at, absl::Time now);

  const Clock* const clock_;
  const Options options_;
  const std::function<void()> wake_;
  absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // By allocation id.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_SYNC_QUEUE_H_
