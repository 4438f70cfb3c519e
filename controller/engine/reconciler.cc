#include "controller/engine/reconciler.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "controller/engine/circuits.h"
#include "controller/engine/tenancy.h"

namespace fleet::engine {

namespace {

// Switches a reconciliation pass reads at once: each read is mostly waiting on the switch.
constexpr size_t kSwitchesAtOnce = 16;

v1::Drift MakeDrift(v1::Drift::Kind kind, const std::string& switch_id, uint32_t ingress,
                    uint32_t egress, const std::string& circuit, const std::string& action) {
  v1::Drift d;
  d.set_kind(kind);
  d.mutable_cross_connect()->set_switch_id(switch_id);
  d.mutable_cross_connect()->set_ingress(ingress);
  d.mutable_cross_connect()->set_egress(egress);
  d.set_circuit_id(circuit);
  d.set_action(action);
  return d;
}

const char* KindWord(v1::Drift::Kind kind) {
  switch (kind) {
    case v1::Drift::KIND_MISSING:
      return "missing";
    case v1::Drift::KIND_WRONG:
      return "wrong";
    case v1::Drift::KIND_UNKNOWN:
      return "unknown";
    default:
      return "drift";
  }
}

// The manual circuit adopting unknown cross-connect `ingress`->`egress` of `switch_id`
// between the O-NIC ports `from` and `to` whose fibers it joins.
v1::Circuit Adopted(const std::string& switch_id, uint32_t ingress, uint32_t egress,
                    const v1::OnicPortRef& from, const v1::OnicPortRef& to) {
  v1::Circuit c;
  c.set_id(absl::StrCat("manual-", switch_id, "-", ingress, "-", egress));
  c.set_manual(true);
  *c.mutable_source() = from;
  *c.mutable_destination() = to;
  v1::CrossConnect* x = c.add_cross_connects();
  x->set_switch_id(switch_id);
  x->set_ingress(ingress);
  x->set_egress(egress);
  c.set_state(v1::CIRCUIT_STATE_ACTIVE);
  return c;
}

}  // namespace

// One switch's comparison, as ReconcileOne builds it.
struct Reconciler::Comparison {
  std::vector<switch_adapters::CrossConnect> actual;
  struct Want {
    uint32_t egress;
    std::string circuit;
    std::string allocation;
  };
  std::map<uint32_t, Want> desired;                // By ingress.
  std::map<uint32_t, uint32_t> desired_by_egress;  // Egress → ingress.
  std::set<uint32_t> in_transaction;               // Ports of claimed allocations' circuits.
  std::map<uint32_t, uint32_t> on_switch;          // Ingress → egress.
  switch_adapters::CrossConnectBatch repair;
  std::vector<v1::Drift> drift;
  std::vector<v1::Circuit> adopt;
};

absl::StatusOr<v1::ReconcileResponse> Reconciler::Reconcile(const v1::ReconcileRequest& request,
                                                            const Caller& caller) {
  RETURN_IF_ERROR(RequireOperator(caller, "reconcile"));
  v1::UnknownCrossConnectPolicy policy = request.unknown();
  if (policy == v1::UNKNOWN_CROSS_CONNECT_POLICY_UNSPECIFIED)
    policy = p_.ctx.options.unknown_policy;
  return ReconcileSwitches(request.switch_id(), policy, request.dry_run(), caller.principal,
                           "operator", /*wait_for_resumed=*/true);
}

absl::StatusOr<v1::ReconcileResponse> Reconciler::ReconcileSwitches(
    const std::string& switch_id, v1::UnknownCrossConnectPolicy unknown, bool dry_run,
    const std::string& principal, const std::string& trigger, bool wait_for_resumed) {
  std::vector<v1::Switch> targets;
  if (switch_id.empty()) {
    ASSIGN_OR_RETURN(targets, p_.ctx.store->ListSwitches());
  } else {
    ASSIGN_OR_RETURN(v1::Switch sw, p_.ctx.store->GetSwitch(switch_id));
    targets.push_back(std::move(sw));
  }
  // Interrupted transactions are claimed first, so the comparison leaves their ports alone;
  // they are resumed after it, through the same idempotent steps as a fresh request.
  std::vector<std::string> interrupted;
  if (!dry_run) interrupted = ClaimInterrupted();

  // The switches are read and compared at once, up to kSwitchesAtOnce, each on a thread of
  // this pass: a pass (a restart's above all, which reads every switch before fleetd serves)
  // takes about the slowest switch's time, not the sum of them all. Not on the engine's
  // pool: there the reads would wait behind every queued transaction and count against its
  // queue's room. Each switch's findings are kept apart and merged in the order of `targets`.
  struct Outcome {
    bool ran = false;  // Not while stopping: each read can take seconds, a stop does not wait.
    absl::Status status;
    v1::ReconcileResponse response;
    std::set<std::string> affected;
  };
  std::vector<Outcome> outcomes(targets.size());
  std::atomic<size_t> next{0};
  auto reconcile_next = [&] {
    for (size_t i = next++; i < targets.size(); i = next++) {
      if (p_.pool.stopping()) continue;
      Outcome& o = outcomes[i];
      const v1::Switch& sw = targets[i];
      o.ran = true;
      absl::StatusOr<SwitchProgrammer*> programmer = p_.programmers.For(sw.id());
      o.status = programmer.status();
      if (programmer.ok()) {
        (*programmer)->Exclusive([&](switch_adapters::OpticalSwitch& driver) {
          o.status = ReconcileOne(sw, driver, unknown, dry_run, principal, o.response, o.affected);
        });
      }
    }
  };
  {
    std::vector<std::thread> readers;
    for (size_t t = 1; t < std::min(targets.size(), kSwitchesAtOnce); ++t) {
      readers.emplace_back([&] {
        NameThisThread("fleet-reconcile");
        reconcile_next();
      });
    }
    reconcile_next();  // The caller reads too.
    for (std::thread& reader : readers) reader.join();
  }

  v1::ReconcileResponse response;
  std::set<std::string> affected;  // Allocations whose cross-connects were repaired.
  std::vector<std::string> errors;
  bool stopped = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    Outcome& o = outcomes[i];
    const std::string& id = targets[i].id();
    if (!o.ran) {
      stopped = true;
      continue;
    }
    response.set_repaired(response.repaired() + o.response.repaired());
    for (v1::Drift& d : *o.response.mutable_drift()) *response.add_drift() = std::move(d);
    affected.merge(o.affected);
    if (!o.status.ok()) {
      errors.push_back(absl::StrCat("switch ", id, ": ", o.status.message()));
      p_.ctx.Record("reconcile.failed", "switch", id, v1::EVENT_SEVERITY_ALARM, principal,
                    absl::StrCat("cannot reconcile switch ", id, ": ", o.status.message()));
    }
  }
  if (stopped) errors.push_back("fleetd is stopping");
  // A dry run asks what would happen; only passes that act count as having seen the drift.
  if (!dry_run) CountDrift(trigger, response);
  if (!dry_run) RetrainRepaired(affected, principal);
  response.set_resumed_transactions(static_cast<uint32_t>(interrupted.size()));
  Resume(interrupted);
  if (wait_for_resumed && !interrupted.empty()) {
    // An operator's reconcile reports how the resumed transactions ended: each finishes, or
    // is rolled back (FAILED), within its own timeouts.
    p_.pool.WaitUnclaimed(interrupted, p_.ctx.clock->Now() + absl::Seconds(60));
    uint32_t rolled_back = 0;
    for (const std::string& id : interrupted) {
      absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
      rolled_back += a.ok() && a->state() == v1::ALLOCATION_STATE_FAILED;
    }
    response.set_rolled_back_transactions(rolled_back);
  }
  if (!errors.empty()) return absl::UnavailableError(absl::StrJoin(errors, "; "));
  return response;
}

