// fleetctl's read verbs: `get KIND` lists every object of a kind, `describe KIND NAME` shows
// one object with what belongs to it.
#ifndef FLEET_CONTROLLER_CLI_GET_DESCRIBE_VERBS_H_
#define FLEET_CONTROLLER_CLI_GET_DESCRIBE_VERBS_H_

#include <cstdint>
#include <string>

#include "controller/cli/session.h"
#include "controller/cli/verb.h"

namespace fleet::cli {

// `get KIND`: one List RPC, printed as a table or as the List response.
struct GetArgs {
  std::string kind;       // switches, ports, ... (singular accepted).
  std::string switch_id;  // Filters; each applies to some kinds only (see --help).
  std::string host;
  std::string kind_filter;  // A device kind for devices; an object kind for events.
  std::string tenant;
  bool all = false;  // Allocations: the released ones too.
  std::string allocation;
  std::string object;  // Events: object id.
  int64_t after = 0;   // Events: after this sequence number.
  int64_t limit = 0;   // Events: at most this many; 0 is the server's default.
  // Print the list, then again each time it changes, until interrupted or the server ends
  // the event stream. The list is asked for again on each event recorded (WatchEvents), and
  // printed only when it differs: in a table under a WatchHeader, or as one streamed message
  // (a JSON line, a YAML document). For events this is `events --follow`.
  bool watch = false;
};
int Get(const Session& session, const GetArgs& args);

// `describe KIND NAME`: one object with what belongs to it (an allocation with its events).
int Describe(const Session& session, const std::string& kind, const std::string& name);

Verb GetVerb();
Verb DescribeVerb();

}  // namespace fleet::cli

#endif  // FLEET_CONTROLLER_CLI_GET_DESCRIBE_VERBS_H_
