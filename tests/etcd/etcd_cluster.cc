#include "tests/etcd/etcd_cluster.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/pki.h"

namespace fleet::testing {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

// Ports the kernel has just handed out, held together so that they differ.
absl::StatusOr<std::vector<int>> FreePorts(int count) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (fd >= 0) close(fd);
      for (int f : fds) close(f);
      return absl::InternalError("cannot pick a free port");
    }
    fds.push_back(fd);
    ports.push_back(ntohs(address.sin_port));
  }
  for (int f : fds) close(f);
  return ports;
}

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

absl::Status EtcdCluster::CanStart() {
  if (access(kEtcd, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcd, " not found: install Debian's etcd-server (deploy/quickstart)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members,
                                                                const std::string& dir) {
  if (absl::Status can = CanStart(); !can.ok()) return can;
  auto cluster = std::unique_ptr<EtcdCluster>(new EtcdCluster());
  cluster->dir_ = dir;
  if (absl::Status made = MakePki(dir, "site"); !made.ok()) return made;
  if (absl::Status made = MakePki(dir, "stranger"); !made.ok()) return made;
  absl::StatusOr<std::vector<int>> ports = FreePorts(2 * members);
  if (!ports.ok()) return ports.status();
  std::vector<std::string> peers;
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = absl::StrCat("m", i);
    m.client = absl::StrCat("127.0.0.1:", (*ports)[2 * i]);
    m.peer = absl::StrCat("127.0.0.1:", (*ports)[2 * i + 1]);
    peers.push_back(absl::StrCat(m.name, "=http://", m.peer));
    cluster->members_.push_back(std::move(m));
  }
  cluster->initial_cluster_ = absl::StrJoin(peers, ",");
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
  absl::StatusOr<std::unique_ptr<Daemon>> process = Daemon::Start({
      kEtcd,
      "--name",
      m.name,
      "--data-dir",
      absl::StrCat(dir_, "/", m.name),
      "--listen-client-urls",
      "https://" + m.client,
      "--advertise-client-urls",
      "https://" + m.client,
      // Peers speak plaintext on loopback; what fleetd relies on is the clients' side.
      "--listen-peer-urls",
      "http://" + m.peer,
      "--initial-advertise-peer-urls",
      "http://" + m.peer,
      "--initial-cluster",
      initial_cluster_,
      "--initial-cluster-state",
      state,
      "--initial-cluster-token",
      "fleet-test",
      "--cert-file",
      site + "-server.pem",
      "--key-file",
      site + "-server-key.pem",
      "--trusted-ca-file",
      site + "-ca.pem",
      "--client-cert-auth",
      // Elections in well under a second, so tests of a lost leader do not wait long.
      "--heartbeat-interval",
      "50",
      "--election-timeout",
      "500",
      "--logger",
      "zap",
      "--log-outputs",
      "stderr",
  });
  if (!process.ok()) return process.status();
  m.process = std::move(*process);
  return absl::OkStatus();
}

absl::Status EtcdCluster::AwaitServing(int member) {
  etcd::EtcdOptions options = ClientOptions();
  options.endpoints = {members_[member].client};
  options.request_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client = etcd::EtcdClient::Connect(options);
  if (!client.ok()) return client.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status last;
  while (absl::Now() < deadline) {
    std::vector<etcd::MemberStatus> status = (*client)->Members();
    last = status[0].reachable;
    if (last.ok() && status[0].leader_id != 0) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "etcd member ", members_[member].name, " not serving with a leader within 30 s: ",
      last.ToString(), "; its log:\n", members_[member].process->Stderr()));
}

etcd::EtcdOptions EtcdCluster::ClientOptions() const {
  etcd::EtcdOptions options;
  for (const Member& m : members_) options.endpoints.push_back(m.client);
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
  if (m.process == nullptr) return absl::FailedPreconditionError(m.name + " is not running");
  absl::StatusOr<int> stopped = m.process->Stop(SIGKILL);
  m.process.reset();
  return stopped.ok() ? absl::OkStatus() : stopped.status();
}

absl::Status EtcdCluster::Restart(int member) {
  if (members_[member].process != nullptr) {
    return absl::FailedPreconditionError(members_[member].name + " is running");
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
      EtcdCluster::Start(3, FreshDirectory("etcd"));
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
