#include "switch_adapters/polatis/emulator/rest_api.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fleet::polatis_emu {
namespace {

using json = nlohmann::ordered_json;

constexpr char kYangJson[] = "application/yang-data+json";
constexpr char kJson[] = "application/json";
constexpr char kModule[] = "optical-switch:";
constexpr absl::string_view kDataPrefix = "/api/data/";
constexpr absl::string_view kSimPrefix = "/sim/v1/";

// A request the emulator refuses, with its RESTCONF error. Thrown by the validation helpers
// below and caught in RestApi::Handle: it never leaves this file.
struct RequestError {
  int status;
  std::string tag;
  std::string message;
};

[[noreturn]] void Refuse(int status, absl::string_view tag, absl::string_view message) {
  throw RequestError{status, std::string(tag), std::string(message)};
}

// A body as text. Paths and query strings come URL-decoded and may be any bytes; bytes that
// are not UTF-8 are replaced (U+FFFD) rather than let dump() throw out of Handle.
std::string Dump(const json& body) {
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse Error(int status, absl::string_view tag, absl::string_view message,
                   const char* content_type = kYangJson) {
  json error = {{"error-type", "application"},
                {"error-tag", std::string(tag)},
                {"error-message", std::string(message)}};
  HttpResponse response;
  response.status = status;
  response.content_type = content_type;
  response.body = Dump(json{{"ietf-restconf:errors", {{"error", json::array({error})}}}});
  return response;
}

HttpResponse FromStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return Error(400, "invalid-value", status.message());
    case absl::StatusCode::kFailedPrecondition:
      return Error(409, "in-use", status.message());
    default:  // injected failure, state file unwritable
      return Error(500, "operation-failed", status.message());
  }
}

HttpResponse Json(int status, const json& body, const char* content_type = kYangJson) {
  HttpResponse response;
  response.status = status;
  response.content_type = content_type;
  response.body = Dump(body);
  return response;
}

HttpResponse NoContent() {
  HttpResponse response;
  response.status = 204;
  return response;
}

// A side-channel change: 204, or 400 with the model's reason (every refusal there is the
// request's fault: a bad port or value, or a port set up the other way).
HttpResponse SimulationChange(const absl::Status& status) {
  if (!status.ok()) return Error(400, "invalid-value", status.message(), kJson);
  return NoContent();
}

HttpResponse MethodNotAllowed(absl::string_view method, absl::string_view allowed,
                              const char* content_type = kYangJson) {
  HttpResponse response =
      Error(405, "operation-not-supported",
            absl::StrCat(method, " is not supported here (allowed: ", allowed, ")"), content_type);
  response.headers.emplace_back("Allow", std::string(allowed));
  return response;
}

json ParseBody(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) Refuse(400, "malformed-message", "request body is not valid JSON");
  return parsed;
}

// The member `name` of `object`, accepted with or without the module prefix.
const json* Member(const json& object, absl::string_view name) {
  if (!object.is_object()) return nullptr;
  for (const std::string& key : {std::string(name), absl::StrCat(kModule, name)}) {
    if (auto it = object.find(key); it != object.end()) return &*it;
  }
  return nullptr;
}

void OnlyMembers(const json& object, std::initializer_list<absl::string_view> allowed) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (absl::string_view name : allowed) {
      known = known || key == name || key == absl::StrCat(kModule, name);
    }
    if (!known) Refuse(400, "invalid-value", absl::StrCat("unknown member '", key, "'"));
  }
}

int64_t Integer(const json& object, absl::string_view name) {
  const json* member = Member(object, name);
  if (member == nullptr || !member->is_number_integer()) {
    Refuse(400, "invalid-value", absl::StrCat("'", name, "' must be an integer"));
  }
  return member->get<int64_t>();
}

// A key or id from the URL path.
int PathNumber(absl::string_view text, absl::string_view what) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    Refuse(400, "invalid-value", absl::StrCat(what, " '", text, "' is not a number"));
  }
  return value;
}

json PairJson(const CrossConnect& pair) {
  return {{"ingress", pair.ingress}, {"egress", pair.egress}};
}

}  // namespace