void Reconciler::RecordDrift(const std::string& switch_id, const v1::Drift& d,
                             const std::string& principal) {
  p_.ctx.Record(
      absl::StrCat("drift.", KindWord(d.kind())), "switch", switch_id,
      absl::StartsWith(d.action(), "reported") ? v1::EVENT_SEVERITY_ALARM
                                               : v1::EVENT_SEVERITY_WARNING,
      principal,
      absl::StrCat("switch ", switch_id, ": cross-connect ", d.cross_connect().ingress(), "->",
                   d.cross_connect().egress(), " is ", KindWord(d.kind()),
                   d.circuit_id().empty() ? "" : absl::StrCat(" (circuit ", d.circuit_id(), ")"),
                   ": ", d.action()));
}

Reconciler::HeldCheck Reconciler::RepairHeld(const v1::Allocation& a,
                                             const std::string& principal) {
  const std::vector<v1::Circuit> live = LiveCircuits(a);
  // Switch → the cross-connects its circuits want there, with their circuit.
  std::map<std::string, std::vector<std::pair<const v1::CrossConnect*, const v1::Circuit*>>> wanted;
  for (const v1::Circuit& c : live) {
    for (const v1::CrossConnect& x : c.cross_connects()) wanted[x.switch_id()].push_back({&x, &c});
  }
  HeldCheck check;
  std::vector<std::string> problems;
  for (const auto& [switch_id, cross_connects] : wanted) {
    absl::StatusOr<SwitchProgrammer*> programmer = p_.programmers.For(switch_id);
    absl::Status status = programmer.status();
    std::vector<v1::Drift> remade;
    if (programmer.ok()) {
      (*programmer)->Exclusive([&](switch_adapters::OpticalSwitch& driver) {
        absl::StatusOr<std::vector<switch_adapters::CrossConnect>> actual =
            driver.ReadCrossConnects();
        if (!actual.ok()) {
          status = actual.status();
          return;
        }
        std::map<uint32_t, uint32_t> egress_of;  // Ingress → egress, as the switch holds them.
        for (const switch_adapters::CrossConnect& x : *actual) egress_of[x.ingress] = x.egress;
        std::map<uint32_t, uint32_t> ingress_of;  // Egress → ingress.
        for (const auto& [ingress, egress] : egress_of) ingress_of[egress] = ingress;
        // The ports are the allocation's (the store admits none into two circuits, of any
        // phase, and the claim keeps its own changes out): whatever else holds one of them
        // goes, as a reconciliation pass removes what holds a desired egress.
        switch_adapters::CrossConnectBatch batch;
        auto take_off = [&](uint32_t ingress, uint32_t egress) {
          batch.remove.push_back({ingress, egress});
          egress_of.erase(ingress);
          ingress_of.erase(egress);
        };
        for (const auto& [x, c] : cross_connects) {
          auto have = egress_of.find(x->ingress());
          if (have != egress_of.end() && have->second == x->egress()) continue;
          const bool wrong = have != egress_of.end();
          if (wrong) {
            remade.push_back(MakeDrift(v1::Drift::KIND_WRONG, switch_id, x->ingress(), have->second,
                                       c->id(), "repaired"));
            take_off(x->ingress(), have->second);
          }
          if (auto from = ingress_of.find(x->egress()); from != ingress_of.end()) {
            remade.push_back(MakeDrift(v1::Drift::KIND_UNKNOWN, switch_id, from->second,
                                       x->egress(), "", "removed"));
            take_off(from->second, x->egress());
          }
          batch.add.push_back({x->ingress(), x->egress()});
          if (!wrong) {
            remade.push_back(MakeDrift(v1::Drift::KIND_MISSING, switch_id, x->ingress(),
                                       x->egress(), c->id(), "repaired"));
          }
        }
        if (!batch.add.empty()) status = driver.Apply(batch).status;
      });
    }
    if (!status.ok()) {
      problems.push_back(absl::StrCat("switch ", switch_id, ": ", status.message()));
      continue;
    }
    std::map<std::string, int> found;  // Kind → count, all repaired.
    for (const v1::Drift& d : remade) {
      RecordDrift(switch_id, d, principal);
      ++found[KindWord(d.kind())];
      check.remade += d.kind() != v1::Drift::KIND_UNKNOWN;
    }
    for (const auto& [kind, n] : found) p_.ctx.metrics.Drift(kind, n, n);
  }
  check.verified = problems.empty();
  check.why_not = absl::StrJoin(problems, "; ");
  return check;
}

