// polatis-emu's HTTP resources: the RESTCONF-style switch API under /api/data (Basic auth)
// and the simulation side-channel under /sim/v1 (no auth), as docs/polatis-emulator.md
// specifies. Request in, response out: RestServer does the HTTP plumbing.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_REST_API_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_REST_API_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
#include "switch_adapters/polatis/emulator/switch_model.h"

namespace fleet::polatis_emu {

// Which name the cross-connect list has: YANG revisions before 2017-08-04 call it `pairs`.
enum class YangRevision { kCurrent, kLegacy };

struct RestApiOptions {
  std::string user = "admin";
  std::string password = "root";
  YangRevision yang_revision = YangRevision::kCurrent;
  SwitchIdentity identity;
};

struct HttpRequest {
  std::string method;         // "GET", "PUT", ...
  std::string path;           // URL-decoded, without the query string
  std::string query;          // after the '?', as sent; "" if none
  std::string authorization;  // the Authorization header, "" if absent
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond the content headers
  // POST /sim/v1/faults/drop-connections: the server closes every connection once this
  // response has been sent.
  bool drop_connections = false;
};

class RestApi {
 public:
  // `model` and `clock` are not owned. `wait` delays answers (settling, injected latency).
  RestApi(const RestApiOptions& options, SwitchModel* model, const Clock* clock, Waiter wait);
  ~RestApi();
  RestApi(const RestApi&) = delete;
  RestApi& operator=(const RestApi&) = delete;

  // Ends the long polls waiting now (GET /sim/v1/light?...&after=G) and answers later ones at
  // once: the server is stopping.
  void Stop();

  // Thread-safe: the server calls it from many worker threads.
  HttpResponse Handle(const HttpRequest& request);

 private:
  HttpResponse Api(const HttpRequest& request, absl::string_view resource);
  HttpResponse Simulation(const HttpRequest& request, absl::string_view path);
  bool Authorized(absl::string_view header) const;

  HttpResponse GetCrossConnects();
  HttpResponse PatchCrossConnects(const nlohmann::ordered_json& body);
  HttpResponse GetPair(int ingress);
  HttpResponse PutPair(int ingress, const nlohmann::ordered_json& body);
  HttpResponse DeletePair(int ingress);
  HttpResponse GetPortConfig();
  HttpResponse PatchPortConfig(const nlohmann::ordered_json& body);
  HttpResponse GetOpmPower();
  HttpResponse GetProductInformation();

  HttpResponse PutFaults(const nlohmann::ordered_json& body);
  HttpResponse PutPort(int port, const nlohmann::ordered_json& body);
  HttpResponse PutSignal(int ingress, const nlohmann::ordered_json& body);
  HttpResponse PutTrunk(int ingress, const nlohmann::ordered_json& body);
  HttpResponse GetTrunks();
  HttpResponse GetLight(int egress, absl::string_view query);
  // Several egresses' light in one request (`egress=E1,E2,...`), in the order asked, with the
  // model's light generation. With `after=G` it is a long poll: the answer waits (up to
  // `wait_ms`, default 1000, at most 60000) until a change newer than G could have moved the
  // light at one of them, or a cross-connect to one of them settles.
  HttpResponse GetLights(absl::string_view query);
  // Returns when a change newer than generation `seen` could have moved the light at one of
  // `egresses`, a cross-connect to one of them settles, `wait` passes, or the server stops.
  void WaitForLightChange(const std::vector<int>& egresses, uint64_t seen, absl::Duration wait);
  HttpResponse GetChanges();
  HttpResponse GetCounters();

  // Answers after the cross-connects made settle (the switch answers after moving beams).
  void WaitUntil(absl::Time settled_at);

  const RestApiOptions options_;
  const std::string list_name_;  // "pair" or "pairs"
  SwitchModel* const model_;
  const Clock* const clock_;
  const Waiter wait_;

  // A long poll waiting: a change of the model's light at one of its egresses wakes it.
  struct Watcher {
    const std::vector<int>* egresses;
    absl::CondVar changed;
    bool woken = false;
  };
  absl::Mutex watch_mu_;
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(watch_mu_);
  bool stopping_ ABSL_GUARDED_BY(watch_mu_) = false;
  int listener_ = 0;  // The model's id for our listener.
};

}  // namespace fleet::polatis_emu

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_EMULATOR_REST_API_H_
