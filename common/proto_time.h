// Time between Abseil and the protobuf well-known types, one way for the whole project.
// Conversions saturate instead of overflowing: a Duration past what absl::Duration holds
// becomes an infinite one, never a wrapped negative.
#ifndef FLEET_COMMON_PROTO_TIME_H_
#define FLEET_COMMON_PROTO_TIME_H_

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/time/time.h"

namespace fleet {

google::protobuf::Timestamp ToProtoTime(absl::Time t);  // Microsecond precision.
absl::Time FromProtoTime(const google::protobuf::Timestamp& t);
google::protobuf::Duration ToProtoDuration(absl::Duration d);  // Nanosecond precision.
absl::Duration FromProtoDuration(const google::protobuf::Duration& d);

}  // namespace fleet

#endif  // FLEET_COMMON_PROTO_TIME_H_