RestApi::RestApi(const RestApiOptions& options, SwitchModel* model, const Clock* clock, Waiter wait)
    : options_(options),
      list_name_(options.yang_revision == YangRevision::kLegacy ? "pairs" : "pair"),
      model_(model),
      clock_(clock),
      wait_(std::move(wait)) {
  listener_ = model_->AddLightListener([this](const std::optional<std::set<int>>& moved) {
    absl::MutexLock lock(&watch_mu_);
    for (Watcher* w : watchers_) {
      if (moved && std::none_of(w->egresses->begin(), w->egresses->end(),
                                [&](int egress) { return moved->contains(egress); })) {
        continue;
      }
      w->woken = true;
      w->changed.Signal();
    }
  });
}

RestApi::~RestApi() { model_->RemoveLightListener(listener_); }

void RestApi::Stop() {
  absl::MutexLock lock(&watch_mu_);
  stopping_ = true;
  for (Watcher* w : watchers_) w->changed.Signal();
}

void RestApi::WaitForLightChange(const std::vector<int>& egresses, uint64_t seen,
                                 absl::Duration wait) {
  absl::Time until = absl::Now() + wait;
  // A cross-connect settling brings light without a change to the model: the wait ends then.
  const absl::Time now = clock_->Now();
  if (const absl::Time settle = model_->NextSettle(now, egresses);
      settle != absl::InfiniteFuture()) {
    until = std::min(until, absl::Now() + (settle - now));
  }
  Watcher watcher{&egresses, {}, false};
  {
    absl::MutexLock lock(&watch_mu_);
    if (stopping_) return;
    watchers_.insert(&watcher);
  }
  // Asked once the watcher is in (a change from here on wakes it) and without watch_mu_
  // (the model calls the listener, which takes it, with the model's mutex held).
  if (model_->LightGenerationOf(egresses) <= seen) {
    absl::MutexLock lock(&watch_mu_);
    while (!stopping_ && !watcher.woken) {
      if (watcher.changed.WaitWithDeadline(&watch_mu_, until)) break;  // Timed out.
    }
  }
  absl::MutexLock lock(&watch_mu_);
  watchers_.erase(&watcher);
}

HttpResponse RestApi::Handle(const HttpRequest& request) {
  std::string path = request.path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const char* content_type = absl::StartsWith(path, kSimPrefix) ? kJson : kYangJson;
  auto guarded = [&](auto&& serve) -> HttpResponse {
    try {
      return serve();
    } catch (const RequestError& e) {
      return Error(e.status, e.tag, e.message, content_type);
    } catch (const json::exception& e) {
      return Error(400, "invalid-value", e.what(), content_type);
    }
  };
  if (absl::StartsWith(path, kSimPrefix)) {
    model_->CountSimRequest();
    return guarded([&] { return Simulation(request, path.substr(kSimPrefix.size())); });
  }
  if (!absl::StartsWith(path, "/api/")) {
    return Error(404, "invalid-value", absl::StrCat("Unknown resource: ", path));
  }
  model_->CountRestRequest();
  HttpResponse response = guarded([&] { return Api(request, path); });
  if (const absl::Duration latency = model_->faults().latency; latency > absl::ZeroDuration()) {
    wait_(latency);
  }
  return response;
}

bool RestApi::Authorized(absl::string_view header) const {
  header = absl::StripAsciiWhitespace(header);
  if (header.size() < 6 || !absl::EqualsIgnoreCase(header.substr(0, 6), "Basic ")) return false;
  std::string decoded;
  if (!absl::Base64Unescape(absl::StripAsciiWhitespace(header.substr(6)), &decoded)) return false;
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  return decoded.substr(0, colon) == options_.user &&
         decoded.substr(colon + 1) == options_.password;
}

void RestApi::WaitUntil(absl::Time settled_at) {
  if (const absl::Duration left = settled_at - clock_->Now(); left > absl::ZeroDuration()) {
    wait_(left);
  }
}

// --- /api/data --------------------------------------------------------------------------------

