// A real etcd cluster for tests: N members of Debian's etcd 3.4 (etcd-server), each on client
// and peer ports chosen at run time, clients held to mutual TLS (--client-cert-auth) with a
// throwaway CA made here. Members can be stopped and started again to take the quorum away
// and give it back. Every member is killed when the cluster object goes.
#ifndef FLEET_TESTS_ETCD_ETCD_CLUSTER_H_
#define FLEET_TESTS_ETCD_ETCD_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "controller/etcd/etcd_client.h"
#include "controller/etcd/etcd_member.h"
#include "tests/integration/subprocess.h"

namespace fleet::testing {

class EtcdCluster {
 public:
  // FAILED_PRECONDITION naming the package when /usr/bin/etcd is missing.
  static absl::Status CanStart();
  // Starts `members` members in `dir` and waits until they have a leader. `quota_bytes`: each
  // member's space quota (0: etcd's default).
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(int members, const std::string& dir,
                                                            int64_t quota_bytes = 0);
  ~EtcdCluster();

  // Options for a client of every member with a certificate the members trust.
  etcd::EtcdOptions ClientOptions() const;
  // The same, with a certificate of another CA (which the members must refuse).
  etcd::EtcdOptions StrangerOptions() const;
  std::string endpoint(int member) const { return members_[member].spec.client; }

  // Kills member `i` (SIGKILL: no goodbye to its peers).
  absl::Status Kill(int member);
  // Starts member `i` again on its ports and data, as a member of the existing cluster.
  absl::Status Restart(int member);

 private:
  struct Member {
    etcd::EtcdMember spec;
    std::unique_ptr<Daemon> process;
  };
  EtcdCluster() = default;
  absl::Status Launch(int member, const std::string& state);
  // Waits until member `i` answers its status over TLS.
  absl::Status AwaitServing(int member);

  std::string dir_;
  std::string initial_cluster_;
  std::vector<Member> members_;
  std::string ca_, server_cert_, server_key_, client_cert_, client_key_;
  std::string stranger_ca_, stranger_cert_, stranger_key_;
};

// The etcd tests' fixture: a fresh three-member cluster for each test. Where etcd is not
// installed the test is skipped, except in CI (CI set), which installs it: there it fails.
class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // A client of the members listed (all when empty), with `timeout` for each call.
  std::unique_ptr<etcd::EtcdClient> Client(std::vector<int> members = {},
                                           absl::Duration timeout = absl::Seconds(5));

  // Each member's space quota (0: etcd's default); a fixture sets it in its constructor.
  int64_t quota_bytes_ = 0;
  std::unique_ptr<EtcdCluster> cluster_;
};

}  // namespace fleet::testing

#endif  // FLEET_TESTS_ETCD_ETCD_CLUSTER_H_
