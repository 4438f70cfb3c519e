// The one-line texts of references, port ranges, wiring, states, leases and links.
#include "controller/cli/object_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller/cli/output.h"

namespace fleet::cli {
namespace {

TEST(FormatTest, WiringNamesTheFiberEnd) {
  v1::SwitchPort port;
  EXPECT_EQ(WiringText(port), "");
  port.set_direction(v1::PORT_DIRECTION_INGRESS);
  port.mutable_wiring()->mutable_onic_port()->set_onic("s1c0-n0");
  port.mutable_wiring()->mutable_onic_port()->set_port(1);
  EXPECT_EQ(WiringText(port), "onic s1c0-n0/1 tx");
  port.set_direction(v1::PORT_DIRECTION_EGRESS);
  EXPECT_EQ(WiringText(port), "onic s1c0-n0/1 rx");
  port.mutable_wiring()->set_trunk("ocs1-ocs2-01");
  EXPECT_EQ(WiringText(port), "trunk ocs1-ocs2-01");
}

TEST(AllocationTextTest, StateLineCarriesTheReason) {
  v1::Allocation a;
  a.set_id("a2");
  a.set_state(v1::ALLOCATION_STATE_PROGRAMMING);
  EXPECT_EQ(AllocationStateLine(a), "a2 programming");
  a.set_state(v1::ALLOCATION_STATE_FAILED);
  a.set_reason("switch ocs1 refused");
  EXPECT_EQ(AllocationStateLine(a), "a2 failed switch ocs1 refused");
}

TEST(AllocationTextTest, LeaseLineShowsTimeUntilExpiry) {
  google::protobuf::Timestamp expires;
  EXPECT_EQ(LeaseLine("a1", expires, absl::FromUnixSeconds(1'700'000'000)), "a1 lease expires -");
  expires.set_seconds(1'700'000'000 + 300);
  EXPECT_EQ(LeaseLine("a1", expires, absl::FromUnixSeconds(1'700'000'000)),
            "a1 lease expires 2023-11-14T22:18:20Z (in 5m)");
}

TEST(LinkStateLineTest, NamesOtherStatesWithTheirDetail) {
  v1::LinkState state;
  state.set_port(2);
  state.set_status(v1::LINK_STATUS_QUIESCED);
  state.set_rx_power_dbm(-3.0);
  state.set_detail("out of service for c7");
  EXPECT_EQ(LinkStateLine("gpu3-n0", state), "gpu3-n0 port 2: quiesced: out of service for c7");
  state.set_status(v1::LINK_STATUS_TRAINING);
  state.clear_detail();
  EXPECT_EQ(LinkStateLine("gpu3-n0", state), "gpu3-n0 port 2: training");
  state.set_status(v1::LINK_STATUS_UNSPECIFIED);
  EXPECT_EQ(LinkStateLine("gpu3-n0", state), "gpu3-n0 port 2: unknown");
}

TEST(LinkStateLineTest, UpLinkLeavesOutWhatIsNotKnown) {
  v1::LinkState state;
  state.set_port(1);
  state.set_status(v1::LINK_STATUS_UP);
  state.set_rx_power_dbm(kNoPowerReadingDbm);
  EXPECT_EQ(LinkStateLine("s1c0-n0", state), "s1c0-n0 port 1: up");
  state.set_peer_seen("FLT-G3-0/1");
  EXPECT_EQ(LinkStateLine("s1c0-n0", state), "s1c0-n0 port 1: up (peer FLT-G3-0/1)");
}

}  // namespace
}  // namespace fleet::cli
