// How FLEET runs the members of a local etcd cluster (the replicated demo, fleet-demo-site; the
// tests and benchmarks): Debian's etcd 3.4 (etcd-server) on loopback, clients held to mutual
// TLS (--client-cert-auth), peers in plaintext on loopback, elections in well under a second so
// that a lost member costs little. Production members are run by their own units (docs/ha.md).
#ifndef FLEET_CONTROLLER_ETCD_ETCD_MEMBER_H_
#define FLEET_CONTROLLER_ETCD_ETCD_MEMBER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/etcd/etcd_client.h"

namespace fleet::etcd {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

struct EtcdMember {
  std::string name;         // e.g. "m0"; unique in the cluster.
  std::string data_dir;     // Its membership and data; kept across restarts.
  std::string client;       // 127.0.0.1:PORT, served over TLS.
  std::string peer;         // 127.0.0.1:PORT, plaintext.
  int64_t quota_bytes = 0;  // --quota-backend-bytes; 0: etcd's default (2 GiB).
};

struct EtcdClusterFiles {
  std::string ca_file;    // Trusted for clients' certificates.
  std::string cert_file;  // The members' server certificate (127.0.0.1, localhost).
  std::string key_file;
};

// FAILED_PRECONDITION naming the package when kEtcdBinary is missing.
absl::Status EtcdInstalled();

// "NAME=http://PEER,..." for --initial-cluster.
std::string InitialCluster(const std::vector<EtcdMember>& members);

// The command line of `member` of the cluster `initial_cluster`; `state` is "new" for its first
// start and "existing" when it starts again on its data.
std::vector<std::string> EtcdMemberArgv(const EtcdMember& member,
                                        const std::string& initial_cluster,
                                        const std::string& state, const EtcdClusterFiles& files);

// Waits up to `timeout` until the member at `client` answers its status (over `options`' TLS)
// and knows a leader; DEADLINE_EXCEEDED with the last answer otherwise.
absl::Status AwaitEtcdMember(EtcdOptions options, const std::string& client,
                             absl::Duration timeout);

}  // namespace fleet::etcd

#endif  // FLEET_CONTROLLER_ETCD_ETCD_MEMBER_H_