void Reconciler::CountDrift(const std::string& trigger, const v1::ReconcileResponse& response) {
  p_.ctx.metrics.ReconcileRun(trigger);
  std::map<std::string, std::pair<int, int>> drift;  // Kind → found, repaired.
  for (const v1::Drift& d : response.drift()) {
    auto& [found, repaired] = drift[KindWord(d.kind())];
    ++found;
    repaired += d.action() == "repaired" || d.action() == "removed" || d.action() == "adopted";
  }
  for (const auto& [kind, counts] : drift) p_.ctx.metrics.Drift(kind, counts.first, counts.second);
}

void Reconciler::RetrainRepaired(const std::set<std::string>& affected,
                                 const std::string& principal) {
  // A repaired cross-connect carried no light for a while: its links are retrained.
  for (const std::string& id : affected) {
    absl::StatusOr<v1::Allocation> a = p_.ctx.store->GetAllocation(id);
    if (!a.ok() || !Settled(a->state())) continue;
    store::AllocationUpdate u;
    u.id = id;
    u.state = v1::ALLOCATION_STATE_DEGRADED;
    u.reason = "a cross-connect was missing on the switch and was repaired; retraining";
    u.severity = v1::EVENT_SEVERITY_WARNING;
    for (const v1::Circuit& c : a->circuits()) {
      if (c.state() == v1::CIRCUIT_STATE_ACTIVE) {
        u.circuits[c.id()] = {v1::CIRCUIT_STATE_DEGRADED, *u.reason};
      }
    }
    u.event_message = absl::StrCat("allocation ", id, " DEGRADED: ", *u.reason);
    if (!p_.ctx.Update(u, principal).ok()) continue;
    healer_->CrossConnectsSeen(id, p_.ctx.clock->Now(), Healer::Seen::kRemade);
    if (absl::Status marked = p_.syncs.Mark(id); !marked.ok()) {
      FLEET_LOG(WARNING) << marked.message();
    }
  }
}

