// Retention keeps fleet.db bounded: history past its keeping (events, and allocations that
// ended) is pruned in the background, in small transactions, and the freed pages are handed
// back to the file system. What may be pruned, and what never is, is the contract of
// StorageControl::PruneEvents and ::PruneEndedAllocations (controller/store/storage_control.h);
// docs/architecture.md ("Retention") says why it is built this way.
#ifndef FLEET_CONTROLLER_STORE_RETENTION_H_
#define FLEET_CONTROLLER_STORE_RETENTION_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/store/storage_control.h"

namespace fleet::store {

struct RetentionPolicy {
  RetentionLimits events{absl::Hours(24 * 30), 1'000'000};
  RetentionLimits ended_allocations{absl::Hours(24 * 30), 100'000};
  // From the end of one background pass to the start of the next; zero: no background
  // passes (RunPass still prunes).
  absl::Duration interval = absl::Seconds(60);
  // Rows per transaction, at least 1: a request's commit waits behind one batch at most.
  int batch_rows = 500;
  // Rows of each kind one pass prunes at most, at least batch_rows. A pass that stops at it
  // with more to prune is followed by the next after one pause rather than an interval, so a
  // large backlog (the first start with retention) drains steadily, a batch at a time.
  int64_t pass_max_rows = 100'000;
  // Free pages handed back per transaction after a pass that pruned something (1 MiB at the
  // default page size of 4 KiB).
  int vacuum_step_pages = 256;
  // Between two transactions of a pass, so that writers waiting for the store go first.
  // Zero only yields the processor.
  absl::Duration batch_pause = absl::Milliseconds(2);
};

// What one pass did.
struct RetentionPass {
  absl::Status status;  // The first error; the pass stopped at it.
  int64_t events_pruned = 0;
  int64_t allocations_pruned = 0;
  int64_t batches = 0;  // Transactions that pruned rows.
  int64_t pages_reclaimed = 0;
  bool more = false;  // Stopped at pass_max_rows: rows may be left to prune.
  StorageSize size;   // After the pass.
  absl::Duration took;
};

class Retention {
 public:
  // `store` is not owned and must outlive this object. `on_pass`, when set, is called after
  // every pass, on the thread that ran it.
  Retention(StorageControl* store, RetentionPolicy policy,
            std::function<void(const RetentionPass&)> on_pass = nullptr);
  ~Retention();  // Stops.
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // Runs a pass now and then one every policy.interval, on a thread of its own; nothing when
  // the interval is zero. A second call changes nothing.
  void Start();
  // Ends the pass under way after its current transaction and joins the thread. Idempotent;
  // no Start after it.
  void Stop();

  // One pass on the caller's thread: events, then ended allocations, each in transactions
  // of at most batch_rows rows and up to pass_max_rows; then, if it pruned anything, free
  // pages handed back in steps of vacuum_step_pages.
  RetentionPass RunPass();

 private:
  RetentionPass PassLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // Prunes one kind with `prune` (one transaction per call) into `*pruned`.
  absl::Status PruneKind(const std::function<absl::StatusOr<int64_t>(int)>& prune, int64_t* pruned,
                         RetentionPass* pass);
  absl::Status Reclaim(RetentionPass* pass);
  // Waits `d` or until Stop; false once stopping.
  bool Pause(absl::Duration d);
  bool stopping();
  void Run();

  StorageControl* const store_;
  const RetentionPolicy policy_;
  const std::function<void(const RetentionPass&)> on_pass_;
  std::thread thread_;
  absl::Mutex pass_mu_;  // One pass at a time, the thread's or a caller's.
  bool failing_ ABSL_GUARDED_BY(pass_mu_) = false;  // The last pass failed: said once a run.
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fleet::store

#endif  // FLEET_CONTROLLER_STORE_RETENTION_H_
