#include "controller/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"

namespace fleet::etcd {

bool IsMemberFailure(const absl::Status& status) {
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) return true;
  // etcd 3.4 answers a linearizable request it could not confirm in time, as while it elects
  // its own leader after losing a member, as UNKNOWN "context deadline exceeded".
  return absl::IsUnknown(status) &&
         absl::StrContains(status.message(), "context deadline exceeded");
}

std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

etcdserverpb::Compare CreateRevisionIs(const std::string& key, int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd endpoints: none given; give at least one HOST:PORT");
  }
  const bool tls =
      !options.ca_file.empty() || !options.cert_file.empty() || !options.key_file.empty();
  if (tls && (options.ca_file.empty() || options.cert_file.empty() || options.key_file.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd TLS: give all three of the CA, certificate and key files, or none (got ca '",
        options.ca_file, "', cert '", options.cert_file, "', key '", options.key_file, "')"));
  }
  ClientTlsFiles files{options.ca_file, options.cert_file, options.key_file, /*insecure=*/!tls};
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientCredentials(files);
  if (!credentials.ok()) {
    return absl::Status(credentials.status().code(),
                        absl::StrCat("etcd TLS: ", credentials.status().message()));
  }
  auto client = std::unique_ptr<EtcdClient>(new EtcdClient(options));
  for (const std::string& given : options.endpoints) {
    absl::string_view endpoint = given;
    if ((absl::ConsumePrefix(&endpoint, "https://") && !tls) ||
        (absl::ConsumePrefix(&endpoint, "http://") && tls)) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoints: '", given, "' says ", tls ? "plaintext" : "TLS",
                       " but the TLS files ", tls ? "are given" : "are not"));
    }
    if (endpoint.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoints: '", given, "' names no HOST:PORT"));
    }
    grpc::ChannelArguments args;
    // Retry a member that is down soon, so that it is stepped over quickly and found again when
    // it is back; the minimum is also how long one connection attempt may take (gRPC's default
    // is 20 s, which a member accepting connections before it serves, as a starting etcd does,
    // would hold).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // A connection that went half-open is found within seconds, not at each call's deadline.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
    // etcd bounds its own answers; a prefix read of large values may pass gRPC's 4 MiB.
    args.SetMaxReceiveMessageSize(-1);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(std::string(endpoint), *credentials, args);
    Member m;
    m.endpoint = std::string(endpoint);
    m.channel = channel;
    m.kv = etcdserverpb::KV::NewStub(channel);
    m.lease = etcdserverpb::Lease::NewStub(channel);
    m.maintenance = etcdserverpb::Maintenance::NewStub(channel);
    client->members_.push_back(std::move(m));
  }
  return client;
}

template <typename Call>
absl::Status EtcdClient::OnSomeMember(Kind kind, const std::string& what, Call call) {
  const absl::Time started = absl::Now();
  absl::Status status = TryMembers(kind, what, std::move(call));
  if (options_.observe) options_.observe(kind == Kind::kWrite, absl::Now() - started, status);
  return status;
}

template <typename Call>
absl::Status EtcdClient::TryMembers(Kind kind, const std::string& what, Call call) {
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  size_t first;
  {
    absl::MutexLock lock(&mu_);
    first = preferred_;
  }
  std::vector<std::string> failures;
  bool answered = false;  // Some member was reached and failed the call.
  for (size_t tried = 0; tried < members_.size(); ++tried) {
    const size_t i = (first + tried) % members_.size();
    Member& member = members_[i];
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    // A fair share of what is left, so that one member that hangs leaves time for the others.
    const absl::Time until = absl::Now() + left / static_cast<int64_t>(members_.size() - tried);
    // Connecting first (which also lets gRPC make progress on a channel in backoff) means a
    // member that cannot be reached is stepped over with nothing sent to it.
    if (!member.channel->WaitForConnected(absl::ToChronoTime(until))) {
      failures.push_back(
          absl::StrCat(member.endpoint, ": cannot connect or complete the TLS handshake"));
      continue;
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(kind == Kind::kWrite ? deadline : until));
    const absl::Status status = FromGrpcStatus(call(member, context));
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      preferred_ = i;
      return status;
    }
    if (!IsMemberFailure(status)) {
      return absl::Status(status.code(), absl::StrCat("etcd ", member.endpoint, ": ", what, ": ",
                                                      status.message()));
    }
    if (kind == Kind::kWrite) {
      absl::MutexLock lock(&mu_);
      preferred_ = (i + 1) % members_.size();  // The next call starts elsewhere.
      return absl::UnavailableError(
          absl::StrCat("etcd ", member.endpoint, ": ", what, ": ", status.message(),
                       " (outcome unknown: the write may or may not have been applied)"));
    }
    answered = true;
    failures.push_back(absl::StrCat(member.endpoint, ": ", status.message()));
  }
  return absl::UnavailableError(absl::StrCat(
      "etcd: ", what, ": ",
      answered ? "no member answered with a quorum behind it" : "no member could be reached",
      " within ", absl::FormatDuration(options_.request_timeout), " (",
      failures.empty() ? "out of time" : absl::StrJoin(failures, "; "), ")"));
}

