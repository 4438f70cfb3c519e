// fleetd's security over real processes and real TLS on loopback: `fleetd --demo` runs with
// mutual TLS on its throwaway PKI (STATE/pki), and this test issues more certificates from
// that CA (another tenant, an expired one, a second agent identity) and from a foreign CA.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/grpc_tls.h"
#include "common/pki.h"
#include "controller/auth/permissions.h"
#include "fleet/v1/admin.grpc.pb.h"
#include "fleet/v1/agent.grpc.pb.h"
#include "fleet/v1/inventory.grpc.pb.h"
#include "fleet/v1/topology.grpc.pb.h"
#include "tests/integration/subprocess.h"

namespace fleet {
namespace {

using testing::BinaryPath;
using testing::Daemon;
using testing::Eventually;
using ::testing::HasSubstr;
using ::testing::Not;

class SecurityTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    state_ = new std::string(testing::FreshDirectory("security"));
    absl::StatusOr<std::unique_ptr<Daemon>> started =
        Daemon::Start({BinaryPath("fleetd"), "--demo", "--state-dir", *state_, "--grpc-port", "0",
                       "--metrics-port", "0", "--agent-heartbeat-ms", "100",
                       "--tls-reload-interval-seconds", "1"});
    ASSERT_TRUE(started.ok()) << started.status();
    fleetd_ = started->release();
    absl::StatusOr<std::string> grpc = fleetd_->WaitForLine("grpc: ");
    ASSERT_TRUE(grpc.ok()) << grpc.status() << fleetd_->Stderr();
    grpc_ = new std::string(*grpc);
    absl::StatusOr<std::string> metrics = fleetd_->WaitForLine("metrics: ");
    ASSERT_TRUE(metrics.ok());
    metrics_ = new std::string(*metrics);
    ASSERT_TRUE(fleetd_->WaitForLine("state: ").ok()) << fleetd_->Stderr();

    // More identities from the demo's CA, and one CA nobody trusts.
    const std::string pki = *state_ + "/pki/";
    ca_ = new pki::KeyAndCertificate{pki::ReadPemFile(pki + "ca.pem", "ca").value(),
                                     pki::ReadPemFile(pki + "ca.key", "ca key").value()};
    const absl::Time now = absl::Now();
    Issue(*ca_, "job-team-b", {"spiffe://demo.fleet/job/team-b"});
    Issue(*ca_, "expired", {"spiffe://demo.fleet/operator/old"}, now - absl::Hours(48),
          now - absl::Hours(1));
    Issue(*ca_, "future", {"spiffe://demo.fleet/operator/soon"}, now + absl::Hours(1),
          now + absl::Hours(48));
    Issue(*ca_, "agent-x-server1", {"spiffe://demo.fleet/agent/x/server1"});
    Issue(*ca_, "two-uris", {"spiffe://demo.fleet/operator/a", "spiffe://demo.fleet/operator/b"});
    const pki::KeyAndCertificate foreign = pki::MakeCa({.common_name = "foreign CA"}).value();
    Issue(foreign, "foreign", {"spiffe://demo.fleet/operator/alice"});
    // The agents dial in with their certificates.
    ASSERT_TRUE(Eventually([] {
      v1::ListAgentsResponse agents;
      grpc::ClientContext context;
      if (!v1::InventoryService::NewStub(Channel("operator"))
               ->ListAgents(&context, {}, &agents)
               .ok()) {
        return false;
      }
      int connected = 0;
      for (const v1::Agent& a : agents.agents()) connected += a.connected();
      return connected == 7;
    })) << fleetd_->Stderr();
  }
  static void TearDownTestSuite() {
    delete fleetd_;  // Stops fleetd and the demo's processes.
    fleetd_ = nullptr;
  }