absl::Status Reconciler::ReconcileOne(const v1::Switch& sw, switch_adapters::OpticalSwitch& driver,
                                      v1::UnknownCrossConnectPolicy unknown, bool dry_run,
                                      const std::string& principal, v1::ReconcileResponse& response,
                                      std::set<std::string>& affected) {
  store::Store& store = *p_.ctx.store;
  Comparison cmp;
  ASSIGN_OR_RETURN(cmp.actual, driver.ReadCrossConnects());
  // What the previous pass saw: an unknown cross-connect already reported is not alarmed again.
  std::set<std::pair<uint32_t, uint32_t>> seen_before;
  ASSIGN_OR_RETURN(std::vector<v1::CrossConnect> previous,
                   store.ListObservedCrossConnects(sw.id()));
  for (const v1::CrossConnect& x : previous) seen_before.insert({x.ingress(), x.egress()});
  std::vector<v1::CrossConnect> observed;
  for (const switch_adapters::CrossConnect& x : cmp.actual) {
    v1::CrossConnect& o = observed.emplace_back();
    o.set_switch_id(sw.id());
    o.set_ingress(x.ingress);
    o.set_egress(x.egress);
  }
  RETURN_IF_ERROR(store.RecordObservedCrossConnects(sw.id(), observed));
  RETURN_IF_ERROR(Desired(sw, cmp));
  RETURN_IF_ERROR(FindDrift(sw, unknown, dry_run, cmp, affected));
  if (!dry_run) RETURN_IF_ERROR(Repair(driver, principal, cmp, response));
  for (const v1::Drift& d : cmp.drift) {
    if (d.kind() != v1::Drift::KIND_UNKNOWN && !dry_run) {
      response.set_repaired(response.repaired() + 1);
    }
    const bool repeated =
        d.action() == "reported" &&
        seen_before.contains({d.cross_connect().ingress(), d.cross_connect().egress()});
    if (!dry_run && !repeated) RecordDrift(sw.id(), d, principal);
    *response.add_drift() = d;
  }
  return absl::OkStatus();
}

absl::Status Reconciler::Desired(const v1::Switch& sw, Comparison& cmp) {
  ASSIGN_OR_RETURN(std::vector<v1::Circuit> circuits,
                   p_.ctx.store->ListCircuits({sw.id(), "", ""}));
  const std::set<std::string> claimed = p_.pool.Claims();
  for (const v1::Circuit& c : circuits) {
    for (const v1::CrossConnect& x : c.cross_connects()) {
      if (x.switch_id() != sw.id()) continue;
      if (!c.allocation_id().empty() && claimed.contains(c.allocation_id())) {
        cmp.in_transaction.insert(x.ingress());
        cmp.in_transaction.insert(x.egress());
        continue;
      }
      if (c.state() == v1::CIRCUIT_STATE_INACTIVE) continue;
      cmp.desired[x.ingress()] = {x.egress(), c.id(), c.allocation_id()};
      cmp.desired_by_egress[x.egress()] = x.ingress();
    }
  }
  // What a claimed member change took out of its allocation is its transaction's to remove
  // (Reconciler::LeftBehind): not drift to report or adopt.
  for (const std::string& id : claimed) {
    absl::StatusOr<std::vector<v1::CrossConnect>> pending = p_.ctx.store->PendingRemovals(id);
    if (!pending.ok()) continue;
    for (const v1::CrossConnect& x : *pending) {
      if (x.switch_id() != sw.id()) continue;
      cmp.in_transaction.insert(x.ingress());
      cmp.in_transaction.insert(x.egress());
    }
  }
  for (const switch_adapters::CrossConnect& x : cmp.actual) cmp.on_switch[x.ingress] = x.egress;
  return absl::OkStatus();
}