absl::StatusOr<mvccpb::KeyValue> EtcdClient::Get(const std::string& key) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  absl::Status status = OnSomeMember(
      Kind::kRead, absl::StrCat("Get ", key),
      [&](Member& m, auto& context) { return m.kv->Range(&context, request, &response); });
  if (!status.ok()) return status;
  if (response.kvs().empty()) return absl::NotFoundError(absl::StrCat("etcd: no key ", key));
  return response.kvs(0);
}

absl::StatusOr<std::vector<mvccpb::KeyValue>> EtcdClient::GetPrefix(const std::string& prefix,
                                                                    int64_t limit) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  request.set_range_end(PrefixEnd(prefix));
  request.set_limit(limit);
  etcdserverpb::RangeResponse response;
  absl::Status status = OnSomeMember(
      Kind::kRead, absl::StrCat("Get prefix ", prefix),
      [&](Member& m, auto& context) { return m.kv->Range(&context, request, &response); });
  if (!status.ok()) return status;
  return std::vector<mvccpb::KeyValue>(response.kvs().begin(), response.kvs().end());
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  absl::Status status = OnSomeMember(
      Kind::kWrite, absl::StrCat("Put ", key),
      [&](Member& m, auto& context) { return m.kv->Put(&context, request, &response); });
  if (!status.ok()) return status;
  return response.header().revision();
}

absl::StatusOr<int64_t> EtcdClient::Delete(const std::string& key) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  etcdserverpb::DeleteRangeResponse response;
  absl::Status status = OnSomeMember(
      Kind::kWrite, absl::StrCat("Delete ", key),
      [&](Member& m, auto& context) { return m.kv->DeleteRange(&context, request, &response); });
  if (!status.ok()) return status;
  return response.deleted();
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  const std::string what =
      request.compare().empty() ? "Txn" : absl::StrCat("Txn on ", request.compare(0).key());
  // A Txn that only reads changes nothing whatever its outcome: it may go to the next member.
  auto reads = [](const auto& ops) {
    return std::all_of(ops.begin(), ops.end(),
                       [](const etcdserverpb::RequestOp& op) { return op.has_request_range(); });
  };
  const Kind kind =
      reads(request.success()) && reads(request.failure()) ? Kind::kRead : Kind::kWrite;
  absl::Status status = OnSomeMember(kind, what, [&](Member& m, auto& context) {
    return m.kv->Txn(&context, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::Status EtcdClient::Compact(int64_t revision, bool physical) {
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(physical);
  etcdserverpb::CompactionResponse response;
  absl::Status status = OnSomeMember(
      Kind::kWrite, absl::StrCat("Compact ", revision),
      [&](Member& m, auto& context) { return m.kv->Compact(&context, request, &response); });
  // Compacted already (by this call lost and repeated, or by another): the history is gone.
  if (absl::IsOutOfRange(status) && absl::StrContains(status.message(), "compacted")) {
    return absl::OkStatus();
  }
  return status;
}

absl::StatusOr<Lease> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ttl))));
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status = OnSomeMember(Kind::kWrite, "LeaseGrant", [&](Member& m, auto& context) {
    return m.lease->LeaseGrant(&context, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd: LeaseGrant: ", response.error()));
  }
  return Lease{response.id(), absl::Seconds(response.ttl())};
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease) {
  // etcd renews only over its bidirectional stream: one request, one answer, then closed.
  etcdserverpb::LeaseKeepAliveResponse response;
  const std::string what = absl::StrCat("LeaseKeepAlive ", lease);
  absl::Status status = OnSomeMember(Kind::kRead, what, [&](Member& m, auto& context) {
    auto stream = m.lease->LeaseKeepAlive(&context);
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease);
    const bool exchanged = stream->Write(request) && stream->Read(&response);
    stream->WritesDone();
    grpc::Status finished = stream->Finish();
    if (!finished.ok()) return finished;
    if (!exchanged) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream ended early");
    return grpc::Status::OK;
  });
  if (!status.ok()) return status;
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd: lease ", lease, " has expired"));
  }
  return absl::Seconds(response.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  absl::Status status = OnSomeMember(
      Kind::kWrite, absl::StrCat("LeaseRevoke ", lease),
      [&](Member& m, auto& context) { return m.lease->LeaseRevoke(&context, request, &response); });
  // etcd answers a lease it does not know as NOT_FOUND ("requested lease not found").
  return status;
}