HttpResponse RestApi::Api(const HttpRequest& request, absl::string_view path) {
  if (!Authorized(request.authorization)) {
    HttpResponse response = Error(401, "access-denied", "Authentication required");
    response.headers.emplace_back("WWW-Authenticate", "Basic realm=\"Polatis\"");
    return response;
  }
  if (model_->TakeDenial()) return Error(500, "operation-failed", "Injected fault");

  const std::string& method = request.method;
  absl::string_view resource = path;
  if (!absl::ConsumePrefix(&resource, kDataPrefix)) {
    return Error(404, "invalid-value", absl::StrCat("Unknown resource: ", path));
  }
  if (resource == "optical-switch:cross-connects") {
    if (method == "GET") return GetCrossConnects();
    if (method == "DELETE") {
      absl::StatusOr<ChangeResult> result = model_->DisconnectAll();
      return result.ok() ? NoContent() : FromStatus(result.status());
    }
    if (method == "PATCH") return PatchCrossConnects(ParseBody(request.body));
    return MethodNotAllowed(method, "GET, PATCH, DELETE");
  }
  absl::string_view key = resource;
  if (absl::ConsumePrefix(&key, "optical-switch:cross-connects/") &&
      absl::ConsumePrefix(&key, list_name_) && absl::ConsumePrefix(&key, "=")) {
    const int ingress = PathNumber(key, "ingress");
    if (!model_->size().IsIngress(ingress)) {
      return Error(400, "invalid-value", absl::StrCat("Invalid OXC port: ", ingress));
    }
    if (method == "GET") return GetPair(ingress);
    if (method == "PUT") return PutPair(ingress, ParseBody(request.body));
    if (method == "DELETE") return DeletePair(ingress);
    return MethodNotAllowed(method, "GET, PUT, DELETE");
  }
  if (resource == "optical-switch:port-config") {
    if (method == "GET") return GetPortConfig();
    if (method == "PATCH") return PatchPortConfig(ParseBody(request.body));
    return MethodNotAllowed(method, "GET, PATCH");
  }
  if (resource == "optical-switch:opm-power") {
    if (method == "GET") return GetOpmPower();
    return MethodNotAllowed(method, "GET");
  }
  if (resource == "optical-switch:product-information") {
    if (method == "GET") return GetProductInformation();
    return MethodNotAllowed(method, "GET");
  }
  return Error(404, "invalid-value", absl::StrCat("Unknown resource: ", path));
}

HttpResponse RestApi::GetCrossConnects() {
  json pairs = json::array();
  for (const CrossConnect& pair : model_->CrossConnects()) pairs.push_back(PairJson(pair));
  // RFC 7951: an empty list is left out, so no cross-connects is an empty container.
  json container = json::object();
  if (!pairs.empty()) container[list_name_] = pairs;
  return Json(200, {{"optical-switch:cross-connects", container}});
}

HttpResponse RestApi::GetPair(int ingress) {
  std::optional<int> egress = model_->EgressOf(ingress);
  if (!egress) {
    return Error(404, "data-missing", absl::StrCat("No cross-connect on ingress ", ingress));
  }
  return Json(200,
              {{absl::StrCat(kModule, list_name_), json::array({PairJson({ingress, *egress})})}});
}

HttpResponse RestApi::PutPair(int ingress, const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {list_name_});
  const json* list = Member(body, list_name_);
  if (list == nullptr || !list->is_array() || list->size() != 1) {
    Refuse(400, "invalid-value",
           absl::StrCat("body must be {\"", list_name_, "\":[{\"ingress\":I,\"egress\":E}]}"));
  }
  const json& pair = list->at(0);
  OnlyMembers(pair, {"ingress", "egress"});
  const int64_t body_ingress = Integer(pair, "ingress");
  const int64_t egress = Integer(pair, "egress");
  if (body_ingress != ingress) {
    Refuse(400, "invalid-value",
           absl::StrCat("ingress ", body_ingress, " in the body differs from ", ingress,
                        " in the path"));
  }
  if (!model_->size().IsEgress(egress)) {
    return Error(400, "invalid-value", absl::StrCat("Invalid OXC port: ", egress));
  }
  absl::StatusOr<ChangeResult> result =
      model_->Connect({{ingress, static_cast<int>(egress)}}, ConnectMode::kReplace);
  if (!result.ok()) return FromStatus(result.status());
  WaitUntil(result->settled_at);
  if (result->created > 0) {
    HttpResponse response;
    response.status = 201;
    return response;
  }
  return NoContent();
}

