// OpticalSwitch over the switch's RESTCONF-style REST API.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/http_client.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "switch_adapters/polatis/polatis_switch.h"
#include "switch_adapters/polatis/rest_json.h"

namespace fleet::polatis {
namespace {

using nlohmann::json;
using switch_adapters::ApplyResult;
using switch_adapters::CrossConnect;
using switch_adapters::CrossConnectBatch;
using switch_adapters::PortPower;
using switch_adapters::PortState;
using switch_adapters::SwitchIdentity;

constexpr char kCrossConnects[] = "/api/data/optical-switch:cross-connects";

class RestSwitch : public switch_adapters::OpticalSwitch {
 public:
  explicit RestSwitch(const PolatisSwitchOptions& options)
      : options_(options), http_(NewCurlHttpClient(HttpOptions(options))) {
    if (options.insecure_http) {
      FLEET_LOG(WARNING) << "switch " << options.name
                         << ": REST over plain HTTP (insecure_http): its credentials and "
                            "commands cross the network in clear";
    }
  }

  absl::StatusOr<SwitchIdentity> Identity() override {
    absl::MutexLock lock(&mu_);
    return IdentityLocked();
  }

  absl::StatusOr<std::vector<CrossConnect>> ReadCrossConnects() override {
    absl::MutexLock lock(&mu_);
    return ReadLocked();
  }

  absl::StatusOr<std::vector<PortState>> ReadPorts() override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(json body, Request("GET", "/api/data/optical-switch:port-config", ""));
    return NameSwitch(ParseRestPortConfig(body));
  }

  absl::StatusOr<std::vector<PortPower>> ReadPower(const std::vector<uint32_t>& ports) override {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(json body, Request("GET", "/api/data/optical-switch:opm-power", ""));
    return NameSwitch(ParseRestOpmPower(body, ports));
  }

  absl::Status SetShutters(const std::vector<uint32_t>& ports, bool open) override {
    absl::MutexLock lock(&mu_);
    if (ports.empty()) return absl::OkStatus();
    json list = json::array();
    for (uint32_t p : ports)
      list.push_back({{"port-id", p}, {"status", open ? "ENABLED" : "DISABLED"}});
    json body = {{"optical-switch:port-config", {{"port", list}}}};
    return Request("PATCH", "/api/data/optical-switch:port-config", body.dump()).status();
  }

  ApplyResult Apply(const CrossConnectBatch& batch) override {
    absl::MutexLock lock(&mu_);
    ApplyResult result;
    const int before = http_->requests_sent();
    result.status = ApplyLocked(batch, result);
    result.commands = http_->requests_sent() - before;
    return result;
  }

 private:
  // HTTPS unless the operator chose plain HTTP; the HTTP client keeps credentials off http://
  // unless that choice was made.
  static CurlHttpClientOptions HttpOptions(const PolatisSwitchOptions& options) {
    // A bare IPv6 address needs brackets in a URL.
    const std::string host = absl::StrContains(options.host, ':') && options.host[0] != '['
                                 ? absl::StrCat("[", options.host, "]")
                                 : options.host;
    CurlHttpClientOptions http;
    http.base_url = absl::StrCat(options.insecure_http ? "http://" : "https://", host, ":",
                                 options.port == 0 ? 8008 : options.port);
    http.user = options.credentials.user;
    http.password = options.credentials.password;
    if (!options.insecure_http) http.ca_file = options.ca_bundle;
    http.basic_auth_over_http = options.insecure_http;
    http.connect_timeout = options.connect_timeout;
    http.request_timeout = options.command_timeout;
    return http;
  }

  // Sends a request; a non-2xx answer becomes a status carrying the switch's message. Every
  // method but GET changes the switch and asks the change gate first.
  absl::StatusOr<json> Request(const std::string& method, const std::string& path,
                               const std::string& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (method != "GET" && options_.before_change) RETURN_IF_ERROR(options_.before_change());
    absl::StatusOr<HttpResponse> response = http_->Send(method, path, body);
    if (!response.ok()) {
      // Transport and TLS failures are UNAVAILABLE already; a refusal to send keeps its code.
      return absl::Status(response.status().code(), absl::StrCat("switch ", options_.name, ": ",
                                                                 response.status().message()));
    }
    if (response->status < 200 || response->status >= 300) {
      return absl::Status(
          RestErrorCode(response->status),
          absl::StrCat("switch ", options_.name, " answered ", method, " ", path, " with HTTP ",
                       response->status, ": ", RestErrorMessage(response->body)));
    }
    std::optional<json> parsed = ParseRestBody(response->body);
    if (!parsed) {
      return absl::InternalError(absl::StrCat("switch ", options_.name, ": ", method, " ", path,
                                              " answered with invalid JSON"));
    }
    return *std::move(parsed);
  }

  // A body the switch answered that the parser refused, named as this switch's.
  template <typename T>
  absl::StatusOr<T> NameSwitch(absl::StatusOr<T> parsed) const {
    if (parsed.ok()) return parsed;
    return absl::Status(parsed.status().code(),
                        absl::StrCat("switch ", options_.name, ": ", parsed.status().message()));
  }

