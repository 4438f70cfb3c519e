// fleetd's client of an etcd v3 cluster (etcd 3.4 from Debian), over etcd's own gRPC API
// (proto/etcd: a checked-in subset of etcd's .proto files with etcd's package, names and field
// numbers). It is what replicated fleetd replicas build on (docs/ha.md): the leader's key held
// on a lease, and writes fenced by a compare on that key's create_revision.
//
// Contract:
// - Every call has a deadline (EtcdOptions::request_timeout) and answers an absl::Status whose
//   message names etcd, the call, the key where there is one, and the member that answered or
//   failed ("etcd 127.0.0.1:2379: Put fleet/leader: ..."). A cluster that has lost its quorum
//   answers no write and no linearizable read: those calls fail UNAVAILABLE within the
//   deadline, saying that no member answered with a quorum behind it.
// - Members are tried in order, starting from the last that answered, each given a fair share
//   of the time left. A member this client cannot connect to (down, refusing the handshake) is
//   stepped over with nothing sent to it. A read (Get, GetPrefix, KeepAlive, Members, a Txn
//   that only reads) that a connected member fails for itself (IsMemberFailure: no leader, no
//   quorum, a request not confirmed in time) goes to the next member too. A write (Put, Delete,
//   Txn, Compact, GrantLease, RevokeLease) is sent to one member at most: if it fails after being
//   sent, it may or may not have been applied, and the error says so (UNAVAILABLE "outcome
//   unknown"); the next call starts from the next member. A write is therefore never applied twice
//   by this client; its caller decides whether to read back or write again.
// - Any other error of etcd (a compacted revision, a lease not found, the NOSPACE alarm, too
//   large a request) is returned as etcd's gRPC code and message, not retried.
// - Thread-safe: calls may be made from any thread at once.
#ifndef FLEET_CONTROLLER_ETCD_ETCD_CLIENT_H_
#define FLEET_CONTROLLER_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/channel.h"

namespace fleet::etcd {

struct EtcdOptions {
  // The members' client addresses, HOST:PORT (a leading https:// or http:// is accepted and
  // dropped). At least one.
  std::vector<std::string> endpoints;
  // Mutual TLS (etcd's --client-cert-auth): the CA that signed the members' certificates, and
  // this client's certificate and key, PEM files. All three, or none for plaintext (tests).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // How long one call may take in all, across the members it tries.
  absl::Duration request_timeout = absl::Seconds(5);
  // Told of every call when it ends: whether it was a write, how long it took in all, and its
  // status (for metrics). Called on the caller's thread; must be cheap. Empty: nobody.
  std::function<void(bool write, absl::Duration took, const absl::Status& status)> observe;
};

// A lease granted by etcd: keys put with it are deleted when it expires.
struct Lease {
  int64_t id = 0;
  absl::Duration ttl;  // As etcd granted it (at least its minimum, about 2 s in 3.4).
};

// What one member says of itself and the cluster (etcd's Maintenance.Status).
struct MemberStatus {
  std::string endpoint;
  absl::Status reachable;  // OK, or why the member did not answer.
  uint64_t member_id = 0;
  uint64_t leader_id = 0;  // 0 when the member knows no leader.
  uint64_t raft_term = 0;
  uint64_t raft_index = 0;
  int64_t db_size_bytes = 0;         // The database file, free pages included.
  int64_t db_size_in_use_bytes = 0;  // Of it, what holds data (the rest is reused first).
  std::string version;
  std::vector<std::string> errors;  // etcd's own, e.g. an active NOSPACE alarm.
};

// A Txn compare that holds while `key` has the create_revision `revision` (0: while the key
// does not exist). Deleted and created again, a key has a new create_revision, so this is the
// compare that fences a leader's writes on its own leader key.
etcdserverpb::Compare CreateRevisionIs(const std::string& key, int64_t revision);

// The range end that covers every key starting with `prefix` (etcd's "\0" for all keys when
// the prefix is empty or all 0xff bytes).
std::string PrefixEnd(std::string prefix);

// Whether a member's answer says nothing about the request, only about the member asked, so
// that the next member may answer: UNAVAILABLE and DEADLINE_EXCEEDED (etcd answers "no leader"
// and a lost quorum's timeouts as these), and etcd's UNKNOWN "context deadline exceeded" for a
// request it could not confirm in time while it elects a leader. A write that failed so has
// an unknown outcome.
bool IsMemberFailure(const absl::Status& status);

class EtcdClient {
 public:
  // Reads the TLS files and makes one channel per member (connections are made on first use).
  // INVALID_ARGUMENT naming the option for no endpoint, an empty endpoint, or only some of the
  // three TLS files; the file's error for one that cannot be read.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdOptions& options);