  // A certificate and key for `uris` at pki/NAME.{pem,key}.
  static void Issue(const pki::KeyAndCertificate& ca, const std::string& name,
                    std::vector<std::string> uris, absl::Time not_before = absl::Now(),
                    absl::Time not_after = absl::Now() + absl::Hours(24)) {
    pki::CertificateRequest r;
    r.uris = std::move(uris);
    r.not_before = not_before - absl::Minutes(1);
    r.not_after = not_after;
    pki::KeyAndCertificate pair = pki::Issue(ca, r).value();
    ASSERT_TRUE(pki::WritePemFile(Pki(name + ".pem"), pair.certificate_pem, 0644).ok());
    ASSERT_TRUE(pki::WritePemFile(Pki(name + ".key"), pair.private_key_pem, 0600).ok());
  }
  static std::string Pki(const std::string& file) { return *state_ + "/pki/" + file; }

  // A channel of its own (no connection shared with another identity) presenting
  // pki/WHO.pem; with an empty `who`, no client certificate at all.
  static std::shared_ptr<grpc::Channel> Channel(const std::string& who) {
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (who.empty()) {
      grpc::SslCredentialsOptions options;
      options.pem_root_certs = pki::ReadPemFile(Pki("ca.pem"), "ca").value();
      credentials = grpc::SslCredentials(options);
    } else {
      credentials =
          ClientCredentials({Pki("ca.pem"), Pki(who + ".pem"), Pki(who + ".key")}).value();
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(*grpc_, credentials, args);
  }

  // A request for a unidirectional ring over `gpus`.
  static v1::RequestTopologyRequest Ring(const std::string& name, std::vector<std::string> gpus) {
    v1::RequestTopologyRequest request;
    request.set_name(name);
    v1::TemplateSpec* ring = request.mutable_topology()->mutable_template_();
    ring->set_kind(v1::TEMPLATE_KIND_RING_UNIDIRECTIONAL);
    for (const std::string& gpu : gpus) ring->mutable_members()->add_devices(gpu);
    return request;
  }

  static grpc::Status Health(const std::string& who, v1::HealthResponse* health = nullptr) {
    v1::HealthResponse unused;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return v1::AdminService::NewStub(Channel(who))->Health(&context, {}, health ? health : &unused);
  }

  // One call of `method` by raw bytes: `request` sent, the first answer read, the status
  // returned. Streams that stay open end at the 2 s deadline.
  static grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& method, const std::string& request) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub.PrepareCall(&context, method, &cq);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    cq.Next(&tag, &ok);
    grpc::Slice slice(request);
    grpc::ByteBuffer out(&slice, 1);
    call->WriteLast(out, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
    grpc::ByteBuffer in;
    call->Read(&in, reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  // A counter from fleetd's /metrics, 0 when absent.
  static double Metric(const std::string& series) {
    absl::StatusOr<std::string> body = testing::HttpGet(*metrics_, "/metrics");
    if (!body.ok()) return -1;
    for (absl::string_view line : absl::StrSplit(*body, '\n')) {
      if (absl::StartsWith(line, series + " "))
        return std::stod(std::string(line.substr(series.size() + 1)));
    }
    return 0;
  }

  static std::string* state_;
  static std::string* grpc_;
  static std::string* metrics_;
  static pki::KeyAndCertificate* ca_;
  static Daemon* fleetd_;
};

std::string* SecurityTest::state_ = nullptr;
std::string* SecurityTest::grpc_ = nullptr;
std::string* SecurityTest::metrics_ = nullptr;
pki::KeyAndCertificate* SecurityTest::ca_ = nullptr;
Daemon* SecurityTest::fleetd_ = nullptr;

TEST_F(SecurityTest, NoForeignExpiredOrFutureCertificateGetsInAndEachIsCounted) {
  const struct {
    std::string who;
    std::string reason;
    std::string says;
  } cases[] = {
      {"", "missing", "no client certificate was presented"},
      {"foreign", "untrusted", "client certificate is untrusted"},
      {"expired", "expired", "client certificate expired at"},
      {"future", "not_yet_valid", "client certificate is not yet valid"},
      {"two-uris", "no_identity", "names no identity"},
  };
  for (const auto& c : cases) {
    const std::string series = absl::StrCat("fleet_auth_refused_total{reason=\"", c.reason, "\"}");
    const double before = Metric(series);
    grpc::Status status = Health(c.who);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << c.who;
    EXPECT_THAT(status.error_message(), HasSubstr(c.says)) << c.who;
    EXPECT_EQ(Metric(series), before + 1) << series;
  }
  // gRPC's health check is open to probes without a certificate.
  EXPECT_EQ(RawCall(Channel(""), "/grpc.health.v1.Health/Check", "").error_code(),
            grpc::StatusCode::OK);
  v1::HealthResponse health;
  ASSERT_TRUE(Health("operator", &health).ok());
  bool shown = false;
  for (const v1::ComponentHealth& c : health.components()) {
    if (c.name() != "security") continue;
    shown = true;
    EXPECT_EQ(c.state(), v1::ComponentHealth::STATE_OK);
    EXPECT_THAT(c.detail(), HasSubstr("mutual TLS"));
  }
  EXPECT_TRUE(shown);
}

TEST_F(SecurityTest, MetadataNamingAnotherCallerIsIgnored) {
  grpc::ClientContext context;
  context.AddMetadata("x-fleet-principal", "operator:mallory");
  v1::ApplyInventoryRequest apply;
  apply.set_dry_run(true);
  v1::ApplyInventoryResponse applied;
  grpc::Status status = v1::InventoryService::NewStub(Channel("job-team-a"))
                            ->ApplyInventory(&context, apply, &applied);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(),
            "role job (spiffe://demo.fleet/job/team-a) lacks permission inventory.write needed by "
            "/fleet.v1.InventoryService/ApplyInventory");
}

// The permission table, role by role, against the running fleetd: a role lacking a
// method's permission is refused naming both; a role holding it gets past the gatekeeper
// (whatever the service then says of an empty request).
TEST_F(SecurityTest, EveryRoleAgainstEveryRpc) {
  v1::ApplyInventoryRequest apply;
  apply.set_dry_run(true);
  v1::ReconcileRequest reconcile;
  reconcile.set_dry_run(true);
  const std::map<std::string, std::string> requests = {
      {"/fleet.v1.InventoryService/ApplyInventory", apply.SerializeAsString()},
      {"/fleet.v1.AdminService/Reconcile", reconcile.SerializeAsString()}};
  for (const auto& [who, role] : {std::pair<std::string, auth::Role>{"viewer", auth::Role::kViewer},
                                  {"job-team-a", auth::Role::kJob},
                                  {"operator", auth::Role::kOperator},
                                  {"agent-server2", auth::Role::kAgent}}) {
    std::shared_ptr<grpc::Channel> channel = Channel(who);
    for (const auth::MethodPermission& m : auth::MethodTable()) {
      auto request = requests.find(m.method);
      const grpc::Status status =
          RawCall(channel, m.method, request == requests.end() ? "" : request->second);
      if (auth::RoleHas(role, m.permission)) {
        EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << who << " " << m.method << ": " << status.error_message();
        EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << who << " " << m.method;
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << who << " " << m.method;
        EXPECT_THAT(status.error_message(),
                    HasSubstr(absl::StrCat("role ", auth::RoleName(role), " (")));
        EXPECT_THAT(status.error_message(),
                    HasSubstr(absl::StrCat("lacks permission ", auth::PermissionName(m.permission),
                                           " needed by ", m.method)));
      }
    }
  }
}

TEST_F(SecurityTest, ATenantSeesNothingOfAnothersAllocations) {
  auto team_a = v1::TopologyService::NewStub(Channel("job-team-a"));
  auto team_b = v1::TopologyService::NewStub(Channel("job-team-b"));
  const v1::RequestTopologyRequest request = Ring("secret-ring", {"gpu1", "gpu2"});
  v1::RequestTopologyResponse requested;
  {
    grpc::ClientContext context;
    grpc::Status status = team_a->RequestTopology(&context, request, &requested);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const std::string id = requested.allocation().id();
  EXPECT_EQ(requested.allocation().tenant(), "team-a");

  // Another tenant's allocation is answered word for word as one that does not exist.
  const std::string missing = "allocation a-none not found";
  auto get = [&](const std::string& which) {
    v1::GetAllocationRequest r;
    r.set_id(which);
    v1::Allocation a;
    grpc::ClientContext context;
    return team_b->GetAllocation(&context, r, &a);
  };
  EXPECT_EQ(get("a-none").error_message(), missing);
  grpc::Status other = get(id);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(other.error_message(), absl::StrCat("allocation ", id, " not found"));
  {
    v1::ReleaseTopologyRequest r;
    r.set_id(id);
    v1::ReleaseTopologyResponse released;
    grpc::ClientContext context;
    EXPECT_EQ(team_b->ReleaseTopology(&context, r, &released).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    v1::KeepAliveRequest r;
    r.set_id(id);
    v1::KeepAliveResponse kept;
    grpc::ClientContext context;
    EXPECT_EQ(team_b->KeepAlive(&context, r, &kept).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    v1::ActivatePhaseRequest r;
    r.set_id(id);
    r.set_phase("x");
    v1::ActivatePhaseResponse activated;
    grpc::ClientContext context;
    EXPECT_EQ(team_b->ActivatePhase(&context, r, &activated).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    v1::WatchAllocationRequest r;
    r.set_id(id);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto reader = team_b->WatchAllocation(&context, r);
    v1::WatchAllocationResponse change;
    EXPECT_FALSE(reader->Read(&change));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    v1::DetachDevicesRequest r;
    r.set_id(id);
    r.add_devices("gpu2");
    v1::DetachDevicesResponse detached;
    grpc::ClientContext context;
    grpc::Status status = team_b->DetachDevices(&context, r, &detached);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(status.error_message(), absl::StrCat("allocation ", id, " not found"));
  }
  {
    v1::ReplaceMemberRequest r;
    r.set_allocation_id(id);
    r.set_member("gpu2");
    r.set_dry_run(true);
    v1::ReplaceMemberResponse replaced;
    grpc::ClientContext context;
    grpc::Status status =
        v1::AdminService::NewStub(Channel("job-team-b"))->ReplaceMember(&context, r, &replaced);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(status.error_message(), absl::StrCat("allocation ", id, " not found"));
  }
  {
    v1::WatchAllocationRequest r;
    r.set_tenant("team-a");
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto reader = team_b->WatchAllocation(&context, r);
    v1::WatchAllocationResponse change;
    EXPECT_FALSE(reader->Read(&change));
    grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("may not watch tenant team-a"));
  }
  {
    v1::ListAllocationsRequest r;
    v1::ListAllocationsResponse listed;
    grpc::ClientContext context;
    ASSERT_TRUE(team_b->ListAllocations(&context, r, &listed).ok());
    for (const v1::Allocation& a : listed.allocations()) EXPECT_EQ(a.tenant(), "team-b");
    r.set_tenant("team-a");
    grpc::ClientContext again;
    grpc::Status status = team_b->ListAllocations(&again, r, &listed);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("may not list tenant team-a"));
  }
  // Events: team-b reads none of team-a's, and no event of another kind; team-a reads its
  // own, recorded under its certificate's identity.
  auto events = [&](const std::string& who, const std::string& kind, v1::ListEventsResponse* out) {
    v1::ListEventsRequest r;
    r.set_object_kind(kind);
    grpc::ClientContext context;
    return v1::AdminService::NewStub(Channel(who))->ListEvents(&context, r, out);
  };
  v1::ListEventsResponse seen;
  ASSERT_TRUE(events("job-team-b", "", &seen).ok());
  for (const v1::Event& e : seen.events()) EXPECT_NE(e.object_id(), id) << e.message();
  EXPECT_EQ(events("job-team-b", "switch", &seen).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    // Following the log from its start: what it replays holds nothing of team-a's.
    v1::WatchEventsRequest r;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    auto reader = v1::AdminService::NewStub(Channel("job-team-b"))->WatchEvents(&context, r);
    v1::Event e;
    while (reader->Read(&e)) EXPECT_NE(e.object_id(), id) << e.message();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  ASSERT_TRUE(Eventually([&] {
    v1::ListEventsResponse own;
    if (!events("job-team-a", "", &own).ok()) return false;
    for (const v1::Event& e : own.events()) {
      if (e.object_id() == id && e.principal() == "spiffe://demo.fleet/job/team-a") return true;
    }
    return false;
  }));
  // The owner releases it.
  v1::ReleaseTopologyRequest release;
  release.set_id(id);
  v1::ReleaseTopologyResponse released;
  grpc::ClientContext context;
  EXPECT_TRUE(team_a->ReleaseTopology(&context, release, &released).ok());
}

TEST_F(SecurityTest, AnAgentSpeaksOnlyForItsOwnHost) {
  auto connect = [](const std::string& who, const std::string& host) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto stream = v1::AgentService::NewStub(Channel(who))->Connect(&context);
    v1::AgentMessage hello;
    hello.mutable_register_()->set_host(host);
    stream->Write(hello);
    stream->WritesDone();
    v1::ControllerMessage reply;
    while (stream->Read(&reply)) {
    }
    return stream->Finish();
  };
  grpc::Status status = connect("agent-server2", "server1");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(),
            "agent identity spiffe://demo.fleet/agent/server2 may register as host server2 only, "
            "not server1");
  // Another identity of server1 may not take over the stream server1's agent holds.
  status = connect("agent-x-server1", "server1");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("host server1 is connected as spiffe://demo.fleet/agent/server1"));
  // An operator is not an agent.
  status = connect("operator", "server1");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("lacks permission agent.stream"));
}