HttpResponse RestApi::DeletePair(int ingress) {
  absl::StatusOr<ChangeResult> result = model_->Disconnect({ingress});
  if (!result.ok()) return FromStatus(result.status());
  if (result->changed == 0) {
    return Error(404, "data-missing", absl::StrCat("No cross-connect on ingress ", ingress));
  }
  return NoContent();
}

HttpResponse RestApi::PatchCrossConnects(const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {"cross-connects"});
  const json* container = Member(body, "cross-connects");
  if (container == nullptr || !container->is_object()) {
    Refuse(400, "invalid-value", "body must be {\"optical-switch:cross-connects\":{...}}");
  }
  OnlyMembers(*container, {list_name_});
  std::vector<CrossConnect> pairs;
  if (const json* list = Member(*container, list_name_)) {
    if (!list->is_array())
      Refuse(400, "invalid-value", absl::StrCat("'", list_name_, "' must be a list"));
    for (const json& pair : *list) {
      OnlyMembers(pair, {"ingress", "egress"});
      const int64_t ingress = Integer(pair, "ingress");
      const int64_t egress = Integer(pair, "egress");
      for (int64_t port : {ingress, egress}) {
        if (!model_->size().IsPort(port)) {
          return Error(400, "invalid-value", absl::StrCat("Invalid OXC port: ", port));
        }
      }
      pairs.push_back({static_cast<int>(ingress), static_cast<int>(egress)});
    }
  }
  absl::StatusOr<ChangeResult> result = model_->Connect(pairs, ConnectMode::kReplace);
  if (!result.ok()) return FromStatus(result.status());
  WaitUntil(result->settled_at);
  return NoContent();
}

HttpResponse RestApi::GetPortConfig() {
  json ports = json::array();
  for (const PortReading& reading : model_->ReadAllPorts(/*power=*/false)) {
    ports.push_back({{"port-id", reading.port},
                     {"status", std::string(PortStatusName(reading.status))},
                     {"label", ""},
                     {"peer-port", 0}});
  }
  return Json(200, {{"optical-switch:port-config", {{"port", ports}}}});
}

HttpResponse RestApi::PatchPortConfig(const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {"port-config"});
  const json* container = Member(body, "port-config");
  if (container == nullptr || !container->is_object()) {
    Refuse(400, "invalid-value", "body must be {\"optical-switch:port-config\":{...}}");
  }
  OnlyMembers(*container, {"port"});
  std::vector<std::pair<int, bool>> shutters;
  if (const json* list = Member(*container, "port")) {
    if (!list->is_array()) Refuse(400, "invalid-value", "'port' must be a list");
    for (const json& port : *list) {
      OnlyMembers(port, {"port-id", "status", "label", "peer-port"});
      const int64_t id = Integer(port, "port-id");
      if (!model_->size().IsPort(id)) {
        return Error(400, "invalid-value", absl::StrCat("Invalid OXC port: ", id));
      }
      // The emulator keeps no labels or peers: accept what GET shows, refuse anything else
      // rather than drop it silently.
      if (const json* label = Member(port, "label"); label != nullptr && *label != "") {
        Refuse(400, "invalid-value", "the emulator does not support port labels");
      }
      if (const json* peer = Member(port, "peer-port"); peer != nullptr && *peer != 0) {
        Refuse(400, "invalid-value", "the emulator does not support peer ports");
      }
      const json* status = Member(port, "status");
      if (status == nullptr) continue;
      if (*status == "ENABLED" || *status == "DISABLED") {
        shutters.emplace_back(static_cast<int>(id), *status == "ENABLED");
      } else {
        Refuse(400, "invalid-value",
               absl::StrCat("status ", status->dump(), " of port ", id,
                            " must be ENABLED or DISABLED"));
      }
    }
  }
  absl::Status status = model_->SetShutters(shutters);
  return status.ok() ? NoContent() : FromStatus(status);
}

HttpResponse RestApi::GetOpmPower() {
  json ports = json::array();
  for (const PortReading& reading : model_->ReadAllPorts()) {
    ports.push_back({{"port-id", reading.port}, {"power", reading.power_dbm}});
  }
  return Json(200, {{"optical-switch:opm-power", {{"port", ports}}}});
}

HttpResponse RestApi::GetProductInformation() {
  const SwitchIdentity& id = options_.identity;
  return Json(200, {{"optical-switch:product-information",
                     {{"manufacturer", id.manufacturer},
                      {"model-name", id.model_name},
                      {"serial-number", id.serial_number},
                      {"software-version", id.software_version}}}});
}

