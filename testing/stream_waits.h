// How the fake services' stream handlers wait, and how long tests wait for them.
#ifndef FLEET_TESTING_STREAM_WAITS_H_
#define FLEET_TESTING_STREAM_WAITS_H_

#include "absl/time/time.h"

namespace fleet::testing {

// Stream handlers of the fakes wait for news under a lock; a client's cancellation does not
// wake them, so they also look at it this often.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
// How long a test waits for fleetctl to open a stream before it gives up (a bug, not a race).
constexpr absl::Duration kStreamOpenLimit = absl::Seconds(20);

}  // namespace fleet::testing

#endif  // FLEET_TESTING_STREAM_WAITS_H_
