#include "controller/etcd/etcd_member.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace fleet::etcd {

absl::Status EtcdInstalled() {
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcdBinary, " not found: install Debian's etcd-server (deploy/quickstart)"));
  }
  return absl::OkStatus();
}

std::string InitialCluster(const std::vector<EtcdMember>& members) {
  std::vector<std::string> peers;
  for (const EtcdMember& m : members) peers.push_back(absl::StrCat(m.name, "=http://", m.peer));
  return absl::StrJoin(peers, ",");
}

std::vector<std::string> EtcdMemberArgv(const EtcdMember& member,
                                        const std::string& initial_cluster,
                                        const std::string& state, const EtcdClusterFiles& files) {
  std::vector<std::string> argv = {
      kEtcdBinary, "--name", member.name, "--data-dir", member.data_dir, "--listen-client-urls",
      "https://" + member.client, "--advertise-client-urls", "https://" + member.client,
      // Peers speak plaintext on loopback; what fleetd relies on is the clients' side.
      "--listen-peer-urls", "http://" + member.peer, "--initial-advertise-peer-urls",
      "http://" + member.peer, "--initial-cluster", initial_cluster, "--initial-cluster-state",
      state, "--initial-cluster-token", "fleet-local", "--cert-file", files.cert_file, "--key-file",
      files.key_file, "--trusted-ca-file", files.ca_file, "--client-cert-auth",
      // Elections in well under a second: a lost member costs the cluster little.
      "--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap", "--log-outputs",
      "stderr"};
  if (member.quota_bytes > 0) {
    argv.insert(argv.end(), {"--quota-backend-bytes", absl::StrCat(member.quota_bytes)});
  }
  return argv;
}

absl::Status AwaitEtcdMember(EtcdOptions options, const std::string& client,
                             absl::Duration timeout) {
  options.endpoints = {client};
  options.request_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<EtcdClient>> connected = EtcdClient::Connect(options);
  if (!connected.ok()) return connected.status();
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last;
  while (absl::Now() < deadline) {
    std::vector<MemberStatus> status = (*connected)->Members();
    last = status[0].reachable;
    if (last.ok() && status[0].leader_id != 0) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("etcd member ", client, " not serving with a leader within ",
                   absl::FormatDuration(timeout), ": ", last.ToString()));
}

}  // namespace fleet::etcd