// --- /sim/v1 ------------------------------------------------------------------------------------

HttpResponse RestApi::Simulation(const HttpRequest& request, absl::string_view path) {
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  const std::string& method = request.method;
  auto not_allowed = [&](absl::string_view allowed) {
    return MethodNotAllowed(method, allowed, kJson);
  };
  if (parts.size() == 2 && parts[0] == "signals") {
    const int ingress = PathNumber(parts[1], "port");
    if (method == "PUT") return PutSignal(ingress, ParseBody(request.body));
    if (method == "DELETE") return SimulationChange(model_->ClearSignal(ingress));
    return not_allowed("PUT, DELETE");
  }
  if (parts.size() == 2 && parts[0] == "light") {
    if (method == "GET") return GetLight(PathNumber(parts[1], "port"), request.query);
    return not_allowed("GET");
  }
  if (parts.size() == 1 && parts[0] == "light") {
    if (method == "GET") return GetLights(request.query);
    return not_allowed("GET");
  }
  if (parts.size() == 1 && parts[0] == "trunks") {
    if (method == "GET") return GetTrunks();
    return not_allowed("GET");
  }
  if (parts.size() == 2 && parts[0] == "trunks") {
    const int ingress = PathNumber(parts[1], "port");
    if (method == "PUT") return PutTrunk(ingress, ParseBody(request.body));
    if (method == "DELETE") return SimulationChange(model_->ClearTrunk(ingress));
    return not_allowed("PUT, DELETE");
  }
  if (parts.size() == 1 && parts[0] == "counters") {
    if (method == "GET") return GetCounters();
    return not_allowed("GET");
  }
  if (parts.size() == 1 && parts[0] == "changes") {
    if (method == "GET") return GetChanges();
    return not_allowed("GET");
  }
  if (parts.size() == 1 && parts[0] == "faults") {
    if (method == "PUT") return PutFaults(ParseBody(request.body));
    if (method == "DELETE") {
      model_->ClearFaults();
      return NoContent();
    }
    return not_allowed("PUT, DELETE");
  }
  if (parts.size() == 2 && parts[0] == "faults" && parts[1] == "drop-connections") {
    if (method != "POST") return not_allowed("POST");
    HttpResponse response = NoContent();
    response.drop_connections = true;
    return response;
  }
  if (parts.size() == 2 && parts[0] == "ports") {
    if (method == "PUT") return PutPort(PathNumber(parts[1], "port"), ParseBody(request.body));
    return not_allowed("PUT");
  }
  return Error(404, "invalid-value", absl::StrCat("Unknown resource: ", kSimPrefix, path), kJson);
}

HttpResponse RestApi::PutSignal(int ingress, const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {"name", "power_dbm"});
  if (!body.contains("name") || !body["name"].is_string()) {
    Refuse(400, "invalid-value", "'name' must be a string");
  }
  double power = 0.0;
  if (body.contains("power_dbm")) {
    if (!body["power_dbm"].is_number())
      Refuse(400, "invalid-value", "'power_dbm' must be a number");
    power = body["power_dbm"].get<double>();
  }
  return SimulationChange(model_->SetSignal(ingress, body["name"].get<std::string>(), power));
}

HttpResponse RestApi::PutTrunk(int ingress, const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {"from", "egress", "loss_db"});
  Trunk trunk;
  trunk.ingress = ingress;
  if (!body.contains("from") || !body["from"].is_string()) {
    Refuse(400, "invalid-value", "'from' must be a string HOST:PORT, the far emulator's REST port");
  }
  trunk.from = body["from"].get<std::string>();
  if (!body.contains("egress") || !body["egress"].is_number_integer() ||
      body["egress"].get<int64_t>() < 1 ||
      body["egress"].get<int64_t>() > std::numeric_limits<int>::max()) {
    Refuse(400, "invalid-value", "'egress' must be a positive integer, the far egress port");
  }
  trunk.egress = body["egress"].get<int>();
  if (body.contains("loss_db")) {
    if (!body["loss_db"].is_number()) Refuse(400, "invalid-value", "'loss_db' must be a number");
    trunk.loss_db = body["loss_db"].get<double>();
  }
  return SimulationChange(model_->SetTrunk(std::move(trunk)));
}

