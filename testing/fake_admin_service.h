// An in-process AdminService: an event log, drains, a reconcile of one switch, O-NIC links
// and health, with canned answers, for tests of clients of the admin API.
#ifndef FLEET_TESTING_FAKE_ADMIN_SERVICE_H_
#define FLEET_TESTING_FAKE_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fleet/v1/admin.grpc.pb.h"

namespace fleet::testing {

// Besides links and health: a small event log that ListEvents filters and WatchEvents replays
// and follows; drains by target; and a reconcile of one switch's cross-connects against the
// desired ones that really repairs, adopts and removes.
class FakeAdminService final : public v1::AdminService::Service {
 public:
  explicit FakeAdminService(absl::Time now);

  void AppendEvent(const std::string& kind, const std::string& object_kind,
                   const std::string& object_id, const std::string& message);

  grpc::Status ListEvents(grpc::ServerContext*, const v1::ListEventsRequest* request,
                          v1::ListEventsResponse* response) override;

  grpc::Status WatchEvents(grpc::ServerContext* context, const v1::WatchEventsRequest* request,
                           grpc::ServerWriter<v1::Event>* writer) override;

  // Open event watches end (OK) once they have sent every event so far.
  void EndEventWatches();
  // The after_sequence of the latest event watch.
  uint64_t last_watch_after();
  // True once `n` event watches have started.
  bool AwaitEventWatches(int n);

  // a1's circuit c1 runs s1c0-n0/1 → gpu3-n0/1 through ocs1/1, on host server1.
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;

  grpc::Status Undrain(grpc::ServerContext*, const v1::UndrainRequest* request,
                       v1::UndrainResponse*) override;

  // Replaces gpu3 of a1 by gpu5: one circuit each way off, one each way on.
  grpc::Status ReplaceMember(grpc::ServerContext*, const v1::ReplaceMemberRequest* request,
                             v1::ReplaceMemberResponse* response) override;

  // Reconciles the one switch, ocs1: a desired cross-connect missing from it is made again, and
  // one nobody asked for is reported, adopted or removed by the policy (REPORT by default).
  grpc::Status Reconcile(grpc::ServerContext*, const v1::ReconcileRequest* request,
                         v1::ReconcileResponse* response) override;

  std::vector<v1::DrainRequest> drains();
  std::vector<v1::UndrainRequest> undrains();
  std::vector<v1::ReconcileRequest> reconciles();

  grpc::Status RetrainLink(grpc::ServerContext*, const v1::RetrainLinkRequest* request,
                           v1::LinkState* response) override;

  grpc::Status GetLinkStatus(grpc::ServerContext*, const v1::GetLinkStatusRequest* request,
                             v1::GetLinkStatusResponse* response) override;

  std::vector<v1::RetrainLinkRequest> retrains();

  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*,
                      v1::HealthResponse* response) override;

 private:
  // What the fake's switch ocs1 holds and what its circuits want, ingress → (egress, circuit).
  using CrossConnects = std::map<uint32_t, std::pair<uint32_t, std::string>>;

  static bool Matches(const v1::Event& event, uint64_t after, const std::string& object_kind,
                      const std::string& object_id);

  const absl::Time now_;
  absl::Mutex mu_;
  std::vector<v1::RetrainLinkRequest> retrains_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Event> events_ ABSL_GUARDED_BY(mu_);
  bool end_event_watches_ ABSL_GUARDED_BY(mu_) = false;
  int event_watches_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_watch_after_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::DrainRequest> drains_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::UndrainRequest> undrains_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReconcileRequest> reconciles_ ABSL_GUARDED_BY(mu_);
  CrossConnects desired_ ABSL_GUARDED_BY(mu_);
  CrossConnects on_switch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleet::testing

#endif  // FLEET_TESTING_FAKE_ADMIN_SERVICE_H_
