// InventoryService: inventory read, applied and deleted over the API.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

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

// Each part says which live allocation holds it; a failed allocation holds nothing.
TEST_F(ServicesTest, DevicesOnicsAndPortsNameTheAllocationsUsingThem) {
  ApplyGen1();
  CreateLinkAllocation();  // alloc-1: gpu1 and gpu2, circuit c1 gpu1-n0/1 → gpu2-n0/1 on 49→435.
  v1::ListDevicesRequest gpus;
  gpus.set_kind(v1::DEVICE_KIND_GPU);
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(inventory_stub_->ListDevices(Context().get(), gpus, &devices).ok());
  std::map<std::string, std::vector<std::string>> used;
  for (const v1::Device& d : devices.devices()) {
    used[d.id()] = {d.allocations().begin(), d.allocations().end()};
  }
  EXPECT_THAT(used["gpu1"], ::testing::ElementsAre("alloc-1"));
  EXPECT_THAT(used["gpu2"], ::testing::ElementsAre("alloc-1"));
  EXPECT_THAT(used["gpu3"], ::testing::IsEmpty());
  v1::GetDeviceRequest gpu2;
  gpu2.set_id("gpu2");
  v1::Device device;
  ASSERT_TRUE(inventory_stub_->GetDevice(Context().get(), gpu2, &device).ok());
  EXPECT_THAT(device.allocations(), ::testing::ElementsAre("alloc-1"));

  v1::GetOnicRequest onic_request;
  onic_request.set_id("gpu2-n0");
  v1::Onic onic;
  ASSERT_TRUE(inventory_stub_->GetOnic(Context().get(), onic_request, &onic).ok());
  EXPECT_THAT(onic.allocations(), ::testing::ElementsAre("alloc-1"));
  onic_request.set_id("gpu3-n0");
  ASSERT_TRUE(inventory_stub_->GetOnic(Context().get(), onic_request, &onic).ok());
  EXPECT_THAT(onic.allocations(), ::testing::IsEmpty());

  v1::ListPortsRequest ports_request;
  ports_request.set_switch_id("ocs1");
  v1::ListPortsResponse ports;
  ASSERT_TRUE(inventory_stub_->ListPorts(Context().get(), ports_request, &ports).ok());
  EXPECT_EQ(ports.ports(48).circuit_id(), "c1");  // Port 49.
  EXPECT_EQ(ports.ports(48).allocation_id(), "alloc-1");
  EXPECT_EQ(ports.ports(434).allocation_id(), "alloc-1");  // Port 435.
  EXPECT_EQ(ports.ports(49).allocation_id(), "");

  v1::Allocation failed;
  failed.set_id("alloc-2");
  failed.set_tenant("tenant-a");
  failed.set_state(v1::ALLOCATION_STATE_FAILED);
  failed.add_members("gpu3");
  ASSERT_TRUE(store_->CreateAllocation(failed, "operator:tester").ok());
  v1::GetDeviceRequest gpu3;
  gpu3.set_id("gpu3");
  ASSERT_TRUE(inventory_stub_->GetDevice(Context().get(), gpu3, &device).ok());
  EXPECT_THAT(device.allocations(), ::testing::IsEmpty());
}

// A drain and its reason are the operator's: re-applying the file leaves them be.
TEST_F(ServicesTest, ReapplyingAfterADrainWithAReasonChangesNothing) {
  ApplyGen1();
  store::DrainTargetRef host_target, onic_target;
  host_target.host = "server1";
  onic_target.onic = "gpu3-n0";
  ASSERT_TRUE(store_->SetDrained(host_target, true, "kernel upgrade", "operator:a").ok());
  ASSERT_TRUE(store_->SetDrained(onic_target, true, "firmware", "operator:a").ok());
  absl::StatusOr<v1::Inventory> gen1 = inventory::ReadInventoryFile(
      std::string(FLEET_SOURCE_DIR) + "/deploy/inventory/fleet-gen1.yaml");
  ASSERT_TRUE(gen1.ok()) << gen1.status();
  v1::ApplyInventoryRequest request;
  *request.mutable_inventory() = *gen1;
  v1::ApplyInventoryResponse response;
  ASSERT_TRUE(inventory_stub_->ApplyInventory(Context().get(), request, &response).ok());
  EXPECT_EQ(response.updated(), 0u);
  EXPECT_EQ(response.created(), 0u);
  v1::GetHostRequest host_request;
  host_request.set_name("server1");
  v1::Host host;
  ASSERT_TRUE(inventory_stub_->GetHost(Context().get(), host_request, &host).ok());
  EXPECT_EQ(host.admin_reason(), "kernel upgrade");
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
