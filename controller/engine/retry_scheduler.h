// When each allocation's next retry is due: a DEGRADED allocation's retrain, a RELEASING
// one's removal. One entry per allocation, with exponential backoff (common/backoff.h) from
// `initial` up to `max`. The owner runs what is Due() (marking each Running while it does), and the
// attempt then asks for the next one (RetryLater) or ends the retries (Forget).
//
// An agent that connects makes every retry due at once; one whose attempt is running then
// is rerun as soon as that attempt asks for its next one, since it may have missed the
// agent. `wake` is called (without the lock) when a retry becomes due before its time, so
// the owner's loop need not wait for its tick.
#ifndef FLEET_CONTROLLER_ENGINE_RETRY_SCHEDULER_H_
#define FLEET_CONTROLLER_ENGINE_RETRY_SCHEDULER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"

namespace fleet::engine {

class RetryScheduler {
 public:
  RetryScheduler(const Clock* clock, absl::Duration initial, absl::Duration max,
                 std::function<void()> wake)
      : clock_(clock), initial_(initial), max_(max), wake_(std::move(wake)) {}

  // Due at `due`, with the initial backoff, whatever was scheduled before.
  void ScheduleAt(const std::string& id, absl::Time due);
  // After a failed attempt: the next one after the backoff (the initial one for an id not
  // scheduled, else twice the last, at most `max`), or at once if an agent connected during
  // the attempt.
  void RetryLater(const std::string& id);
  // The next retry of `id` no later than `by` (a failure policy's deadline); its backoff goes
  // on as it was. Nothing for an id with no retry scheduled.
  void DueBy(const std::string& id, absl::Time by);
  // No more retries for `id`.
  void Forget(const std::string& id);
  // The ids whose retry is due by the clock's now.
  std::vector<std::string> Due();
  // An attempt of `id` runs: not due again until it calls RetryLater (or Forget).
  void Running(const std::string& id);
  // An agent connected: every retry is due now.
  void AgentConnected();

  // When `id`'s next retry is due, if any (for tests).
  std::optional<absl::Time> DueForTest(const std::string& id);

 private:
  struct Retry {
    absl::Time due;
    fleet::Backoff backoff;  // Its last wait was the one that led to `due`.
    // An agent connected while an attempt was running: the attempt may have missed it, so
    // the next one is at once, not after a longer backoff.
    bool agent_connected_during_attempt = false;
  };

  const Clock* const clock_;
  const absl::Duration initial_;
  const absl::Duration max_;
  const std::function<void()> wake_;
  absl::Mutex mu_;
  std::map<std::string, Retry> retries_ ABSL_GUARDED_BY(mu_);  // By allocation id.
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_RETRY_SCHEDULER_H_
