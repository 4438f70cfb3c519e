// Where fleetd's unary RPCs run: a bounded set of threads and a bounded queue. The services
// use gRPC's callback API, so a call holds no thread of gRPC's; its handler hands the call's
// work here and returns. However many calls arrive at once, fleetd has at most `threads` of
// them running; the rest wait in order, and past `max_queued` waiting a new call is refused
// RESOURCE_EXHAUSTED naming this queue (with the synchronous API each call in flight held a
// thread of its own, without a bound). A call whose client has gone, or whose deadline has
// passed, by the time a thread takes it is answered so without being run: a change nobody
// waits for any more is not made.
//
// Threads are started as calls need them, up to the bound, and then kept. A call that waits
// long (a change waiting for its allocation, a retrain waiting for an agent) holds one of
// them: the bound is set well above the engine's workers so that such calls leave room for
// reads, but enough of them at once would make reads wait. No call may wait for another
// call run here (agents' streams are not). Thread-safe.
//
// Read-your-writes on a replicated site (docs/ha.md): a caller that changed something on the
// leader may next read a follower whose store has not applied that change yet. With
// `await_position` set, every answer of a call that ran (and the refusal of one behind)
// carries trailing metadata `x-fleet-log-position`, the
// last entry of the replicated log this replica's store held when it answered (after a
// change, the change's own entries included). A call carrying `x-fleet-min-log-position: N`
// (the highest position its client was answered) runs only once this store holds entry N,
// waiting for it at most kMaxPositionWait and never past the call's deadline; else it is
// answered UNAVAILABLE naming both positions, without being run. A value that is not an entry
// number is refused INVALID_ARGUMENT naming the key, the value and the rule. Unary calls only:
// a stream (a watch) starts from what the replica holds and goes on from there. A call served
// `kAsHeld` (Health) neither waits for nor checks the caller's position: a replica that lags
// must still be able to say so.
#ifndef FLEET_CONTROLLER_SERVICE_RPC_EXECUTOR_H_
#define FLEET_CONTROLLER_SERVICE_RPC_EXECUTOR_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fleet::service {

inline constexpr char kLogPositionMetadata[] = "x-fleet-log-position";
inline constexpr char kMinLogPositionMetadata[] = "x-fleet-min-log-position";

class RpcExecutor {
 public:
  // How long a call waits for this replica to apply the entry its caller has seen: a
  // follower applies the log every 50 ms, so more means it is far behind or cut off.
  static constexpr absl::Duration kMaxPositionWait = absl::Seconds(1);

  struct Options {
    // Calls running at once; 0: 32 per core, at least 64 and at most 256.
    int threads = 0;
    // Calls waiting for a thread before a new one is refused.
    size_t max_queued = 1024;
    // Called (without a lock) for each call refused because the queue is full.
    std::function<void()> refused = nullptr;
    // A replicated fleetd's StorageControl::AwaitReplicaPosition. Null on a single fleetd:
    // no position is sent, and a caller's minimum is met (its one store has every change it
    // was answered).
    std::function<uint64_t(uint64_t entry, absl::Duration timeout)> await_position = nullptr;
  };

  explicit RpcExecutor(Options options);
  ~RpcExecutor();  // Stops.
  RpcExecutor(const RpcExecutor&) = delete;
  RpcExecutor& operator=(const RpcExecutor&) = delete;

  // Whether a call waits for this replica to hold what its caller has seen (the contract).
  enum class Freshness { kAfterCallersPosition, kAsHeld };

  // Answers the call of `context` with what `body` returns, run on one of the threads; the
  // call's request and response stay valid until then. Without running `body`:
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE once stopping, CANCELLED or
  // DEADLINE_EXCEEDED when the call ended while it waited.
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                  std::function<grpc::Status()> body,
                                  Freshness freshness = Freshness::kAfterCallersPosition);

  // What Serve does with a call: `run` on one of the threads, or `refuse` with why not, at
  // once (the returned status) or, for a call still waiting when the executor stops, then.
  using Refuse = std::function<void(const grpc::Status&)>;
  grpc::Status Submit(std::function<void()> run, Refuse refuse);

  // Refuses new calls and those still waiting (UNAVAILABLE), and joins the threads once the
  // calls running are done. Call it before the server's Shutdown, which waits for every
  // call to be answered. Idempotent.
  void Stop();

  int max_threads() const { return max_threads_; }
  int threads_started();
  // No call is waiting or running (for tests).
  bool idle();

 private:
  struct Call {
    std::function<void()> run;
    Refuse refuse;
  };
  void Work();
  // The call's body, once this replica holds the entry its caller has seen (the contract).
  grpc::Status RunAfterPosition(grpc::CallbackServerContext* context,
                                const std::function<grpc::Status()>& body, Freshness freshness);

  const int max_threads_;
  const size_t max_queued_;
  const std::function<void()> refused_;
  const std::function<uint64_t(uint64_t, absl::Duration)> await_position_;
  absl::Mutex mu_;
  std::deque<Call> queue_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // Threads waiting for a call, or about to.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int started_ ABSL_GUARDED_BY(mu_) = 0;  // Threads ever started (Stop keeps the count).
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_RPC_EXECUTOR_H_