HttpResponse RestApi::GetTrunks() {
  json trunks = json::array();
  for (const Trunk& trunk : model_->Trunks()) {
    trunks.push_back({{"ingress", trunk.ingress},
                      {"from", trunk.from},
                      {"egress", trunk.egress},
                      {"loss_db", trunk.loss_db}});
  }
  return Json(200, {{"trunks", trunks}}, kJson);
}

HttpResponse RestApi::GetLight(int egress, absl::string_view query) {
  // `hops`: how many trunks the asker's light has crossed; set by a polatis-emu asking
  // across a trunk (docs/polatis-emulator.md), absent for everyone else.
  int hops = 0;
  for (absl::string_view parameter : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    absl::string_view value = parameter;
    if (!absl::ConsumePrefix(&value, "hops=")) {
      Refuse(400, "invalid-value",
             absl::StrCat("unknown query parameter '", parameter, "' (only hops=N)"));
    }
    if (!absl::SimpleAtoi(value, &hops) || hops < 0) {
      Refuse(400, "invalid-value", absl::StrCat("hops '", value, "' must be an integer >= 0"));
    }
  }
  absl::StatusOr<Light> light = model_->LightAt(egress, hops);
  if (!light.ok()) return Error(400, "invalid-value", light.status().message(), kJson);
  json signal = light->signal ? json(*light->signal) : json(nullptr);
  return Json(200, {{"egress", egress}, {"signal", signal}, {"power_dbm", light->power_dbm}},
              kJson);
}

HttpResponse RestApi::GetLights(absl::string_view query) {
  constexpr int64_t kMaxWaitMs = 60000;
  std::vector<int> egresses;
  std::optional<uint64_t> after;
  int64_t wait_ms = 1000;
  for (absl::string_view parameter : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    absl::string_view value = parameter;
    if (absl::ConsumePrefix(&value, "egress=") && egresses.empty() && !value.empty()) {
      for (absl::string_view item : absl::StrSplit(value, ',')) {
        int egress = 0;
        if (!absl::SimpleAtoi(item, &egress)) {
          Refuse(400, "invalid-value", absl::StrCat("egress '", item, "' is not a port number"));
        }
        egresses.push_back(egress);
      }
    } else if (absl::ConsumePrefix(&value, "after=") && !after) {
      uint64_t generation = 0;
      if (!absl::SimpleAtoi(value, &generation)) {
        Refuse(400, "invalid-value",
               absl::StrCat("after '", value, "' must be a light generation (an integer >= 0)"));
      }
      after = generation;
    } else if (absl::ConsumePrefix(&value, "wait_ms=")) {
      if (!absl::SimpleAtoi(value, &wait_ms) || wait_ms < 0 || wait_ms > kMaxWaitMs) {
        Refuse(400, "invalid-value",
               absl::StrCat("wait_ms '", value, "' must be an integer 0..", kMaxWaitMs));
      }
    } else {
      Refuse(400, "invalid-value",
             absl::StrCat("query parameter '", parameter,
                          "' is not one of egress=E1,E2,... (once), after=G, wait_ms=N"));
    }
  }
  if (egresses.empty()) {
    Refuse(400, "invalid-value",
           absl::StrCat("query '", query,
                        "' must name egress=E1,E2,... (after=G and wait_ms=N "
                        "are optional)"));
  }
  if (egresses.size() > static_cast<size_t>(model_->size().ports())) {
    Refuse(400, "invalid-value",
           absl::StrCat(egresses.size(), " egresses asked for; the switch has ",
                        model_->size().ports(), " ports"));
  }
  for (int egress : egresses) {
    if (!model_->size().IsEgress(egress)) {
      Refuse(400, "invalid-value",
             absl::StrCat("port ", egress, " is not an egress port (", model_->size().ingress + 1,
                          "..", model_->size().ports(), ")"));
    }
  }
  if (after) WaitForLightChange(egresses, *after, absl::Milliseconds(wait_ms));
  // Read before the light: a change after it makes the next long poll answer at once.
  const uint64_t generation = model_->light_generation();
  json lights = json::array();
  for (int egress : egresses) {
    absl::StatusOr<Light> light = model_->LightAt(egress);
    if (!light.ok()) return Error(400, "invalid-value", light.status().message(), kJson);
    json entry = {{"egress", egress},
                  {"signal", light->signal ? json(*light->signal) : json(nullptr)},
                  {"power_dbm", light->power_dbm}};
    if (light->via_trunk) entry["via_trunk"] = true;
    if (light->since != absl::InfinitePast()) entry["since_us"] = absl::ToUnixMicros(light->since);
    lights.push_back(std::move(entry));
  }
  return Json(200, {{"lights", lights}, {"generation", generation}}, kJson);
}