absl::Status Reconciler::FindDrift(const v1::Switch& sw, v1::UnknownCrossConnectPolicy unknown,
                                   bool dry_run, Comparison& cmp, std::set<std::string>& affected) {
  for (const auto& [ingress, want] : cmp.desired) {
    auto have = cmp.on_switch.find(ingress);
    if (have != cmp.on_switch.end() && have->second == want.egress) continue;
    const std::string action = dry_run ? "would repair" : "repaired";
    if (have != cmp.on_switch.end()) {
      cmp.drift.push_back(
          MakeDrift(v1::Drift::KIND_WRONG, sw.id(), ingress, have->second, want.circuit, action));
      cmp.repair.remove.push_back({ingress, have->second});
    } else {
      cmp.drift.push_back(
          MakeDrift(v1::Drift::KIND_MISSING, sw.id(), ingress, want.egress, want.circuit, action));
    }
    cmp.repair.add.push_back({ingress, want.egress});
    if (!want.allocation.empty()) affected.insert(want.allocation);
  }
  // Adoption needs the fibers: which O-NIC port's tx enters an ingress, whose rx leaves an
  // egress.
  std::map<uint32_t, v1::OnicPortRef> wired;
  if (unknown == v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT) {
    ASSIGN_OR_RETURN(std::vector<v1::SwitchPort> ports, p_.ctx.store->ListPorts(sw.id()));
    for (const v1::SwitchPort& p : ports) {
      if (p.wiring().has_onic_port()) wired[p.ref().port()] = p.wiring().onic_port();
    }
  }
  const std::string remove = dry_run ? "would remove" : "removed";
  for (const auto& [ingress, egress] : cmp.on_switch) {
    if (cmp.desired.contains(ingress)) continue;  // Handled above (right or wrong).
    if (cmp.in_transaction.contains(ingress) || cmp.in_transaction.contains(egress)) continue;
    std::string action = "reported";
    if (cmp.desired_by_egress.contains(egress) ||
        unknown == v1::UNKNOWN_CROSS_CONNECT_POLICY_REMOVE) {
      // Holding the egress a desired circuit needs: the circuit wins.
      cmp.repair.remove.push_back({ingress, egress});
      action = remove;
    } else if (unknown == v1::UNKNOWN_CROSS_CONNECT_POLICY_ADOPT) {
      auto from = wired.find(ingress);
      auto to = wired.find(egress);
      if (from == wired.end() || to == wired.end()) {
        action = "reported (not between O-NIC ports: cannot adopt)";
      } else {
        cmp.adopt.push_back(Adopted(sw.id(), ingress, egress, from->second, to->second));
        action = dry_run ? "would adopt" : "adopted";
      }
    }
    cmp.drift.push_back(MakeDrift(v1::Drift::KIND_UNKNOWN, sw.id(), ingress, egress, "", action));
  }
  return absl::OkStatus();
}

absl::Status Reconciler::Repair(switch_adapters::OpticalSwitch& driver,
                                const std::string& principal, Comparison& cmp,
                                v1::ReconcileResponse& response) {
  for (const v1::Circuit& c : cmp.adopt) {
    absl::Status adopted;
    {
      // Under admission, like any new circuit: idle-port quiescing sees it, or not yet.
      absl::MutexLock admit(&p_.admission.mu());
      adopted = p_.ctx.store->CreateManualCircuit(c, principal);
      if (adopted.ok()) p_.admission.Committed({c});
    }
    if (adopted.ok()) continue;
    for (v1::Drift& d : cmp.drift) {
      if (d.kind() == v1::Drift::KIND_UNKNOWN &&
          d.cross_connect().ingress() == c.cross_connects(0).ingress()) {
        d.set_action(absl::StrCat("reported (cannot adopt: ", adopted.message(), ")"));
      }
    }
  }
  if (cmp.repair.add.empty() && cmp.repair.remove.empty()) return absl::OkStatus();
  switch_adapters::ApplyResult result = driver.Apply(cmp.repair);
  if (result.status.ok()) return absl::OkStatus();
  for (v1::Drift& d : cmp.drift) {
    if (d.action() == "repaired" || d.action() == "removed") d.set_action("repair failed");
  }
  for (const v1::Drift& d : cmp.drift) *response.add_drift() = d;
  return absl::Status(result.status.code(),
                      absl::StrCat("repair failed: ", result.status.message()));
}

}  // namespace fleet::engine
