#include "controller/replication/replica.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "controller/store/changesets.h"

namespace fleet::replication {
namespace {

// How long a new leader waits before it reads the log again when etcd did not answer.
constexpr absl::Duration kCatchUpRetry = absl::Milliseconds(100);

// Every SQLite database file starts with it.
constexpr absl::string_view kSqliteHeader("SQLite format 3\0", 16);

// The whole of a binary file; an error when it cannot be read whole.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return absl::InternalError(absl::StrCat("cannot read ", path, ": ", error.message()));
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<uintmax_t>(in.gcount()) != size) {
    return absl::InternalError(absl::StrCat("cannot read ", path, " whole"));
  }
  return bytes;
}

// Writes `bytes` to `path` and makes it durable (a power loss must not leave a partial file
// under the name it is renamed to next).
absl::Status WriteDurably(const std::string& path, absl::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", path));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == bytes.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot write ", path, " whole"));
  return absl::OkStatus();
}

// Makes a rename in the directory of `path` durable.
void SyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

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
      commit_log_(&log_, &election_),
      space_keeper_(client_.get(), options_.space) {}

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

absl::Status Replica::CatchUpBeforeMigrating(store::LogReplica& older) {
  absl::Status caught_up = LogFollower(&log_, &older).CatchUp();
  if (caught_up.ok() || store::IsOfAnotherSchema(caught_up) || absl::IsOutOfRange(caught_up)) {
    if (!caught_up.ok()) FLEET_LOG(INFO) << "before migrating the store: " << caught_up;
    return absl::OkStatus();
  }
  if (absl::IsDataLoss(caught_up)) {
    FLEET_LOG(ERROR) << "before migrating the store: " << caught_up
                     << "; this replica cannot follow the replicated log: rebuild its state "
                        "directory (docs/ha.md)";
    return absl::OkStatus();
  }
  return absl::Status(caught_up.code(),
                      absl::StrCat("cannot read the replicated log's entries of this store's "
                                   "schema before migrating it: ",
                                   caught_up.message()));
}

void Replica::Follow(store::StorageControl* store) {
  if (follower_) return;
  store_ = store;
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

void Replica::Campaign(std::function<absl::Status()> on_leading,
                       std::function<void(const std::string&)> on_restart) {
  bool cannot_lead = false;
  {
    absl::MutexLock lock(&mu_);
    if (campaigning_ || stopping_ || !follower_) return;
    campaigning_ = true;
    cannot_lead = cannot_lead_;
  }
  on_leading_ = std::move(on_leading);
  on_restart_ = std::move(on_restart);
  // Also on a replica that cannot lead: one behind a trim fetches a snapshot.
  upkeep_ = std::thread([this] { RunUpkeep(); });
  if (cannot_lead) return;
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
  if (upkeep_.joinable()) upkeep_.join();
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
      Restart("lost the leadership");
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

void Replica::Restart(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    if (restarting_ || stopping_) return;
    restarting_ = true;
  }
  if (on_restart_) on_restart_(why);
}

void Replica::RunUpkeep() {
  NameThisThread("fleet-upkeep");
  std::string warned;  // Said once while it stays the same.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      changed_.WaitWithTimeout(&mu_, options_.upkeep_interval);
      if (stopping_ || restarting_) return;
    }
    absl::Status done = absl::OkStatus();
    if (absl::IsOutOfRange(follower_->Current().stopped) && !serving_.load()) {
      done = FetchSnapshot();
      if (done.ok()) {
        Restart("fetched the log's snapshot: its store was behind the log's first entry");
        return;
      }
    } else if (serving_.load()) {
      done = SnapshotIfDue();
      // Also when the snapshot failed: under a NOSPACE alarm etcd refuses its Put.
      absl::Status space = KeepSpaceIfDue();
      if (done.ok()) done = space;
    }
    if (!done.ok() && done.ToString() != warned) {
      FLEET_LOG(WARNING) << "replicated log upkeep: " << done;
    }
    warned = done.ok() ? "" : done.ToString();
  }
}

