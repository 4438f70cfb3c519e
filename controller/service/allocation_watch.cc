#include "controller/service/allocation_watch.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "controller/service/event_follow.h"

namespace fleet::service {
namespace {

// What a watcher is told about: the state, the reason and each circuit's state.
std::string WatchedPart(const v1::Allocation& a) {
  std::string key = absl::StrCat(a.state(), "|", a.reason());
  for (const v1::Circuit& c : a.circuits()) absl::StrAppend(&key, "|", c.state());
  return key;
}

bool Ended(const v1::Allocation& a) {
  return a.state() == v1::ALLOCATION_STATE_FAILED || a.state() == v1::ALLOCATION_STATE_RELEASED;
}

}  // namespace

AllocationWatch::AllocationWatch(store::CommitFeed* feed, store::EventLog* log, std::string id,
                                 std::string tenant)
    : feed_(feed), log_(log), id_(std::move(id)), tenant_(std::move(tenant)) {}

WatchStep AllocationWatch::Step(uint64_t upto, std::vector<v1::Allocation>* out) {
  out_ = out;
  if (!started_) {
    started_ = true;
    after_ = feed_->LastEventSequence();
    absl::StatusOr<bool> go_on = SendFirst();
    if (!go_on.ok()) return {after_, ToGrpcStatus(go_on.status())};
    if (!*go_on) return {after_, grpc::Status::OK};
    return {after_, std::nullopt};
  }
  if (upto > after_ && !FollowOnce(upto)) {
    if (ended_) return {after_, grpc::Status::OK};
    return {after_, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the event log cannot be read")};
  }
  return {after_, std::nullopt};
}

absl::StatusOr<bool> AllocationWatch::SendFirst() {
  std::vector<store::AllocationCommit> first;
  if (!id_.empty()) {
    std::optional<store::AllocationCommit> kept = feed_->LastCommitted(id_);
    first.push_back(kept ? *std::move(kept) : store::AllocationCommit{0, id_, nullptr});
  } else {
    ASSIGN_OR_RETURN(first, feed_->ReadAllocations({tenant_, {}, false}));
  }
  for (store::AllocationCommit& commit : first) {
    absl::StatusOr<bool> go_on = Consider(std::move(commit));
    if (!go_on.ok() && !id_.empty()) return go_on.status();
    if (go_on.ok() && !*go_on) return false;
  }
  return true;
}

bool AllocationWatch::FollowOnce(uint64_t upto) {
  // Each committed state, in order, from the commits the store keeps.
  if (std::optional<std::vector<store::AllocationCommit>> commits =
          feed_->AllocationCommitsAfter(after_)) {
    for (store::AllocationCommit& commit : *commits) {
      if (!Watched(commit)) continue;
      absl::StatusOr<bool> sent_it = Consider(std::move(commit));
      if (sent_it.ok() && !*sent_it) return false;
    }
    after_ = std::max(upto, commits->empty() ? 0 : commits->back().sequence);
    ForgetEnded();
    return true;
  }
  // A watcher this far behind reads the log, and each allocation it names as it is now.
  std::optional<uint64_t> next =
      ReadEvents(*log_, after_, upto, "allocation", id_, [&](const v1::Event& e) {
        absl::StatusOr<bool> go_on = Consider({e.sequence(), e.object_id(), nullptr});
        return !go_on.ok() || *go_on;
      });
  if (!next) return false;
  after_ = *next;
  ForgetEnded();
  return true;
}

absl::StatusOr<bool> AllocationWatch::Consider(store::AllocationCommit commit) {
  if (auto seen = as_of_.find(commit.id); seen != as_of_.end() && commit.sequence <= seen->second) {
    return true;
  }
  if (!commit.allocation) {
    ASSIGN_OR_RETURN(commit, feed_->ReadAllocation(commit.id));
  }
  as_of_[commit.id] = commit.sequence;
  const bool go_on = Send(*commit.allocation);
  if (go_on && id_.empty() && Ended(*commit.allocation)) {
    ended_at_.emplace(commit.sequence, commit.id);
  }
  return go_on;
}

bool AllocationWatch::Send(const v1::Allocation& a) {
  if (!tenant_.empty() && a.tenant() != tenant_) return true;
  std::string part = WatchedPart(a);
  if (sent_[a.id()] == part) return true;
  out_->push_back(a);
  sent_[a.id()] = std::move(part);
  ended_ = !id_.empty() && Ended(a);
  return !ended_;
}

bool AllocationWatch::Watched(const store::AllocationCommit& commit) const {
  if (!id_.empty()) return commit.id == id_;
  return commit.allocation == nullptr || tenant_.empty() || commit.allocation->tenant() == tenant_;
}

void AllocationWatch::ForgetEnded() {
  while (!ended_at_.empty() && ended_at_.begin()->first <= after_) {
    sent_.erase(ended_at_.begin()->second);
    as_of_.erase(ended_at_.begin()->second);
    ended_at_.erase(ended_at_.begin());
  }
}

}  // namespace fleet::service
