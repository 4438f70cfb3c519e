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
#ifndef FLEET_CONTROLLER_SERVICE_RPC_EXECUTOR_H_
#define FLEET_CONTROLLER_SERVICE_RPC_EXECUTOR_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace fleet::service {

class RpcExecutor {
 public:
  struct Options {
    // Calls running at once; 0: 32 per core, at least 64 and at most 256.
    int threads = 0;
    // Calls waiting for a thread before a new one is refused.
    size_t max_queued = 1024;
    // Called (without a lock) for each call refused because the queue is full.
    std::function<void()> refused = nullptr;
  };

  explicit RpcExecutor(Options options);
  ~RpcExecutor();  // Stops.
  RpcExecutor(const RpcExecutor&) = delete;
  RpcExecutor& operator=(const RpcExecutor&) = delete;

  // Answers the call of `context` with what `body` returns, run on one of the threads; the
  // call's request and response stay valid until then. Without running `body`:
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE once stopping, CANCELLED or
  // DEADLINE_EXCEEDED when the call ended while it waited.
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                  std::function<grpc::Status()> body);

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

  const int max_threads_;
  const size_t max_queued_;
  const std::function<void()> refused_;
  absl::Mutex mu_;
  std::deque<Call> queue_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // Threads waiting for a call, or about to.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int started_ ABSL_GUARDED_BY(mu_) = 0;  // Threads ever started (Stop keeps the count).
};

}  // namespace fleet::service

#endif  // FLEET_CONTROLLER_SERVICE_RPC_EXECUTOR_H_