  // The value and revisions of `key`; NOT_FOUND naming the key when it does not exist.
  // Linearizable: answered only by a member with a quorum behind it.
  absl::StatusOr<mvccpb::KeyValue> Get(const std::string& key);
  // Every key that starts with `prefix`, in key order, at most `limit` (0: all).
  absl::StatusOr<std::vector<mvccpb::KeyValue>> GetPrefix(const std::string& prefix,
                                                          int64_t limit = 0);
  // Puts `value` at `key` (on `lease` when not 0); returns the cluster's revision after it.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Deletes `key`; returns how many keys were deleted (0 or 1).
  absl::StatusOr<int64_t> Delete(const std::string& key);
  // One atomic Txn: `response.succeeded` says whether every compare held. A Txn whose
  // operations are all ranges is a read (it may be tried on the next member); else a write.
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  // Compacts etcd's history (every key's revisions before `revision`), so its space can be
  // reused. OK when it was compacted that far already. With `physical`, returns only once the
  // member that answered has deleted those revisions (else it does so in the background; the
  // others do so in the background either way).
  absl::Status Compact(int64_t revision, bool physical = false);

  // A lease of `ttl` (whole seconds, rounded up).
  absl::StatusOr<Lease> GrantLease(absl::Duration ttl);
  // Renews `lease` once; returns the time it now has. NOT_FOUND naming the lease when it had
  // already expired (or was revoked): its keys are gone.
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease);
  // Revokes `lease` (its keys are deleted at once). NOT_FOUND when it was gone already.
  absl::Status RevokeLease(int64_t lease);

  // Each member's own status, asked of it directly (no failover), in endpoint order; each
  // is given an equal share of the request timeout, so the whole takes at most that.
  std::vector<MemberStatus> Members();
  // Defragments the member at `endpoint` (one of the options' endpoints, as MemberStatus names
  // it), asked of it directly: it rewrites its database file without the free pages, and
  // answers nothing else meanwhile (etcd's Maintenance.Defragment), so one member at a time,
  // and never etcd's leader, which would stall every write and lease renewal. This client's
  // next calls go to another member first. `timeout` rather than the request timeout: a large
  // file takes a while (etcd goes on with it after a timeout). NOT_FOUND for an endpoint not
  // in the options.
  absl::Status Defragment(const std::string& endpoint, absl::Duration timeout);
  // Asks etcd's leader, at `leader_endpoint`, to hand its leadership to member `target_id`
  // (etcd's Maintenance.MoveLeader); returns once it has.
  absl::Status MoveLeader(const std::string& leader_endpoint, uint64_t target_id);
  // The members (by id) whose NOSPACE alarm is active: while any is, etcd takes no write but
  // deletes and compactions.
  absl::StatusOr<std::vector<uint64_t>> NoSpaceAlarms();
  // Clears the NOSPACE alarm of member `member_id`. etcd raises it again at the next write if
  // the member's database is still past its quota.
  absl::Status DisarmNoSpace(uint64_t member_id);

 private:
  struct Member {
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  };
  explicit EtcdClient(EtcdOptions options) : options_(std::move(options)) {}

  // The member `endpoint` names; null when none does.
  Member* MemberAt(const std::string& endpoint);
  // Runs `call` on the members in turn from the last that answered, as the contract says for
  // a read, or for a write when `write`. `what` names the call and key in messages.
  enum class Kind { kRead, kWrite };
  template <typename Call>
  absl::Status OnSomeMember(Kind kind, const std::string& what, Call call);
  // OnSomeMember's work, without telling options_.observe.
  template <typename Call>
  absl::Status TryMembers(Kind kind, const std::string& what, Call call);

  const EtcdOptions options_;
  std::vector<Member> members_;
  absl::Mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;  // The member that answered last.
};

}  // namespace fleet::etcd

#endif  // FLEET_CONTROLLER_ETCD_ETCD_CLIENT_H_
