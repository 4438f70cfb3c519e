// fleetctl's operations on the running fabric, all through AdminService: drain and undrain,
// reconcile, the event log, O-NIC links, health and version.
#ifndef FLEET_CONTROLLER_CLI_ADMIN_VERBS_H_
#define FLEET_CONTROLLER_CLI_ADMIN_VERBS_H_

#include <cstdint>
#include <limits>
#include <string>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `drain port SWITCH/PORT | onic ID | host NAME [--evict] [--reason TEXT]`: new circuits are
// refused there; prints the allocations using it (failed with `evict`).
struct DrainArgs {
  std::string kind;  // port, onic or host (plurals accepted).
  std::string name;  // SWITCH/PORT for a port.
  bool evict = false;
  std::string reason;
};
int Drain(const Session& session, const DrainArgs& args);
// `undrain port|onic|host NAME`.
int Undrain(const Session& session, const std::string& kind, const std::string& name);

// `reconcile [--switch ID] [--adopt-unknown | --remove-unknown] [--dry-run]`: prints the drift
// found (and what was done about it) and the counts. Both policies at once is a usage error;
// neither leaves unknown cross-connects to the server's configured policy.
struct ReconcileArgs {
  std::string switch_id;
  bool adopt_unknown = false;
  bool remove_unknown = false;
  bool dry_run = false;
};
int Reconcile(const Session& session, const ReconcileArgs& args);

// `events [--follow] [--after N | --since DURATION] [--kind K] [--object ID]`: without
// `follow` the same as `get events`; with it, WatchEvents, printing each event as it arrives (a
// table row, or one JSON object per line) until the server ends the stream or the process is
// interrupted. Where it starts: after sequence `after`; else the events of the last `since`;
// else from the start of the log, or with `follow` from now (none replayed).
struct EventsArgs {
  bool follow = false;
  int64_t after = kEventsAfterUnset;
  std::string since;  // absl::ParseDuration text; "" when not given.
  std::string object_kind;
  std::string object;

  // No sequence number at all, so that a negative --after is still refused.
  static constexpr int64_t kEventsAfterUnset = std::numeric_limits<int64_t>::min();
};
int Events(const Session& session, const EventsArgs& args);

// `link retrain ONIC PORT`: the O-NIC's agent retrains one port (1 or 2; anything else is a
// usage error); prints the port's state afterwards.
int LinkRetrain(const Session& session, const std::string& onic, int64_t port);
// `link status ONIC`: both ports' state as the O-NIC's agent reports it.
int LinkStatus(const Session& session, const std::string& onic);

int Health(const Session& session);

// Always prints the client version; the server's only if it answers Health. Exit 0 either way.
// With -o json|yaml, an object {client, server} (server left out when it did not answer).
int Version(const Session& session);

Verb DrainVerb();
Verb UndrainVerb();
Verb ReconcileVerb();
Verb EventsVerb();
Verb LinkVerb();
Verb HealthVerb();
Verb VersionVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_ADMIN_VERBS_H_
