#include "controller/replication/replica.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace fleet::replication {
namespace {

// How long a new leader waits before it reads the log again when etcd did not answer.
constexpr absl::Duration kCatchUpRetry = absl::Milliseconds(100);

std::string Bytes(int64_t n) {
  return n >= (1 << 20) ? absl::StrCat(n >> 20, " MiB") : absl::StrCat(n >> 10, " KiB");
}

}  // namespace

const char* RoleName(Replica::Role role) {
  switch (role) {
    case Replica::Role::kFollower:
      return "follower";
    case Replica::Role::kTakingOver:
      return "taking over";
    case Replica::Role::kLeader:
      return "leader";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Replica>> Replica::Create(ReplicaOptions options) {
  if (options.advertise.empty()) {
    return absl::InvalidArgumentError(
        "advertise is empty: a replica needs the address clients and agents dial it at");
  }
  if (options.prefix.empty()) return absl::InvalidArgumentError("etcd prefix is empty");
  etcd::LeaderOptions election;
  election.name = options.advertise;
  election.lease_ttl = options.lease_ttl;
  election.margin = options.margin;
  if (absl::Status s = etcd::LeaderElection::Check(election); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client =
      etcd::EtcdClient::Connect(options.etcd);
  if (!client.ok()) return client.status();
  return std::unique_ptr<Replica>(new Replica(std::move(options), std::move(*client)));
}

Replica::Replica(ReplicaOptions options, std::unique_ptr<etcd::EtcdClient> client)
    : options_(std::move(options)),
      client_(std::move(client)),
      log_(client_.get(), etcd::LogOptions{.prefix = options_.prefix + "log/"}),
      election_(client_.get(),
                etcd::LeaderOptions{.key = options_.prefix + "leader",
                                    .name = options_.advertise,
                                    .lease_ttl = options_.lease_ttl,
                                    .margin = options_.margin},
                [this](bool leading) { OnLeadingChanged(leading); }),
      commit_log_(&log_, &election_) {}

Replica::~Replica() { Stop(); }

CommitPoint::Fence Replica::Fence() {
  return [this](Effect) -> absl::Status {
    if (absl::Status leads = election_.Fence(); !leads.ok()) return leads;
    if (!serving_.load()) {
      return absl::UnavailableError(
          "taking over as leader: catching up with the replicated log; try again shortly");
    }
    return absl::OkStatus();
  };
}

bool Replica::CannotFollow(const absl::Status& status) {
  return absl::IsDataLoss(status) || absl::IsOutOfRange(status);
}

void Replica::Follow(store::StorageControl* store) {
  if (follower_) return;
  follower_ = std::make_unique<LogFollower>(&log_, store, options_.poll);
  // A replica serves reads from its store: what the log holds is applied before it does.
  absl::Status caught_up = follower_->CatchUp();
  if (!caught_up.ok()) {
    FLEET_LOG(WARNING) << "replica " << options_.advertise
                       << " starts behind the replicated log: " << caught_up;
  }
  if (CannotFollow(caught_up)) {
    FLEET_LOG(ERROR) << "replica " << options_.advertise
                     << " cannot follow the replicated log and will not lead; rebuild its "
                        "state directory";
    absl::MutexLock lock(&mu_);
    cannot_lead_ = true;
  }
  follower_->Start();
}

void Replica::Campaign(std::function<absl::Status()> on_leading, std::function<void()> on_deposed) {
  {
    absl::MutexLock lock(&mu_);
    if (campaigning_ || stopping_ || cannot_lead_ || !follower_) return;
    campaigning_ = true;
  }
  on_leading_ = std::move(on_leading);
  on_deposed_ = std::move(on_deposed);
  takeover_ = std::thread([this] { RunTakeover(); });
  if (absl::Status started = election_.Start(); !started.ok()) {
    // Create() checked these options: not reached.
    FLEET_LOG(ERROR) << "leader election not started: " << started;
  }
}

void Replica::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    serving_ = false;
    role_ = Role::kFollower;
    changed_.SignalAll();
  }
  election_.Stop();  // Resigns: the key goes at once.
  if (takeover_.joinable()) takeover_.join();
  if (follower_) follower_->Stop();
}

void Replica::OnLeadingChanged(bool leading) {
  absl::MutexLock lock(&mu_);
  leading_ = leading;
  ++leader_changes_;
  // Closed at once: whatever the takeover thread is doing, nothing more goes out.
  serving_ = false;
  if (!leading) role_ = Role::kFollower;
  changed_.SignalAll();
}

bool Replica::CatchUpAsLeader(int64_t generation) {
  std::string warned;  // Said once while it stays the same, not every retry.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || leader_changes_ != generation) return false;
    }
    absl::Status caught_up = follower_->CatchUp();
    if (caught_up.ok()) {
      absl::MutexLock lock(&mu_);
      // The log could only have grown under another leader, which a change would show.
      if (stopping_ || leader_changes_ != generation || !leading_) return false;
      serving_ = true;
      role_ = Role::kLeader;
      return true;
    }
    if (caught_up.ToString() != warned) {
      FLEET_LOG(WARNING) << "taking over: catching up with the replicated log: " << caught_up;
      warned = caught_up.ToString();
    }
    if (CannotFollow(caught_up)) {
      // Applying on would diverge from the log: this replica must not lead. It resigns, so
      // that another replica leads, and campaigns no more.
      FLEET_LOG(ERROR) << "replica " << options_.advertise
                       << " cannot lead, its store cannot follow the log; it resigns (rebuild "
                          "its state directory)";
      {
        absl::MutexLock lock(&mu_);
        cannot_lead_ = true;
      }
      election_.Stop();
      return false;
    }
    absl::MutexLock lock(&mu_);
    changed_.WaitWithTimeout(&mu_, kCatchUpRetry);
  }
}