HttpResponse RestApi::GetChanges() {
  json changes = json::array();
  for (const ChangeRecord& change : model_->Changes()) {
    changes.push_back({{"at_unix_ms", absl::ToUnixMillis(change.at)},
                       {"origin", change.origin},
                       {"cross_connects", change.cross_connects},
                       {"shutters", change.shutters}});
  }
  return Json(200, {{"changes", std::move(changes)}});
}

HttpResponse RestApi::GetCounters() {
  const Counters c = model_->counters();
  return Json(200,
              {{"tl1_commands", c.tl1_commands},
               {"rest_requests", c.rest_requests},
               {"sim_requests", c.sim_requests},
               {"commands", c.commands},
               {"cross_connects_changed", c.cross_connects_changed},
               {"cross_connects", c.cross_connects},
               {"sessions", c.sessions}},
              kJson);
}

HttpResponse RestApi::PutFaults(const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {"deny_next", "latency_ms", "fail_bulk_after", "expire_sessions"});
  // Everything is checked before anything is applied.
  auto count = [&](const char* name) {
    const json& value = body[name];
    if (!value.is_number_integer() || value.get<int64_t>() < 0) {
      Refuse(400, "invalid-value", absl::StrCat("'", name, "' must be an integer >= 0"));
    }
    return value.get<int64_t>();
  };
  FaultUpdate update;
  if (body.contains("deny_next")) update.deny_next = count("deny_next");
  if (body.contains("latency_ms")) {
    const json& value = body["latency_ms"];
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
      Refuse(400, "invalid-value", "'latency_ms' must be a number >= 0");
    }
    update.latency = absl::Milliseconds(value.get<double>());
  }
  if (body.contains("fail_bulk_after")) {
    update.fail_bulk_after = body["fail_bulk_after"].is_null()
                                 ? std::optional<int64_t>()
                                 : std::optional<int64_t>(count("fail_bulk_after"));
  }
  if (body.contains("expire_sessions")) {
    if (!body["expire_sessions"].is_boolean()) {
      Refuse(400, "invalid-value", "'expire_sessions' must be true or false");
    }
    update.expire_sessions = body["expire_sessions"].get<bool>();
  }
  const FaultSettings now = model_->UpdateFaults(update);
  return Json(
      200,
      {{"deny_next", now.deny_next},
       {"latency_ms", absl::ToDoubleMilliseconds(now.latency)},
       {"fail_bulk_after", now.fail_bulk_after ? json(*now.fail_bulk_after) : json(nullptr)}},
      kJson);
}

HttpResponse RestApi::PutPort(int port, const json& body) {
  if (!body.is_object()) Refuse(400, "invalid-value", "body must be a JSON object");
  OnlyMembers(body, {"failed", "power_drop_db"});
  if (!model_->size().IsPort(port)) {
    return Error(400, "invalid-value", absl::StrCat("Invalid OXC port: ", port), kJson);
  }
  std::optional<bool> failed;
  std::optional<double> drop;
  if (body.contains("failed")) {
    if (!body["failed"].is_boolean())
      Refuse(400, "invalid-value", "'failed' must be true or false");
    failed = body["failed"].get<bool>();
  }
  if (body.contains("power_drop_db")) {
    const json& value = body["power_drop_db"];
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
      Refuse(400, "invalid-value", "'power_drop_db' must be a number >= 0");
    }
    drop = value.get<double>();
  }
  if (failed) {
    if (absl::Status s = model_->SetPortFailed(port, *failed); !s.ok()) return FromStatus(s);
  }
  if (drop) {
    if (absl::Status s = model_->SetPowerDrop(port, *drop); !s.ok()) return FromStatus(s);
  }
  return NoContent();
}

}  // namespace fleet::polatis_emu
