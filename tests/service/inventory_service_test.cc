// InventoryService: inventory read, applied and deleted over the API.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/service/services_fixture.h"

namespace fleet::service {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

TEST_F(ServicesTest, Gen1PortsAreAllListedWithTheirWiring) {
  ApplyGen1();
  v1::ListPortsRequest request;
  request.set_switch_id("ocs1");
  v1::ListPortsResponse response;
  ASSERT_TRUE(inventory_stub_->ListPorts(Context().get(), request, &response).ok());
  ASSERT_THAT(response.ports(), SizeIs(768));
  const v1::SwitchPort& first = response.ports(0);
  EXPECT_EQ(first.ref().port(), 1u);
  EXPECT_EQ(first.direction(), v1::PORT_DIRECTION_INGRESS);
  EXPECT_EQ(first.wiring().onic_port().onic(), "s1c0-n0");
  EXPECT_EQ(first.wiring().onic_port().port(), 1u);
  const v1::SwitchPort& rx = response.ports(384);  // Port 385: s1c0-n0 port 1's rx fiber.
  EXPECT_EQ(rx.ref().port(), 385u);
  EXPECT_EQ(rx.direction(), v1::PORT_DIRECTION_EGRESS);
  EXPECT_EQ(rx.wiring().onic_port().onic(), "s1c0-n0");
  int trunk = 0, wired = 0;
  for (const v1::SwitchPort& p : response.ports()) {
    trunk += p.reservation() == v1::PORT_RESERVATION_TRUNK;
    wired += p.has_wiring();
  }
  EXPECT_EQ(trunk, 192);
  EXPECT_EQ(wired, 144);
}

TEST_F(ServicesTest, ListAndGetInventoryObjects) {
  ApplyGen1();
  v1::ListOnicsResponse onics;
  ASSERT_TRUE(inventory_stub_->ListOnics(Context().get(), {}, &onics).ok());
  EXPECT_THAT(onics.onics(), SizeIs(36));

  v1::ListOnicsRequest on_host;
  on_host.set_host("server2");
  ASSERT_TRUE(inventory_stub_->ListOnics(Context().get(), on_host, &onics).ok());
  EXPECT_THAT(onics.onics(), SizeIs(6));

  v1::ListDevicesRequest gpus;
  gpus.set_kind(v1::DEVICE_KIND_GPU);
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(inventory_stub_->ListDevices(Context().get(), gpus, &devices).ok());
  EXPECT_THAT(devices.devices(), SizeIs(8));

  v1::GetOnicRequest get;
  get.set_id("gpu3-n0");
  v1::Onic onic;
  ASSERT_TRUE(inventory_stub_->GetOnic(Context().get(), get, &onic).ok());
  EXPECT_EQ(onic.device(), "gpu3");
  ASSERT_THAT(onic.ports(), SizeIs(2));

  v1::GetSwitchRequest missing;
  missing.set_id("ocs9");
  v1::Switch sw;
  grpc::Status status = inventory_stub_->GetSwitch(Context().get(), missing, &sw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "switch ocs9 not found");

  grpc::Status empty = inventory_stub_->GetSwitch(Context().get(), {}, &sw);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty.error_message(), HasSubstr("id is empty"));

  // The login fleetd uses comes from its own credentials file, by switch id; the inventory's
  // `credentials:` stays what the file said, a note.
  v1::GetSwitchRequest ocs1;
  ocs1.set_id("ocs1");
  ASSERT_TRUE(inventory_stub_->GetSwitch(Context().get(), ocs1, &sw).ok());
  EXPECT_EQ(sw.credentials_file(), "creds.yaml");
  EXPECT_EQ(sw.credentials_ref(), "/etc/fleet/credentials/ocs1.yaml");
  EXPECT_EQ(switches_->CredentialsFile("ocs9"), "");  // No entry: none in force.
  v1::ListSwitchesResponse switches;
  ASSERT_TRUE(inventory_stub_->ListSwitches(Context().get(), {}, &switches).ok());
  EXPECT_EQ(switches.switches(0).credentials_file(), "creds.yaml");
}

TEST_F(ServicesTest, BrokenInventoryIsInvalidArgumentListingEveryProblem) {
  ApplyGen1();
  v1::ApplyInventoryRequest request;
  v1::Onic* onic = request.mutable_inventory()->add_onics();
  onic->set_id("extra");
  onic->set_device("nosuchdevice");
  onic->set_serial("FLT-S1C0-N0");  // Already used by s1c0-n0.
  v1::ApplyInventoryResponse response;
  grpc::Status status = inventory_stub_->ApplyInventory(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("device 'nosuchdevice' is not in the inventory"));
  EXPECT_THAT(status.error_message(), HasSubstr("duplicate serial 'FLT-S1C0-N0'"));
  EXPECT_THAT(status.error_message(), HasSubstr("has 0 ports"));
  EXPECT_EQ(store_->GetOnic("extra").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServicesTest, ChangesRecordTheCallersPrincipal) {
  ApplyGen1();
  v1::DeleteObjectRequest request;
  request.set_kind("device");
  request.set_name("gpu8");
  v1::DeleteObjectResponse response;
  ASSERT_TRUE(
      inventory_stub_->DeleteObject(Context("operator:alice").get(), request, &response).ok());
  EXPECT_THAT(response.deleted(), ::testing::ElementsAre("device gpu8", "onic gpu8-n0"));

  v1::ListEventsRequest events_request;
  events_request.set_object_kind("device");
  events_request.set_object_id("gpu8");
  v1::ListEventsResponse events;
  ASSERT_TRUE(admin_stub_->ListEvents(Context().get(), events_request, &events).ok());
  ASSERT_THAT(events.events(), SizeIs(2));  // Created by the apply, then deleted.
  EXPECT_EQ(events.events(0).principal(), "operator:tester");
  EXPECT_EQ(events.events(1).principal(), "operator:alice");
  EXPECT_EQ(events.events(1).kind(), "inventory.deleted");
}

TEST_F(ServicesTest, DeleteIsRefusedWhileInUse) {
  ApplyGen1();
  v1::DeleteObjectRequest request;
  request.set_kind("host");
  request.set_name("server1");
  v1::DeleteObjectResponse response;
  grpc::Status status = inventory_stub_->DeleteObject(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("host server1 still has devices server1-cpu0"));

  request.set_kind("widget");
  status = inventory_stub_->DeleteObject(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("cannot delete kind 'widget'"));
  EXPECT_TRUE(store_->GetHost("server1").ok());
}

}  // namespace
}  // namespace fleet::service