std::vector<MemberStatus> EtcdClient::Members() {
  std::vector<MemberStatus> out;
  for (Member& m : members_) {
    MemberStatus s;
    s.endpoint = m.endpoint;
    const absl::Time until =
        absl::Now() + options_.request_timeout / static_cast<int64_t>(members_.size());
    if (!m.channel->WaitForConnected(absl::ToChronoTime(until))) {
      s.reachable = absl::UnavailableError("cannot connect or complete the TLS handshake");
      out.push_back(std::move(s));
      continue;
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(until));
    etcdserverpb::StatusResponse response;
    s.reachable = FromGrpcStatus(m.maintenance->Status(&context, {}, &response));
    if (s.reachable.ok()) {
      s.member_id = response.header().member_id();
      s.leader_id = response.leader();
      s.raft_term = response.raftterm();
      s.raft_index = response.raftindex();
      s.db_size_bytes = response.dbsize();
      s.db_size_in_use_bytes = response.dbsizeinuse();
      s.version = response.version();
      s.errors.assign(response.errors().begin(), response.errors().end());
    }
    out.push_back(std::move(s));
  }
  return out;
}

EtcdClient::Member* EtcdClient::MemberAt(const std::string& endpoint) {
  for (Member& m : members_) {
    if (m.endpoint == endpoint) return &m;
  }
  return nullptr;
}

absl::Status EtcdClient::Defragment(const std::string& endpoint, absl::Duration timeout) {
  Member* member = MemberAt(endpoint);
  if (member == nullptr) {
    return absl::NotFoundError(absl::StrCat("etcd: no member ", endpoint, " in the endpoints"));
  }
  {
    // The member answers nothing while it works: this client's calls start elsewhere.
    absl::MutexLock lock(&mu_);
    if (members_[preferred_].endpoint == endpoint) preferred_ = (preferred_ + 1) % members_.size();
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  etcdserverpb::DefragmentResponse response;
  // Not told to options_.observe: its time is the file's, not a request's.
  absl::Status status = FromGrpcStatus(member->maintenance->Defragment(&context, {}, &response));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("etcd: Defragment ", endpoint, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status EtcdClient::MoveLeader(const std::string& leader_endpoint, uint64_t target_id) {
  Member* member = MemberAt(leader_endpoint);
  if (member == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("etcd: no member ", leader_endpoint, " in the endpoints"));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  etcdserverpb::MoveLeaderRequest request;
  request.set_targetid(target_id);
  etcdserverpb::MoveLeaderResponse response;
  absl::Status status =
      FromGrpcStatus(member->maintenance->MoveLeader(&context, request, &response));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("etcd: MoveLeader to ", absl::Hex(target_id), " via ",
                                     leader_endpoint, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> EtcdClient::NoSpaceAlarms() {
  etcdserverpb::AlarmRequest request;
  request.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse response;
  absl::Status status = OnSomeMember(Kind::kRead, "Alarm GET", [&](Member& m, auto& context) {
    return m.maintenance->Alarm(&context, request, &response);
  });
  if (!status.ok()) return status;
  std::vector<uint64_t> members;
  for (const etcdserverpb::AlarmMember& alarm : response.alarms()) {
    if (alarm.alarm() == etcdserverpb::NOSPACE) members.push_back(alarm.memberid());
  }
  return members;
}

absl::Status EtcdClient::DisarmNoSpace(uint64_t member_id) {
  etcdserverpb::AlarmRequest request;
  request.set_action(etcdserverpb::AlarmRequest::DEACTIVATE);
  request.set_memberid(member_id);
  request.set_alarm(etcdserverpb::NOSPACE);
  etcdserverpb::AlarmResponse response;
  return OnSomeMember(
      Kind::kWrite, absl::StrCat("Alarm DEACTIVATE NOSPACE ", absl::Hex(member_id)),
      [&](Member& m, auto& context) { return m.maintenance->Alarm(&context, request, &response); });
}

}  // namespace fleet::etcd
