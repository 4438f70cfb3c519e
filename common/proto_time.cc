#include "common/proto_time.h"

#include <google/protobuf/util/time_util.h>

namespace fleet {

using google::protobuf::util::TimeUtil;

google::protobuf::Timestamp ToProtoTime(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

absl::Time FromProtoTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  return TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  // Not TimeUtil::DurationToNanoseconds, which overflows past 292 years.
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace fleet