// An agent may claim an O-NIC that inventory places on another host (the claim is recorded
// as a mismatch), but fleetd's commands for it still go to that host's own agent.
TEST_F(SecurityTest, AnAgentClaimingAnotherHostsOnicGetsNoneOfItsCommands) {
  v1::Onic onic;
  {
    v1::GetOnicRequest r;
    r.set_id("s1c0-n1");  // server1's.
    grpc::ClientContext context;
    ASSERT_TRUE(
        v1::InventoryService::NewStub(Channel("operator"))->GetOnic(&context, r, &onic).ok());
  }
  // server2's identity, as host server2 (which it may be), claiming server1's O-NIC; it never
  // answers a command, so one sent to it would not come back.
  grpc::ClientContext stream_context;
  auto stream = v1::AgentService::NewStub(Channel("agent-server2"))->Connect(&stream_context);
  v1::AgentMessage hello;
  hello.mutable_register_()->set_host("server2");
  hello.mutable_register_()->add_onics()->set_serial(onic.serial());
  ASSERT_TRUE(stream->Write(hello));
  v1::ControllerMessage registered;
  ASSERT_TRUE(stream->Read(&registered));
  ASSERT_TRUE(registered.has_registered());

  v1::GetLinkStatusRequest r;
  r.set_onic("s1c0-n1");
  v1::GetLinkStatusResponse status;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status answered =
      v1::AdminService::NewStub(Channel("operator"))->GetLinkStatus(&context, r, &status);
  EXPECT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_EQ(status.ports_size(), 2);
  stream_context.TryCancel();
}

