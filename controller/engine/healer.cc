#include "controller/engine/healer.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/proto_time.h"
#include "controller/engine/circuits.h"
#include "fleet/v1/names.h"

namespace fleet::engine {

namespace {

uint32_t MaxReplacements(const v1::FailurePolicy& policy) {
  return policy.max_replacements() > 0 ? policy.max_replacements() : 1;
}

}  // namespace

std::vector<std::string> Healer::FailedPartReasons(const v1::Allocation& a) {
  std::vector<std::string> reasons;
  absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
  if (!inventory.ok()) return reasons;
  for (const FailedPart& part : FailedParts(a, **inventory)) reasons.push_back(part.reason);
  return reasons;
}

Healer::Verdict Healer::Judge(const v1::Allocation& a, absl::Time now) {
  Verdict v;
  const v1::FailurePolicy& policy = a.request().on_failure();
  if (!policy.replace()) {
    v.why_not = "its request has no failure policy that replaces members";
    return v;
  }
  uint32_t healed = 0;
  for (const v1::MemberReplacement& r : a.replacements()) healed += r.by() == "fleetd";
  if (healed >= MaxReplacements(policy)) {
    v.why_not =
        absl::StrCat("no heal: the failure policy's ", MaxReplacements(policy), " replacement",
                     MaxReplacements(policy) == 1 ? " is" : "s are", " used up");
    v.blocked = true;
    return v;
  }
  absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
  if (!inventory.ok()) {
    v.why_not = absl::StrCat("inventory unreadable: ", inventory.status().message());
    return v;
  }
  // 1. and 2. A member whose device or whose own fiber's switch port has failed.
  if (std::vector<FailedPart> parts = FailedParts(a, **inventory); !parts.empty()) {
    v.member = parts.front().member;
    v.reason = parts.front().reason;
    return v;
  }
  const CachedInventory& site = **inventory;
  std::map<std::string, int> hurt;  // Member → its circuits not ACTIVE.
  std::string first_receiver;       // The receiving member of the first circuit not ACTIVE.
  for (const v1::Circuit& c : LiveCircuits(a)) {
    if (c.state() == v1::CIRCUIT_STATE_ACTIVE) continue;
    for (const v1::OnicPortRef& end : {c.source(), c.destination()})
      ++hurt[site.DeviceOf(end.onic())];
    if (first_receiver.empty()) first_receiver = site.DeviceOf(c.destination().onic());
  }
  // 3. Links that would not retrain within `within`: the member with the most circuits not
  // ACTIVE (a dead device or agent takes all of its own down, a neighbour only the one
  // they share); ties go to a SUSPECT device, then to the first such circuit's receiver,
  // whose agent reported it, then to member order.
  const absl::Time due = LinksDue(a, now);
  if (now < due) {
    v.why_not = absl::StrCat("its links have until ", absl::FormatTime(due),
                             " to retrain (on_failure.within)");
    return v;
  }
  auto rank = [&](const std::string& m) {
    const v1::Device* d = site.FindDevice(m);
    const bool suspect = d != nullptr && d->health() == v1::DEVICE_HEALTH_SUSPECT;
    return std::make_tuple(hurt[m], suspect, m == first_receiver);
  };
  for (const std::string& m : a.members()) {
    if (hurt[m] == 0) continue;
    if (v.member.empty() || rank(m) > rank(v.member)) v.member = m;
  }
  if (v.member.empty()) {
    v.why_not = "no member has a circuit down";
    return v;
  }
  v.reason = absl::StrCat(hurt[v.member], " of its links not retrained within ",
                          absl::FormatDuration(HealWithin(policy)));
  return v;
}

void Healer::CrossConnectsSeen(const std::string& id, absl::Time at, Seen seen) {
  absl::MutexLock lock(&mu_);
  switch (seen) {
    case Seen::kRemade:
      relit_[id] = at;
      return;
    case Seen::kUnseen:
      relit_[id] = absl::InfiniteFuture();
      return;
    case Seen::kWhole:
      if (auto it = relit_.find(id); it != relit_.end() && it->second == absl::InfiniteFuture()) {
        it->second = at;
      }
      return;
  }
}

absl::Time Healer::LinksDue(const v1::Allocation& a, absl::Time now) {
  const absl::Time due = HealDue(a, now);
  absl::MutexLock lock(&mu_);
  auto relit = relit_.find(a.id());
  if (relit == relit_.end() || due == absl::InfiniteFuture()) return due;
  if (relit->second == absl::InfiniteFuture()) return absl::InfiniteFuture();
  return std::max(due, relit->second + HealWithin(a.request().on_failure()));
}

bool Healer::StartIfDue(const v1::Allocation& a) {
  const absl::Time now = p_.ctx.clock->Now();
  Verdict v = Judge(a, now);
  if (v.blocked) Refuse(a, v.why_not, "blocked", "refused", /*update=*/false);
  if (v.member.empty()) return false;
  {
    // One heal at a time: a retry made due meanwhile does nothing while one is in flight.
    absl::MutexLock lock(&mu_);
    if (!healing_.insert(a.id()).second) return true;
  }
  const absl::Duration degraded_for =
      a.has_degraded_since() ? now - FromProtoTime(a.degraded_since()) : absl::ZeroDuration();
  const bool same_switch = a.request().on_failure().spares() != v1::SPARE_SCOPE_ANY;
  // The heal claims the allocation itself (MemberChanges), once this retry lets it go.
  const std::string id = a.id();
  if (p_.pool.Spawn("", [this, id, v = std::move(v), same_switch, degraded_for] {
        Heal(id, v.member, v.reason, same_switch, degraded_for);
        absl::MutexLock lock(&mu_);
        healing_.erase(id);
      })) {
    return true;
  }
  absl::MutexLock lock(&mu_);
  healing_.erase(id);
  return false;
}

void Healer::Heal(const std::string& id, const std::string& member, const std::string& reason,
                  bool same_switch_only, absl::Duration degraded_for) {
  // DEGRADED to READY: from when it turned DEGRADED, as far as the clock goes back.
  const absl::Time degraded_at = p_.ctx.clock->Now() - degraded_for;
  absl::Status healed = changes_->ReplaceFailed(
      id,
      {.member = member,
       .reason = reason,
       .same_switch_only = same_switch_only,
       .degraded_for = degraded_for,
       .only_if_degraded = true},
      Caller::Operator("fleetd"), [p = p_, degraded_at](const v1::Allocation& ended) {
        const char* outcome = ended.state() == v1::ALLOCATION_STATE_READY      ? "healed"
                              : ended.state() == v1::ALLOCATION_STATE_DEGRADED ? "degraded"
                                                                               : "failed";
        p.ctx.metrics.HealEnded(outcome, p.ctx.clock->Now() - degraded_at);
      });
  if (healed.ok()) {
    // The replacement's transaction takes it from here and schedules its own retries.
    absl::MutexLock lock(&mu_);
    refused_.erase(id);
    return;
  }
  // Another change of it ran first, or it is no longer DEGRADED (healed meanwhile): not a
  // refusal. A retry made due meanwhile looks at it again.
  if (healed.code() == absl::StatusCode::kAborted ||
      healed.code() == absl::StatusCode::kUnavailable ||
      healed.code() == absl::StatusCode::kFailedPrecondition) {
    p_.syncs.RetryLater(id);
    return;
  }
  const char* outcome =
      healed.code() == absl::StatusCode::kResourceExhausted ? "no_spare" : "refused";
  const std::string why =
      absl::StrCat("no heal: cannot replace ", member, " (", reason, "): ", healed.message());
  // Under a claim taken now, on the allocation as it is now; the event is recorded either way.
  const bool claimed = p_.pool.Claim(id);
  if (absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
      a.ok() && a->state() == v1::ALLOCATION_STATE_DEGRADED) {
    Refuse(*a, why, absl::StrCat(member, " ", absl::StatusCodeToString(healed.code())), outcome,
           claimed);
  }
  if (claimed) p_.pool.Unclaim(id);
  p_.syncs.RetryLater(id);
}

void Healer::Refuse(const v1::Allocation& a, const std::string& why, const std::string& key,
                    const char* outcome, bool update) {
  {
    absl::MutexLock lock(&mu_);
    Refused& last = refused_[a.id()];
    const bool repeat = last.key == key;
    last = {key, why};
    if (repeat) return;
  }
  // Counted once per refusal, not once per retry that meets it again.
  p_.ctx.metrics.HealEnded(outcome, absl::ZeroDuration());
  if (!update) {
    p_.ctx.Record("allocation.heal_failed", "allocation", a.id(), v1::EVENT_SEVERITY_WARNING,
                  "fleetd", absl::StrCat("allocation ", a.id(), " stays DEGRADED: ", why));
    return;
  }
  // The reason keeps the links' words and adds why no spare stands in.
  store::AllocationUpdate u;
  u.id = a.id();
  u.reason = absl::StrCat(a.reason(), "; ", why);
  u.severity = v1::EVENT_SEVERITY_WARNING;
  u.event_kind = "allocation.heal_failed";
  u.event_message = absl::StrCat("allocation ", a.id(), " stays DEGRADED: ", why);
  p_.ctx.Update(u, "fleetd").IgnoreError();
}

std::string Healer::Refusal(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = refused_.find(id);
  return it == refused_.end() ? "" : it->second.why;
}

void Healer::Forget(const std::string& id) {
  absl::MutexLock lock(&mu_);
  refused_.erase(id);
  relit_.erase(id);
}

void Healer::DeviceHealed(const std::string& device) {
  absl::MutexLock lock(&mu_);
  failed_retrains_.erase(device);
}

void Healer::CountRetrains(const std::vector<v1::Circuit>& circuits,
                           const LinkTrainer::Failures& failed) {
  const uint32_t suspect_after = p_.ctx.options.suspect_after_failed_retrains;
  absl::StatusOr<std::shared_ptr<const CachedInventory>> inventory = p_.inventory.Current();
  if (suspect_after == 0 || !inventory.ok()) return;
  std::vector<std::pair<const v1::Device*, std::string>> suspects;
  {
    absl::MutexLock lock(&mu_);
    for (const v1::Circuit& c : circuits) {
      const v1::Device* d =
          (*inventory)->FindDevice((*inventory)->DeviceOf(c.destination().onic()));
      if (d == nullptr) continue;
      // A retrain that reached no agent (none connected, or it left meanwhile) says nothing
      // of the device: it counts neither as a failure nor as a success.
      if (failed.no_agent.contains(c.id())) continue;
      auto why = failed.why.find(c.id());
      if (why == failed.why.end()) {
        failed_retrains_.erase(d->id());
        continue;
      }
      if (++failed_retrains_[d->id()] >= static_cast<int>(suspect_after) &&
          d->health() != v1::DEVICE_HEALTH_FAILED && d->health() != v1::DEVICE_HEALTH_SUSPECT) {
        suspects.emplace_back(d, why->second);
      }
    }
  }
  for (const auto& [d, why] : suspects) {
    absl::Status s = p_.ctx.store->SetDeviceHealth(
        d->id(), v1::DEVICE_HEALTH_SUSPECT,
        absl::StrCat(suspect_after, " retrains in a row failed, the last: ", why), "fleetd");
    if (!s.ok()) {
      FLEET_LOG(WARNING) << "device " << d->id() << " not marked suspect: " << s;
    }
  }
}

}  // namespace fleet::engine
