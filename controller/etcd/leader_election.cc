#include "controller/etcd/leader_election.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace fleet::etcd {

absl::Status LeaderElection::Check(const LeaderOptions& options) {
  if (options.key.empty()) return absl::InvalidArgumentError("leader key: empty");
  if (options.name.empty()) {
    return absl::InvalidArgumentError(
        "leader name: empty; give this replica's advertised HOST:PORT");
  }
  if (options.lease_ttl < absl::Seconds(1) || options.margin >= options.lease_ttl) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader lease: the margin (", absl::FormatDuration(options.margin),
                     ") must be below the lease's TTL (", absl::FormatDuration(options.lease_ttl),
                     "), which must be at least 1s"));
  }
  return absl::OkStatus();
}

LeaderElection::LeaderElection(EtcdClient* client, LeaderOptions options,
                               std::function<void(bool)> on_change)
    : client_(client), options_(std::move(options)), on_change_(std::move(on_change)) {}

LeaderElection::~LeaderElection() { Stop(); }

absl::Duration LeaderElection::RenewEvery() const {
  return std::min(options_.lease_ttl / 3, (options_.lease_ttl - options_.margin) / 2);
}

absl::Status LeaderElection::Start() {
  if (absl::Status checked = Check(options_); !checked.ok()) return checked;
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return absl::OkStatus();
  thread_ = std::thread([this] {
    NameThisThread("fleet-election");
    Run();
  });
  return absl::OkStatus();
}

void LeaderElection::Stop() {
  std::thread campaign;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.SignalAll();
    campaign = std::move(thread_);
  }
  if (campaign.joinable()) campaign.join();
}

absl::Status LeaderElection::Fence() const {
  absl::MutexLock lock(&mu_);
  if (!leading_) {
    return absl::UnavailableError(leader_.empty()
                                      ? std::string("not the leader: no leader is known")
                                      : absl::StrCat("not the leader: ", leader_, " leads"));
  }
  if (Steady::now() >= valid_until_) {
    return absl::UnavailableError(
        "not acting as leader: the lease was not renewed in time (etcd unreachable?) and may "
        "run out before an effect would end");
  }
  return absl::OkStatus();
}

LeaderElection::View LeaderElection::Current() const {
  absl::MutexLock lock(&mu_);
  return View{leading_, leader_, leading_ ? epoch_ : 0};
}

etcdserverpb::Compare LeaderElection::StillLeading() const {
  absl::MutexLock lock(&mu_);
  return CreateRevisionIs(options_.key, leading_ ? epoch_ : -1);
}

void LeaderElection::SetLeading(bool leading, int64_t epoch, Steady::time_point valid_until,
                                std::string leader) {
  bool changed;
  {
    absl::MutexLock lock(&mu_);
    changed = leading_ != leading;
    leading_ = leading;
    epoch_ = epoch;
    valid_until_ = valid_until;
    leader_ = std::move(leader);
  }
  if (changed) {
    FLEET_LOG(INFO) << (leading ? "leading: holds " : "no longer leading: lost ") << options_.key
                    << (leading ? absl::StrCat(" at epoch ", epoch) : "");
    if (on_change_) on_change_(leading);
  }
}

void LeaderElection::WarnOnce(const absl::Status& status) {
  const std::string said = status.ToString();
  if (said == warned_) return;
  FLEET_LOG(WARNING) << "leader campaign: " << said;
  warned_ = said;
}