  absl::StatusOr<SwitchIdentity> IdentityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (identity_) return *identity_;
    ASSIGN_OR_RETURN(json body, Request("GET", "/api/data/optical-switch:product-information", ""));
    ASSIGN_OR_RETURN(SwitchIdentity id, NameSwitch(ParseRestProductInformation(body)));
    // The size is in the model name (N-VST-384x384-...); port-config is the fallback.
    if (id.ingress_ports == 0 && id.egress_ports == 0) {
      ASSIGN_OR_RETURN(json ports, Request("GET", "/api/data/optical-switch:port-config", ""));
      const size_t count = RestPortCount(ports);
      id.ingress_ports = static_cast<uint32_t>(count / 2);
      id.egress_ports = static_cast<uint32_t>(count - count / 2);
    }
    if (id.ingress_ports == 0) {
      return absl::InternalError(absl::StrCat("switch ", options_.name, ": cannot tell its size"));
    }
    identity_ = id;
    return id;
  }

  absl::StatusOr<std::vector<CrossConnect>> ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(json body, Request("GET", kCrossConnects, ""));
    ASSIGN_OR_RETURN(RestCrossConnects read, NameSwitch(ParseRestCrossConnects(body)));
    if (!read.list_name.empty()) list_name_ = read.list_name;
    return std::move(read.pairs);
  }

  // Removes whose ingress the same batch connects again are left to the PATCH: a RESTCONF
  // merge replaces that ingress's egress, so a full reconfiguration is one request, not one
  // DELETE per cross-connect (the confirmed API has no bulk delete). The rest go one DELETE
  // each over the reused connection.
  absl::Status Remove(const std::vector<CrossConnect>& removes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    deferred_.clear();
    std::vector<CrossConnect> now;
    for (const CrossConnect& x : removes) {
      (readded_.contains(x.ingress) && options_.bulk ? deferred_ : now).push_back(x);
    }
    return Delete(now);
  }

  absl::Status Delete(const std::vector<CrossConnect>& removes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const CrossConnect& x : removes) {
      absl::StatusOr<json> done =
          Request("DELETE", absl::StrCat(kCrossConnects, "/pair=", x.ingress), "");
      // Gone already is what we wanted.
      if (!done.ok() && done.status().code() != absl::StatusCode::kNotFound) return done.status();
    }
    return absl::OkStatus();
  }

  // One PATCH for all adds (all-or-nothing on the switch), or one PUT each when not in bulk
  // mode. Switches on YANG revisions before 2017-08-04 name the list `pairs`: the name last
  // seen in a read is used, and a write refused as invalid is tried once with the other name.
  absl::Status Add(const std::vector<CrossConnect>& adds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status sent = AddAs(adds, list_name_);
    if (sent.code() == absl::StatusCode::kFailedPrecondition && !deferred_.empty()) {
      // The switch would not move egresses within one merge: delete first, then merge.
      RETURN_IF_ERROR(Delete(deferred_));
      deferred_.clear();
      sent = AddAs(adds, list_name_);
    }
    if (sent.code() == absl::StatusCode::kInvalidArgument) {
      const std::string other = list_name_ == "pair" ? "pairs" : "pair";
      if (absl::Status retried = AddAs(adds, other); retried.ok()) {
        list_name_ = other;
        return retried;
      }
    }
    return sent;
  }

  absl::Status AddAs(const std::vector<CrossConnect>& adds, const std::string& list)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!options_.bulk) {
      for (const CrossConnect& x : adds) {
        json body = {{list, json::array({{{"ingress", x.ingress}, {"egress", x.egress}}})}};
        RETURN_IF_ERROR(
            Request("PUT", absl::StrCat(kCrossConnects, "/pair=", x.ingress), body.dump())
                .status());
      }
      return absl::OkStatus();
    }
    json pairs = json::array();
    for (const CrossConnect& x : adds)
      pairs.push_back({{"ingress", x.ingress}, {"egress", x.egress}});
    json body = {{"optical-switch:cross-connects", {{list, pairs}}}};
    return Request("PATCH", kCrossConnects, body.dump()).status();
  }

  absl::Status ApplyLocked(const CrossConnectBatch& batch, ApplyResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ASSIGN_OR_RETURN(SwitchIdentity id, IdentityLocked());
    readded_.clear();
    for (const CrossConnect& x : batch.add) readded_.insert(x.ingress);
    switch_adapters::BatchDriver driver{[this]()
                                            ABSL_NO_THREAD_SAFETY_ANALYSIS { return ReadLocked(); },
                                        [this](const std::vector<CrossConnect>& xs)
                                            ABSL_NO_THREAD_SAFETY_ANALYSIS { return Remove(xs); },
                                        [this](const std::vector<CrossConnect>& xs)
                                            ABSL_NO_THREAD_SAFETY_ANALYSIS { return Add(xs); }};
    return switch_adapters::RunApply(batch, id.ingress_ports, id.egress_ports, driver, result);
  }

  const PolatisSwitchOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<HttpClient> http_ ABSL_GUARDED_BY(mu_);
  std::optional<SwitchIdentity> identity_ ABSL_GUARDED_BY(mu_);
  std::string list_name_ ABSL_GUARDED_BY(mu_) = "pair";  // Or "pairs" on older switches.
  // Within one Apply: ingresses the batch connects, and removes left to the PATCH.
  std::set<uint32_t> readded_ ABSL_GUARDED_BY(mu_);
  std::vector<CrossConnect> deferred_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<switch_adapters::OpticalSwitch> NewRestSwitch(const PolatisSwitchOptions& options) {
  return std::make_unique<RestSwitch>(options);
}

}  // namespace fleet::polatis