// The grant a call acts with is the policy in force at that call, on a connection opened
// before the change too, and a connection's state does not grow with its calls.
TEST_F(SecurityTest, APolicyReloadReachesConnectionsAlreadyOpen) {
  Issue(*ca_, "job-ml", {"spiffe://demo.fleet/job/ml"});
  Issue(*ca_, "operator-bob", {"spiffe://demo.fleet/operator/bob"});
  const std::string demo_policy = pki::ReadPemFile(Pki("policy.yaml"), "policy").value();
  auto set_policy = [&](const std::string& extra) {
    ASSERT_TRUE(pki::WritePemFile(
                    Pki("policy.yaml"),
                    "grants:\n" + extra + demo_policy.substr(demo_policy.find("  - identity")),
                    0644)
                    .ok());
    ASSERT_EQ(::kill(fleetd_->pid(), SIGHUP), 0);
  };
  auto tenant_of = [](const std::unique_ptr<v1::TopologyService::Stub>& stub,
                      const std::string& tenant) {
    v1::RequestTopologyRequest request = Ring("", {"gpu1", "gpu2"});
    request.set_tenant(tenant);
    request.set_dry_run(true);
    v1::RequestTopologyResponse response;
    grpc::ClientContext context;
    return stub->RequestTopology(&context, request, &response);
  };
  set_policy("  - {identity: spiffe://demo.fleet/job/ml, role: job, tenants: [team-ml, team-b]}\n");
  auto ml = v1::TopologyService::NewStub(Channel("job-ml"));  // One connection throughout.
  ASSERT_TRUE(Eventually([&] { return tenant_of(ml, "team-b").ok(); }));
  for (int i = 0; i < 3000; ++i) {
    v1::ListAllocationsResponse listed;
    grpc::ClientContext context;
    ASSERT_TRUE(ml->ListAllocations(&context, {}, &listed).ok());
  }
  // A refusal names the tenants acted for, once each, however many calls came before.
  grpc::Status refused = tenant_of(ml, "team-x");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("[team-ml, team-b]"));

  set_policy("  - {identity: spiffe://demo.fleet/job/ml, role: job, tenants: [team-ml]}\n");
  EXPECT_TRUE(Eventually(
      [&] { return tenant_of(ml, "team-b").error_code() == grpc::StatusCode::PERMISSION_DENIED; }));
  EXPECT_TRUE(tenant_of(ml, "team-ml").ok());

  // An operator demoted to a job no longer sees or releases another tenant's allocation on
  // the connection it opened as an operator.
  auto team_a = v1::TopologyService::NewStub(Channel("job-team-a"));
  const v1::RequestTopologyRequest request = Ring("team-a-ring", {"gpu3", "gpu4"});
  v1::RequestTopologyResponse requested;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(team_a->RequestTopology(&context, request, &requested).ok());
  }
  const std::string id = requested.allocation().id();
  auto bob = v1::TopologyService::NewStub(Channel("operator-bob"));
  auto get = [&] {
    v1::GetAllocationRequest r;
    r.set_id(id);
    v1::Allocation a;
    grpc::ClientContext context;
    return bob->GetAllocation(&context, r, &a);
  };
  ASSERT_TRUE(get().ok());
  set_policy("  - {identity: spiffe://demo.fleet/operator/bob, role: job, tenants: [team-z]}\n");
  EXPECT_TRUE(Eventually([&] { return get().error_code() == grpc::StatusCode::NOT_FOUND; }));
  {
    v1::ReleaseTopologyRequest r;
    r.set_id(id);
    v1::ReleaseTopologyResponse released;
    grpc::ClientContext context;
    EXPECT_EQ(bob->ReleaseTopology(&context, r, &released).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    v1::ListAllocationsResponse listed;
    grpc::ClientContext context;
    ASSERT_TRUE(bob->ListAllocations(&context, {}, &listed).ok());
    EXPECT_EQ(listed.allocations_size(), 0);
  }
  // Its own tenant keeps it; the demo's policy back as it was.
  ASSERT_TRUE(pki::WritePemFile(Pki("policy.yaml"), demo_policy, 0644).ok());
  ASSERT_EQ(::kill(fleetd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(Eventually([&] { return get().ok(); }));
  v1::ReleaseTopologyRequest r;
  r.set_id(id);
  v1::ReleaseTopologyResponse released;
  grpc::ClientContext context;
  EXPECT_TRUE(team_a->ReleaseTopology(&context, r, &released).ok());
}

// Last: it changes the demo's files. fleetd's certificate is replaced and served to new
// connections without a restart; a policy change and a new CA bundle take effect on SIGHUP.
TEST_F(SecurityTest, CertificatesAndThePolicyRotateWithoutRestart) {
  auto served = [] {
    grpc::ClientContext context;
    v1::HealthResponse health;
    grpc::Status status =
        v1::AdminService::NewStub(Channel("operator"))->Health(&context, {}, &health);
    if (!status.ok()) return std::string();
    std::vector<grpc::string_ref> pem = context.auth_context()->FindPropertyValues("x509_pem_cert");
    return pem.empty() ? std::string() : std::string(pem.front().data(), pem.front().size());
  };
  const std::string before = served();
  ASSERT_FALSE(before.empty());
  pki::CertificateRequest r;
  r.common_name = "fleetd";
  r.dns_names = {"localhost"};
  r.ip_addresses = {"127.0.0.1", "::1"};
  r.server = true;
  pki::KeyAndCertificate next = pki::Issue(*ca_, r).value();
  ASSERT_TRUE(pki::WritePemFile(Pki("fleetd.key"), next.private_key_pem, 0600).ok());
  ASSERT_TRUE(pki::WritePemFile(Pki("fleetd.pem"), next.certificate_pem, 0644).ok());
  EXPECT_TRUE(Eventually([&] { return served() == next.certificate_pem; }, absl::Seconds(20)));

  const std::string policy = pki::ReadPemFile(Pki("policy.yaml"), "policy").value();
  ASSERT_TRUE(pki::WritePemFile(Pki("policy.yaml"),
                                "grants:\n  - {identity: spiffe://demo.fleet/operator/*, role: "
                                "operator}\n",
                                0644)
                  .ok());
  ASSERT_EQ(::kill(fleetd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(Eventually(
      [] { return Health("viewer").error_code() == grpc::StatusCode::PERMISSION_DENIED; }));
  EXPECT_TRUE(Health("operator").ok());
  ASSERT_TRUE(pki::WritePemFile(Pki("policy.yaml"), policy, 0644).ok());
  ASSERT_EQ(::kill(fleetd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(Eventually([] { return Health("viewer").ok(); }));

  // A move to a new CA: its certificates are refused until the bundle holds it too, taken
  // without a restart, and refused again once it is dropped.
  const pki::KeyAndCertificate next_ca = pki::MakeCa({.common_name = "next site CA"}).value();
  Issue(next_ca, "next-operator", {"spiffe://demo.fleet/operator/next"});
  EXPECT_EQ(Health("next-operator").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const std::string bundle = pki::ReadPemFile(Pki("ca.pem"), "ca").value();
  ASSERT_TRUE(pki::WritePemFile(Pki("ca.pem"), bundle + next_ca.certificate_pem, 0644).ok());
  ASSERT_EQ(::kill(fleetd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(Eventually([] { return Health("next-operator").ok(); }));
  EXPECT_TRUE(Health("operator").ok());
  ASSERT_TRUE(pki::WritePemFile(Pki("ca.pem"), bundle, 0644).ok());
  ASSERT_EQ(::kill(fleetd_->pid(), SIGHUP), 0);
  EXPECT_TRUE(Eventually(
      [] { return Health("next-operator").error_code() == grpc::StatusCode::UNAUTHENTICATED; }));
  EXPECT_TRUE(Health("operator").ok());
}

}  // namespace
}  // namespace fleet