absl::Status Replica::KeepSpaceIfDue() {
  const absl::Time now = absl::Now();
  if (options_.space_every == absl::ZeroDuration() || now < next_space_pass_) {
    return absl::OkStatus();
  }
  next_space_pass_ = now + options_.space_every;
  if (!space_scheduled_) {
    // A space_every after leading begins: a deposed leader's defragmentation may still run.
    space_scheduled_ = true;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(etcd::SpacePass pass, space_keeper_.Pass());
  if (!pass.defragmented.empty()) {
    FLEET_LOG(INFO) << "etcd member " << pass.defragmented << " defragmented: its file went from "
                    << pass.bytes_before << " to " << pass.bytes_after << " bytes in " << pass.took;
  }
  if (!pass.moved_leader_from.empty()) {
    FLEET_LOG(INFO) << "etcd's leadership moved from " << pass.moved_leader_from
                    << ", which is due for defragmenting";
  }
  if (!pass.disarmed.empty()) {
    FLEET_LOG(WARNING) << "etcd's NOSPACE alarm cleared on " << pass.disarmed.size()
                       << " member(s), every member defragmented";
  }
  if (pass.alarm_back) {
    space_alarm_back_ = true;
    FLEET_LOG(ERROR) << "etcd's NOSPACE alarm is back within "
                     << absl::FormatDuration(options_.space.alarm_backoff)
                     << " of being cleared: the data itself is past etcd's quota; raise every "
                        "member's --quota-backend-bytes, or lower log_keep_entries";
  }
  if (!space_keeper_.UnderAlarm()) space_alarm_back_ = false;
  // The next step at the next upkeep: while an alarm is worked off (unless it keeps coming
  // back), and after etcd's leadership was moved for a defragmentation.
  if ((space_keeper_.UnderAlarm() && !space_alarm_back_) || !pass.moved_leader_from.empty()) {
    next_space_pass_ = now;
  }
  return absl::OkStatus();
}

absl::Status Replica::SnapshotIfDue() {
  if (options_.snapshot_every == 0 || options_.snapshot_file.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(uint64_t position, store_->ReplicaPosition());
  ASSIGN_OR_RETURN(etcd::LogBounds bounds, log_.Bounds());
  if (position < bounds.snapshot + options_.snapshot_every) {
    // A trim that failed after its snapshot was put is made again here.
    return TrimBefore(bounds.snapshot, bounds);
  }
  // Made beside the fetched snapshot's place: the state directory, on the same file system.
  const std::string copy = options_.snapshot_file + ".taking";
  std::error_code ignored;
  std::filesystem::remove(copy, ignored);
  absl::StatusOr<uint64_t> seq = store_->SnapshotTo(copy);
  absl::StatusOr<std::string> bytes =
      seq.ok() ? ReadFile(copy) : absl::StatusOr<std::string>(seq.status());
  std::filesystem::remove(copy, ignored);
  if (!bytes.ok()) return bytes.status();
  if (!absl::StartsWith(*bytes, kSqliteHeader)) {
    return absl::InternalError(absl::StrCat("snapshot ", copy, " is not a SQLite database"));
  }
  RETURN_IF_ERROR(log_.PutSnapshot(election_.StillLeading(), {*seq, *bytes}));
  FLEET_LOG(INFO) << "replicated log: snapshot at entry " << *seq << " ("
                  << Bytes(static_cast<int64_t>(bytes->size())) << ")";
  return TrimBefore(*seq, bounds);
}

absl::Status Replica::TrimBefore(uint64_t snapshot, const etcd::LogBounds& bounds) {
  if (snapshot <= options_.keep_entries) return absl::OkStatus();
  const uint64_t through = snapshot - options_.keep_entries;
  if (through < bounds.first) return absl::OkStatus();  // Trimmed that far already.
  RETURN_IF_ERROR(log_.Trim(election_.StillLeading(), through));
  FLEET_LOG(INFO) << "replicated log: entries through " << through << " trimmed";
  return absl::OkStatus();
}

absl::Status Replica::FetchSnapshot() {
  if (options_.snapshot_file.empty()) {
    return absl::FailedPreconditionError(
        "this replica's store is behind the log's first entry and no snapshot file is set");
  }
  ASSIGN_OR_RETURN(etcd::Snapshot snapshot, log_.ReadSnapshot());
  if (!absl::StartsWith(snapshot.bytes, kSqliteHeader)) {
    return absl::DataLossError(
        absl::StrCat("the log's snapshot at entry ", snapshot.seq, " is not a SQLite database"));
  }
  const std::string partial = options_.snapshot_file + ".partial";
  RETURN_IF_ERROR(WriteDurably(partial, snapshot.bytes));
  std::error_code error;
  std::filesystem::rename(partial, options_.snapshot_file, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", partial, " to ",
                                            options_.snapshot_file, ": ", error.message()));
  }
  SyncDirectoryOf(options_.snapshot_file);
  FLEET_LOG(WARNING) << "replica " << options_.advertise << " fetched the log's snapshot at entry "
                     << snapshot.seq << " (" << Bytes(static_cast<int64_t>(snapshot.bytes.size()))
                     << ") into " << options_.snapshot_file << "; it restarts to load it";
  return absl::OkStatus();
}

absl::Status InstallFetchedSnapshot(const std::string& snapshot_file, const std::string& db_path) {
  std::error_code error;
  if (snapshot_file.empty() || !std::filesystem::exists(snapshot_file, error)) {
    return absl::OkStatus();
  }
  // The old database's write-ahead log goes first: replayed into the snapshot, it would
  // corrupt it.
  for (const char* suffix : {"-wal", "-shm"}) {
    std::filesystem::remove(db_path + suffix, error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot remove ", db_path, suffix,
                                              " to load the fetched snapshot: ", error.message()));
    }
  }
  std::filesystem::rename(snapshot_file, db_path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot put the fetched snapshot ", snapshot_file,
                                            " in place of ", db_path, ": ", error.message()));
  }
  FLEET_LOG(WARNING) << "state database " << db_path
                     << " replaced by the replicated log's snapshot";
  return absl::OkStatus();
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
  // The key may still name this replica after it restarted within its old lease.
  std::string leader = "leader " + status.leader;
  if (status.leader.empty()) {
    leader = "leader unknown";
  } else if (status.leader == status.self) {
    leader = status.role != Role::kFollower ? "this replica leads"
                                            : leader + " (this replica's earlier run)";
  }
  std::string detail =
      absl::StrCat(RoleName(status.role), " ", status.self, "; ", leader, "; log entry ",
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