void Replica::RunTakeover() {
  NameThisThread("fleet-takeover");
  int64_t seen = 0;
  bool won = false;  // Once won, any change of leadership deposes this replica.
  while (true) {
    bool leading = false;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && leader_changes_ == seen) changed_.Wait(&mu_);
      if (stopping_) return;
      seen = leader_changes_;
      leading = leading_;
      if (won || !leading) role_ = Role::kFollower;
      if (won && cannot_lead_) return;  // It resigned: it follows on, serving what it has.
      if (!won && leading) role_ = Role::kTakingOver;
    }
    if (won) {
      FLEET_LOG(ERROR) << "replica " << options_.advertise << " is no longer the leader";
      if (on_deposed_) on_deposed_();
      return;
    }
    if (!leading) continue;  // Won and lost before this thread looked: nothing was done.
    won = true;
    FLEET_LOG(INFO) << "replica " << options_.advertise
                    << " won the leader election; catching up with the replicated log";
    if (!CatchUpAsLeader(seen)) continue;  // The change, or the stop, is seen next round.
    FLEET_LOG(INFO) << "replica " << options_.advertise << " leads from log entry "
                    << follower_->Current().position;
    if (on_leading_) {
      if (absl::Status s = on_leading_(); !s.ok()) {
        FLEET_LOG(ERROR) << "taking over as leader: " << s;
      }
    }
  }
}

Replica::Status Replica::Current() const {
  Status status;
  const etcd::LeaderElection::View view = election_.Current();
  status.leader = view.leading ? options_.advertise : view.leader;
  status.self = options_.advertise;
  if (follower_) status.log = follower_->Current();
  absl::MutexLock lock(&mu_);
  status.role = role_;
  status.leader_changes = leader_changes_;
  return status;
}

std::vector<v1::ComponentHealth> Replica::Health() {
  std::vector<v1::ComponentHealth> out;
  const Status status = Current();
  v1::ComponentHealth& replica = out.emplace_back();
  replica.set_name("replica");
  const uint64_t lag = status.log.head - status.log.position;
  std::string detail =
      absl::StrCat(RoleName(status.role), " ", status.self, "; leader ",
                   status.leader.empty() ? "unknown" : status.leader, "; log entry ",
                   status.log.position, " of ", status.log.head, " (lag ", lag, ")");
  v1::ComponentHealth::State state = v1::ComponentHealth::STATE_OK;
  if (!status.log.stopped.ok()) {
    state = v1::ComponentHealth::STATE_DOWN;
    absl::StrAppend(&detail, "; not following the log: ", status.log.stopped.message());
  } else if (status.leader.empty() || status.role == Role::kTakingOver) {
    state = v1::ComponentHealth::STATE_DEGRADED;
  }
  replica.set_state(state);
  replica.set_detail(detail);
  for (const etcd::MemberStatus& member : client_->Members()) {
    v1::ComponentHealth& c = out.emplace_back();
    c.set_name(absl::StrCat("etcd/", member.endpoint));
    if (!member.reachable.ok()) {
      c.set_state(v1::ComponentHealth::STATE_DOWN);
      c.set_detail(std::string(member.reachable.message()));
      continue;
    }
    std::string about = absl::StrCat("etcd ", member.version, ", ",
                                     member.leader_id == member.member_id ? "raft leader"
                                     : member.leader_id == 0              ? "no raft leader"
                                                                          : "raft follower",
                                     ", term ", member.raft_term, ", index ", member.raft_index,
                                     ", database ", Bytes(member.db_size_bytes));
    for (const std::string& error : member.errors) absl::StrAppend(&about, "; ", error);
    c.set_state(member.leader_id != 0 && member.errors.empty()
                    ? v1::ComponentHealth::STATE_OK
                    : v1::ComponentHealth::STATE_DEGRADED);
    c.set_detail(about);
  }
  return out;
}

}  // namespace fleet::replication
