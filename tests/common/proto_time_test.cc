#include "common/proto_time.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(ProtoTimeTest, TimeRoundTripsAtMicrosecondPrecision) {
  const absl::Time t = absl::FromUnixMicros(1'700'000'000'123'456);
  google::protobuf::Timestamp proto = ToProtoTime(t);
  EXPECT_EQ(proto.seconds(), 1'700'000'000);
  EXPECT_EQ(proto.nanos(), 123'456'000);
  EXPECT_EQ(FromProtoTime(proto), t);
}

TEST(ProtoTimeTest, DurationRoundTripsAtNanosecondPrecision) {
  const absl::Duration d = absl::Seconds(90) + absl::Nanoseconds(5);
  google::protobuf::Duration proto = ToProtoDuration(d);
  EXPECT_EQ(proto.seconds(), 90);
  EXPECT_EQ(proto.nanos(), 5);
  EXPECT_EQ(FromProtoDuration(proto), d);
}

TEST(ProtoTimeTest, AHugeDurationSaturatesInsteadOfOverflowing) {
  google::protobuf::Duration proto;
  proto.set_seconds(315'576'000'000);  // The largest a Duration may hold: 10,000 years.
  EXPECT_GT(FromProtoDuration(proto), absl::Hours(24 * 365 * 9'000));
  proto.set_seconds(-315'576'000'000);
  EXPECT_LT(FromProtoDuration(proto), -absl::Hours(24 * 365 * 9'000));
}

}  // namespace
}  // namespace fleet