bool LeaderElection::Campaign() {
  // A read first, which etcd answers without a write to its log: while another replica holds
  // the key, a round costs no more, so rounds can be frequent and a resignation is seen soon.
  if (absl::StatusOr<mvccpb::KeyValue> holder = client_->Get(options_.key); holder.ok()) {
    if (lease_ == 0 || holder->lease() != lease_) {
      // Another replica leads. A lease of an earlier round is not kept alive meanwhile: it
      // runs out on its own, and the round that finds the key free grants a new one.
      lease_ = 0;
      warned_.clear();
      SetLeading(false, 0, Steady::time_point(), holder->value());
      return false;
    }
    // The key is on this replica's lease: an earlier round's create was applied though its
    // answer was lost. The round goes on, and the Txn's answer recognises it as won.
  } else if (!absl::IsNotFound(holder.status())) {
    WarnOnce(holder.status());
    return false;
  }
  const Steady::time_point sent = Steady::now();
  // The lease first: renewed if held from an earlier round, else a new one.
  absl::Duration ttl = options_.lease_ttl;
  if (lease_ != 0) {
    absl::StatusOr<absl::Duration> left = client_->KeepAlive(lease_);
    if (left.ok()) {
      ttl = *left;
    } else if (absl::IsNotFound(left.status())) {
      lease_ = 0;  // Expired: its key, if any, is gone with it.
    } else {
      // Unreachable: the lease may still hold this replica's key; forgetting it would leave
      // the key to run out with nobody leading.
      WarnOnce(left.status());
      return false;
    }
  }
  if (lease_ == 0) {
    absl::StatusOr<Lease> lease = client_->GrantLease(options_.lease_ttl);
    if (!lease.ok()) {
      WarnOnce(lease.status());
      return false;
    }
    lease_ = lease->id;
    ttl = lease->ttl;
  }
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = CreateRevisionIs(options_.key, 0);  // Only if nobody holds it.
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(options_.name);
  put->set_lease(lease_);
  // On failure, who holds the key.
  txn.add_failure()->mutable_request_range()->set_key(options_.key);
  absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
  if (!response.ok()) {
    WarnOnce(response.status());
    return false;
  }
  warned_.clear();
  const Steady::time_point valid_until = sent + absl::ToChronoNanoseconds(ttl - options_.margin);
  if (response->succeeded()) {
    // The Txn's revision is the key's create_revision: the epoch.
    last_renewed_ = sent;
    SetLeading(true, response->header().revision(), valid_until, options_.name);
    return true;
  }
  std::string leader;
  if (!response->responses().empty() && !response->responses(0).response_range().kvs().empty()) {
    const mvccpb::KeyValue& holder = response->responses(0).response_range().kvs(0);
    if (holder.lease() == lease_) {
      // The key is on this replica's lease: an earlier campaign's write was applied though its
      // answer was lost. It leads, at that key's epoch.
      last_renewed_ = sent;
      SetLeading(true, holder.create_revision(), valid_until, options_.name);
      return true;
    }
    leader = holder.value();
  }
  SetLeading(false, 0, Steady::time_point(), std::move(leader));
  return false;
}

bool LeaderElection::Renew() {
  const Steady::time_point sent = Steady::now();
  const View now = Current();
  auto unreachable = [](const absl::Status& status) {
    return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
  };
  // The key first: renewing a lease that no longer holds our key would hold nothing.
  absl::StatusOr<mvccpb::KeyValue> key = client_->Get(options_.key);
  if (key.ok() && (key->create_revision() != now.epoch || key->lease() != lease_)) {
    FLEET_LOG(WARNING) << "leader key " << options_.key << " is no longer this replica's";
    return false;
  }
  if (!key.ok() && !unreachable(key.status())) {
    FLEET_LOG(WARNING) << "leader key: " << key.status();
    return false;
  }
  absl::StatusOr<absl::Duration> left =
      key.ok() ? client_->KeepAlive(lease_) : absl::StatusOr<absl::Duration>(key.status());
  if (left.ok()) {
    last_renewed_ = sent;
    SetLeading(true, now.epoch, sent + absl::ToChronoNanoseconds(*left - options_.margin),
               options_.name);
    return true;
  }
  if (absl::IsNotFound(left.status())) {
    lease_ = 0;
    return false;
  }
  if (!unreachable(left.status())) {
    FLEET_LOG(WARNING) << "leader lease: " << left.status();
    return false;
  }
  // etcd unreachable: keep trying while the lease may still stand (the fence closes by itself
  // before it can have run out); past a whole TTL it is gone for certain.
  FLEET_LOG(WARNING) << "leader lease: " << left.status();
  return Steady::now() - last_renewed_ < absl::ToChronoNanoseconds(options_.lease_ttl);
}

void LeaderElection::Resign() {
  if (lease_ == 0) return;
  // Revoking deletes the key at once: another replica need not wait out the TTL.
  if (absl::Status revoked = client_->RevokeLease(lease_);
      !revoked.ok() && !absl::IsNotFound(revoked)) {
    FLEET_LOG(WARNING) << "leader resign: " << revoked << "; the key goes when its lease runs out";
  }
  lease_ = 0;
}

void LeaderElection::Run() {
  while (true) {
    const bool leading = Current().leading;
    if (leading && !Renew()) {
      SetLeading(false, 0, Steady::time_point(), "");
      Resign();  // Whatever is left of the lease goes, so that no stale key outlives it.
    } else if (!leading) {
      Campaign();
    }
    const absl::Duration pause = Current().leading ? RenewEvery() : options_.retry;
    absl::MutexLock lock(&mu_);
    if (!stopping_) wake_.WaitWithTimeout(&mu_, pause);
    if (stopping_) break;
  }
  const bool was_leading = Current().leading;
  if (was_leading) SetLeading(false, 0, Steady::time_point(), "");
  Resign();
}

}  // namespace fleet::etcd
