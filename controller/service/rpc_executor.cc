#include "controller/service/rpc_executor.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"

namespace fleet::service {
namespace {

int DefaultThreads() {
  return std::clamp(32 * static_cast<int>(std::thread::hardware_concurrency()), 64, 256);
}

grpc::Status Stopping() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fleetd is stopping");
}

// What `body` answers; UNKNOWN when it throws (as gRPC's synchronous server answered), so a
// call is always answered and the thread goes on.
grpc::Status Answer(const std::function<grpc::Status()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::UNKNOWN, absl::StrCat("the call failed: ", e.what()));
  } catch (...) {
    return grpc::Status(grpc::StatusCode::UNKNOWN, "the call failed");
  }
}

}  // namespace

RpcExecutor::RpcExecutor(Options options)
    : max_threads_(options.threads > 0 ? options.threads : DefaultThreads()),
      max_queued_(options.max_queued),
      refused_(std::move(options.refused)),
      await_position_(std::move(options.await_position)) {}

RpcExecutor::~RpcExecutor() { Stop(); }

grpc::ServerUnaryReactor* RpcExecutor::Serve(grpc::CallbackServerContext* context,
                                             std::function<grpc::Status()> body,
                                             Freshness freshness) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status refusal = Submit(
      [this, reactor, context, freshness, body = std::move(body)] {
        // The deadline first: gRPC cancels a call whose deadline passed.
        if (context->deadline() <= std::chrono::system_clock::now()) {
          reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                       "the call's deadline passed while it waited for a thread"));
        } else if (context->IsCancelled()) {
          reactor->Finish(grpc::Status::CANCELLED);
        } else {
          reactor->Finish(RunAfterPosition(context, body, freshness));
        }
      },
      [reactor](const grpc::Status& status) { reactor->Finish(status); });
  if (!refusal.ok()) reactor->Finish(refusal);
  return reactor;
}

grpc::Status RpcExecutor::RunAfterPosition(grpc::CallbackServerContext* context,
                                           const std::function<grpc::Status()>& body,
                                           Freshness freshness) {
  if (!await_position_) return Answer(body);
  const auto& metadata = context->client_metadata();
  if (auto sent = metadata.find(kMinLogPositionMetadata);
      freshness == Freshness::kAfterCallersPosition && sent != metadata.end()) {
    const std::string text(sent->second.data(), sent->second.size());
    uint64_t wanted = 0;
    if (!absl::SimpleAtoi(text, &wanted)) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("metadata ", kMinLogPositionMetadata, ": '", text,
                       "' is not an entry of the replicated log (a decimal number, as an "
                       "answer's ",
                       kLogPositionMetadata, " gives)"));
    }
    // Room left to answer before the deadline.
    const absl::Duration left =
        absl::FromChrono(context->deadline()) - absl::Now() - absl::Milliseconds(20);
    const uint64_t held =
        await_position_(wanted, std::clamp(left, absl::ZeroDuration(), kMaxPositionWait));
    if (held < wanted) {
      context->AddTrailingMetadata(kLogPositionMetadata, std::to_string(held));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("this replica holds the replicated log through entry ", held,
                                       "; the caller has seen entry ", wanted, " (",
                                       kMinLogPositionMetadata, "): retry, or ask the leader"));
    }
  }
  grpc::Status answer = Answer(body);
  context->AddTrailingMetadata(kLogPositionMetadata,
                               std::to_string(await_position_(0, absl::ZeroDuration())));
  return answer;
}

grpc::Status RpcExecutor::Submit(std::function<void()> run, Refuse refuse) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return Stopping();
    bool started = false;
    if (idle_ <= static_cast<int>(queue_.size()) &&
        static_cast<int>(threads_.size()) < max_threads_) {
      try {
        threads_.emplace_back([this] {
          NameThisThread("fleet-rpc");
          Work();
        });
        ++started_;
        ++idle_;  // Counted idle until it takes a call, so one call starts one thread.
        started = true;
      } catch (const std::system_error& e) {
        // Out of threads (a pids limit): the call waits for one already started, if any.
        if (threads_.empty()) {
          return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              absl::StrCat("cannot start a thread for the call: ", e.what()));
        }
      }
    }
    // Calls an idle thread is about to take do not wait.
    if (started || queue_.size() < max_queued_ + static_cast<size_t>(idle_)) {
      queue_.push_back({std::move(run), std::move(refuse)});
      return grpc::Status::OK;
    }
  }
  if (refused_) refused_();
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("the rpc queue is full (", max_queued_, " calls wait for one of ", max_threads_,
                   " threads); retry later"));
}

void RpcExecutor::Stop() {
  std::deque<Call> waiting;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    waiting.swap(queue_);
    threads.swap(threads_);
  }
  for (Call& call : waiting) call.refuse(Stopping());
  for (std::thread& t : threads) t.join();
}

int RpcExecutor::threads_started() {
  absl::MutexLock lock(&mu_);
  return started_;
}

bool RpcExecutor::idle() {
  absl::MutexLock lock(&mu_);
  return queue_.empty() && idle_ == static_cast<int>(threads_.size());
}

void RpcExecutor::Work() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](RpcExecutor* e)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) { return !e->queue_.empty() || e->stopping_; },
        this));
    if (queue_.empty()) return;  // Stopping.
    Call call = std::move(queue_.front());
    queue_.pop_front();
    --idle_;
    mu_.Unlock();
    call.run();
    call = {};
    mu_.Lock();
    ++idle_;
  }
}

}  // namespace fleet::service
