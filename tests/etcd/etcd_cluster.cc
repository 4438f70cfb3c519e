#include "tests/etcd/etcd_cluster.h"

#include <csignal>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/free_ports.h"
#include "common/pki.h"

namespace fleet::testing {
namespace {

absl::Status WriteTo(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

// A CA named `name` and, signed by it, a server certificate for 127.0.0.1 and a client
// certificate, as PEM files DIR/NAME-ca.pem, -server.pem, -server-key.pem, -client.pem and
// -client-key.pem.
absl::Status MakePki(const std::string& dir, const std::string& name) {
  const std::string prefix = dir + "/" + name;
  absl::StatusOr<pki::KeyAndCertificate> ca = pki::MakeCa({"etcd test CA " + name});
  if (!ca.ok()) return ca.status();
  pki::CertificateRequest server;
  server.common_name = "etcd";
  server.ip_addresses = {"127.0.0.1"};
  server.dns_names = {"localhost"};
  server.server = true;
  absl::StatusOr<pki::KeyAndCertificate> server_pair = pki::Issue(*ca, server);
  if (!server_pair.ok()) return server_pair.status();
  pki::CertificateRequest client;
  client.common_name = "fleetd";
  client.uris = {"spiffe://test.fleet/fleetd/fleetd-1"};
  absl::StatusOr<pki::KeyAndCertificate> client_pair = pki::Issue(*ca, client);
  if (!client_pair.ok()) return client_pair.status();
  for (const auto& [suffix, text] : std::vector<std::pair<std::string, std::string>>{
           {"-ca.pem", ca->certificate_pem},
           {"-server.pem", server_pair->certificate_pem},
           {"-server-key.pem", server_pair->private_key_pem},
           {"-client.pem", client_pair->certificate_pem},
           {"-client-key.pem", client_pair->private_key_pem}}) {
    if (absl::Status written = WriteTo(prefix + suffix, text); !written.ok()) return written;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EtcdCluster::CanStart() { return etcd::EtcdInstalled(); }

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members, const std::string& dir,
                                                                int64_t quota_bytes) {
  if (absl::Status can = CanStart(); !can.ok()) return can;
  auto cluster = std::unique_ptr<EtcdCluster>(new EtcdCluster());
  cluster->dir_ = dir;
  if (absl::Status made = MakePki(dir, "site"); !made.ok()) return made;
  if (absl::Status made = MakePki(dir, "stranger"); !made.ok()) return made;
  absl::StatusOr<std::vector<int>> ports = FreeLoopbackPorts(2 * members);
  if (!ports.ok()) return ports.status();
  for (int i = 0; i < members; ++i) {
    etcd::EtcdMember m;
    m.name = absl::StrCat("m", i);
    m.client = absl::StrCat("127.0.0.1:", (*ports)[2 * i]);
    m.peer = absl::StrCat("127.0.0.1:", (*ports)[2 * i + 1]);
    m.data_dir = absl::StrCat(dir, "/", m.name);
    m.quota_bytes = quota_bytes;
    cluster->members_.push_back({std::move(m), nullptr});
  }
  std::vector<etcd::EtcdMember> all;
  for (const Member& m : cluster->members_) all.push_back(m.spec);
  cluster->initial_cluster_ = etcd::InitialCluster(all);
  for (int i = 0; i < members; ++i) {
    if (absl::Status launched = cluster->Launch(i, "new"); !launched.ok()) return launched;
  }
  for (int i = 0; i < members; ++i) {
    if (absl::Status serving = cluster->AwaitServing(i); !serving.ok()) return serving;
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() = default;  // Each Daemon kills its member.

absl::Status EtcdCluster::Launch(int member, const std::string& state) {
  Member& m = members_[member];
  const std::string site = dir_ + "/site";
  absl::StatusOr<std::unique_ptr<Daemon>> process =
      Daemon::Start(etcd::EtcdMemberArgv(m.spec, initial_cluster_, state,
                                         {.ca_file = site + "-ca.pem",
                                          .cert_file = site + "-server.pem",
                                          .key_file = site + "-server-key.pem"}));
  if (!process.ok()) return process.status();
  m.process = std::move(*process);
  return absl::OkStatus();
}

absl::Status EtcdCluster::AwaitServing(int member) {
  absl::Status serving =
      etcd::AwaitEtcdMember(ClientOptions(), members_[member].spec.client, absl::Seconds(30));
  if (serving.ok()) return serving;
  return absl::Status(serving.code(), absl::StrCat(serving.message(), "; its log:\n",
                                                   members_[member].process->Stderr()));
}

etcd::EtcdOptions EtcdCluster::ClientOptions() const {
  etcd::EtcdOptions options;
  for (const Member& m : members_) options.endpoints.push_back(m.spec.client);
  options.ca_file = dir_ + "/site-ca.pem";
  options.cert_file = dir_ + "/site-client.pem";
  options.key_file = dir_ + "/site-client-key.pem";
  return options;
}

etcd::EtcdOptions EtcdCluster::StrangerOptions() const {
  etcd::EtcdOptions options = ClientOptions();
  // Trusts the members (so the refusal is theirs), presents another CA's certificate.
  options.cert_file = dir_ + "/stranger-client.pem";
  options.key_file = dir_ + "/stranger-client-key.pem";
  return options;
}

absl::Status EtcdCluster::Kill(int member) {
  Member& m = members_[member];
  if (m.process == nullptr) return absl::FailedPreconditionError(m.spec.name + " is not running");
  absl::StatusOr<int> stopped = m.process->Stop(SIGKILL);
  m.process.reset();
  return stopped.ok() ? absl::OkStatus() : stopped.status();
}

absl::Status EtcdCluster::Restart(int member) {
  if (members_[member].process != nullptr) {
    return absl::FailedPreconditionError(members_[member].spec.name + " is running");
  }
  // Its data directory holds its membership: "existing" is what an operator would pass.
  if (absl::Status launched = Launch(member, "existing"); !launched.ok()) return launched;
  return AwaitServing(member);
}

void EtcdClusterTest::SetUp() {
  if (absl::Status can = EtcdCluster::CanStart(); !can.ok()) {
    if (getenv("CI") != nullptr) GTEST_FAIL() << can.message();
    GTEST_SKIP() << can.message();
  }
  absl::StatusOr<std::unique_ptr<EtcdCluster>> cluster =
      EtcdCluster::Start(3, FreshDirectory("etcd"), quota_bytes_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = std::move(*cluster);
}

std::unique_ptr<etcd::EtcdClient> EtcdClusterTest::Client(std::vector<int> members,
                                                          absl::Duration timeout) {
  etcd::EtcdOptions options = cluster_->ClientOptions();
  options.request_timeout = timeout;
  if (!members.empty()) {
    options.endpoints.clear();
    for (int m : members) options.endpoints.push_back(cluster_->endpoint(m));
  }
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client = etcd::EtcdClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

}  // namespace fleet::testing
