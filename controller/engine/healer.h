// Healing under a request's failure policy (v1::FailurePolicy; docs/engine.md, "Healing"):
// a DEGRADED allocation with `replace` has one failed member replaced by a spare, through
// the same transaction as an operator's ReplaceMember (only the circuits that change are
// reprogrammed, in one batch, then retrained), recorded as a v1::MemberReplacement by
// `fleetd`. A member is replaced at once when its device has FAILED or a switch port of its
// own fibers has, and otherwise once the allocation has been DEGRADED for `within` (its
// links would not retrain). With no spare, or `max_replacements` used, the allocation stays
// DEGRADED, its reason saying why, and its links go on being retried.
//
// Also counts each device's failed retrains: one that fails `suspect_after` times in a row
// is marked SUSPECT (chosen last by member selection) until an operator says otherwise.
#ifndef FLEET_CONTROLLER_ENGINE_HEALER_H_
#define FLEET_CONTROLLER_ENGINE_HEALER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "controller/engine/engine_parts.h"
#include "controller/engine/failure_policy.h"
#include "controller/engine/member_changes.h"
#include "fleet/v1/topology.pb.h"

namespace fleet::engine {

class Healer {
 public:
  Healer(const EngineParts& parts, MemberChanges* changes) : p_(parts), changes_(changes) {}

  // Which member to replace now, and why; `member` empty when none (no replace policy, none
  // used up, no failed device or port and `within` not passed yet: `why_not` says which).
  struct Verdict {
    std::string member;
    std::string reason;
    std::string why_not;
    bool blocked = false;  // A heal is called for but cannot be had (policy used up).
  };
  // Judges DEGRADED allocation `a` (as stored) at `now`, on the cached inventory's health.
  Verdict Judge(const v1::Allocation& a, absl::Time now);

  // Called by a retry holding `a`'s claim, the retry Running: when Judge names a member,
  // starts its heal on a worker of its own (which claims `a` once the retry lets go) and
  // returns true; the retry must then do nothing more. False: retrain as usual.
  bool StartIfDue(const v1::Allocation& a);

  // What a look at the switches found of allocation `id`'s cross-connects at `at`.
  enum class Seen {
    kWhole,   // Every one there, none made again.
    kRemade,  // Some were made again (or what held their ports taken off): now whole.
    kUnseen,  // A switch could not be read, or refused the repair.
  };
  // A link dark for want of its cross-connect is the switch's fault, not a member's: after
  // kRemade the links get their policy's `within` again from `at`; after kUnseen they get it
  // from the next kWhole. Rule 3 (links past `within`) waits for that; a failed device or
  // port is replaced at once still.
  void CrossConnectsSeen(const std::string& id, absl::Time at, Seen seen);
  // When `a`'s links have had their `within` (from when it turned DEGRADED, or from when its
  // cross-connects were last seen whole again): a member is replaced for them from then on.
  // InfiniteFuture without a policy that replaces, or while they are not seen whole.
  absl::Time LinksDue(const v1::Allocation& a, absl::Time now);

  // FailedParts (failure_policy.h) of `a` on the cached inventory, one line each.
  std::vector<std::string> FailedPartReasons(const v1::Allocation& a);

  // Why allocation `id` is not being healed though its policy asks (no spare, replacements
  // used up), for its DEGRADED reason; "" when nothing stands in the way.
  std::string Refusal(const std::string& id);
  // Forgets what was known of allocation `id` (it ended, or is READY again).
  void Forget(const std::string& id);
  // An operator said `device` is healthy: its count of failed retrains starts again.
  void DeviceHealed(const std::string& device);

  // The retrains of an allocation's `circuits`, of which `failed` did not train: counts, per
  // device of the receiving O-NIC, failures in a row, and marks a device SUSPECT when they
  // reach `suspect_after` (0: never). A retrain that reached no agent counts neither way: an
  // absent agent is not a failed device.
  void CountRetrains(const std::vector<v1::Circuit>& circuits, const LinkTrainer::Failures& failed);

 private:
  // Records why `a` is not healed (`why`), once per `key` (the member and the refusal's
  // code: the words may change from one attempt to the next): counted as `outcome` in the
  // heal metrics, an event and, with `update` (the caller holds the claim), its reason too.
  void Refuse(const v1::Allocation& a, const std::string& why, const std::string& key,
              const char* outcome, bool update);
  // The heal's work, without a claim: replace `member` of `id` as fleetd; on a refusal, the
  // allocation's reason names it (once per message) and the retries go on.
  void Heal(const std::string& id, const std::string& member, const std::string& reason,
            bool same_switch_only, absl::Duration degraded_for);

  const EngineParts p_;
  MemberChanges* const changes_;
  absl::Mutex mu_;
  std::map<std::string, int> failed_retrains_ ABSL_GUARDED_BY(mu_);  // By device.
  // The last refusal recorded on each allocation, so a retry does not repeat it.
  struct Refused {
    std::string key;
    std::string why;
  };
  std::map<std::string, Refused> refused_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> healing_ ABSL_GUARDED_BY(mu_);  // Allocations with a heal in flight.
  // By allocation: when its links' `within` starts again (CrossConnectsSeen); InfiniteFuture
  // while its cross-connects are not seen whole.
  std::map<std::string, absl::Time> relit_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::engine

#endif  // FLEET_CONTROLLER_ENGINE_HEALER_H_
