#include "controller/etcd/etcd_space.h"

#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace fleet::etcd {

absl::StatusOr<SpacePass> SpaceKeeper::Pass() {
  SpacePass pass;
  if (absl::Now() < quiet_until_) return pass;
  ASSIGN_OR_RETURN(std::vector<uint64_t> alarms, client_->NoSpaceAlarms());
  if (alarms.empty()) defragmented_under_alarm_.clear();
  pass.alarm_back =
      !alarms.empty() && !under_alarm_ && absl::Now() - disarmed_at_ < options_.alarm_backoff;
  under_alarm_ = !alarms.empty();
  const std::vector<MemberStatus> members = client_->Members();
  const MemberStatus* due = nullptr;
  const MemberStatus* follower = nullptr;  // A reachable one that does not lead: a successor.
  int reachable = 0;
  for (const MemberStatus& m : members) {
    if (!m.reachable.ok()) continue;
    ++reachable;
    if (m.member_id != m.leader_id && follower == nullptr) follower = &m;
    const int64_t free = m.db_size_bytes - m.db_size_in_use_bytes;
    const bool is_due =
        alarms.empty() ? m.db_size_bytes >= options_.min_bytes &&
                             static_cast<double>(free) >
                                 options_.max_free_fraction * static_cast<double>(m.db_size_bytes)
                       : !defragmented_under_alarm_.contains(m.endpoint);
    if (is_due && (due == nullptr || free > due->db_size_bytes - due->db_size_in_use_bytes)) {
      due = &m;
    }
  }
  if (due != nullptr && due->member_id == due->leader_id) {
    if (follower == nullptr) return pass;  // No other member to lead: not now.
    RETURN_IF_ERROR(client_->MoveLeader(due->endpoint, follower->member_id));
    pass.moved_leader_from = due->endpoint;
    return pass;
  }
  if (due != nullptr) {
    const absl::Time started = absl::Now();
    absl::Status defragmented = client_->Defragment(due->endpoint, options_.defragment_timeout);
    if (!defragmented.ok()) {
      quiet_until_ = absl::Now() + options_.defragment_timeout;
      return defragmented;
    }
    pass.took = absl::Now() - started;
    pass.defragmented = due->endpoint;
    pass.bytes_before = due->db_size_bytes;
    if (!alarms.empty()) defragmented_under_alarm_.insert(due->endpoint);
    for (const MemberStatus& after : client_->Members()) {
      if (after.endpoint == due->endpoint) pass.bytes_after = after.db_size_bytes;
    }
    return pass;
  }
  // Under an alarm, every reachable member was defragmented: what space there is to win is
  // won. With none reachable, nothing was.
  if (alarms.empty() || reachable == 0) return pass;
  for (uint64_t member : alarms) {
    RETURN_IF_ERROR(client_->DisarmNoSpace(member));
    pass.disarmed.push_back(member);
  }
  defragmented_under_alarm_.clear();
  under_alarm_ = false;
  disarmed_at_ = absl::Now();
  return pass;
}

}  // namespace fleet::etcd
