#include "switch_adapters/polatis/rest_json.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fleet::polatis {
namespace {

using nlohmann::json;
using switch_adapters::CrossConnect;
using switch_adapters::PortPower;
using switch_adapters::PortState;
using switch_adapters::PortStatus;
using switch_adapters::SwitchIdentity;

// Everything here reads a body a switch sent, so nothing may throw: nlohmann's accessors that
// throw on a type mismatch (value(), get<T>() of the wrong type, at()) are only used after the
// type has been checked, and a body of another shape is INTERNAL (the switch did something else
// than asked), naming what was wrong.

// A value quoted in a message: bounded, and valid UTF-8 whatever the body held.
std::string Excerpt(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 200) text = absl::StrCat(text.substr(0, 200), "...");
  return text;
}

// The member `name` of `object`, or null when `object` is not an object or has none.
const json* Member(const json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

// The member `name` of `object` as a string: `fallback` when absent, nullopt when it is there
// but not a string.
std::optional<std::string> StringMember(const json& object, const char* name,
                                        const std::string& fallback) {
  const json* member = Member(object, name);
  if (member == nullptr) return fallback;
  if (!member->is_string()) return std::nullopt;
  return member->get<std::string>();
}

// A port number: a JSON integer 0..2^32-1, or nullopt.
std::optional<uint32_t> PortNumber(const json* value) {
  if (value == nullptr || !value->is_number_unsigned()) return std::nullopt;
  const uint64_t port = value->get<uint64_t>();
  if (port > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  return static_cast<uint32_t>(port);
}

// The list named by the first of `names` present in `body`'s member `container`, or at the
// top of `body` (some firmware answers without the container); empty when there is none, as
// RFC 7951 leaves an empty list out.
absl::StatusOr<const json*> List(const json& body, const char* container,
                                 std::initializer_list<const char*> names) {
  static const json* const kNone = new json(json::array());
  if (!body.is_object()) {
    return absl::InternalError(
        absl::StrCat("answered ", Excerpt(body), " where a JSON object was expected"));
  }
  const json* inner = &body;
  if (const json* member = Member(body, container)) {
    if (!member->is_object()) {
      return absl::InternalError(
          absl::StrCat("answered ", container, " as ", Excerpt(*member), ", not a container"));
    }
    inner = member;
  }
  for (const char* name : names) {
    const json* list = Member(*inner, name);
    if (list == nullptr) continue;
    if (!list->is_array()) {
      return absl::InternalError(
          absl::StrCat("answered list '", name, "' as ", Excerpt(*list), ", not a list"));
    }
    return list;
  }
  return kNone;
}

// The first NxM in a model name (N-VST-384x384-...): digits, 'x', digits. nullopt when there
// is none; INTERNAL when a side does not fit a port number.
absl::StatusOr<std::optional<std::pair<uint32_t, uint32_t>>> SizeInModel(absl::string_view model) {
  auto digits_from = [&](size_t at) {
    size_t end = at;
    while (end < model.size() && absl::ascii_isdigit(static_cast<unsigned char>(model[end]))) ++end;
    return end;
  };
  size_t at = 0;
  while (at < model.size()) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(model[at]))) {
      ++at;
      continue;
    }
    const size_t x = digits_from(at);
    if (x + 1 < model.size() && model[x] == 'x' &&
        absl::ascii_isdigit(static_cast<unsigned char>(model[x + 1]))) {
      const size_t end = digits_from(x + 1);
      uint32_t ingress = 0, egress = 0;
      if (!absl::SimpleAtoi(model.substr(at, x - at), &ingress) ||
          !absl::SimpleAtoi(model.substr(x + 1, end - x - 1), &egress)) {
        return absl::InternalError(absl::StrCat("model name '", model.substr(0, 200),
                                                "' gives a size too large for a switch"));
      }
      return std::make_optional(std::make_pair(ingress, egress));
    }
    at = x;  // No size starts inside this run of digits either.
  }
  return std::nullopt;
}

}  // namespace

std::optional<json> ParseRestBody(const std::string& body) {
  if (body.empty()) return json::object();
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

std::string RestErrorMessage(const std::string& body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json* errors = Member(parsed, "ietf-restconf:errors");
  const json* list = errors != nullptr ? Member(*errors, "error") : nullptr;
  if (list != nullptr && list->is_array() && !list->empty()) {
    const json& e = list->front();
    const std::string tag = StringMember(e, "error-tag", "").value_or("");
    const std::string message = StringMember(e, "error-message", "").value_or("");
    return tag.empty() ? message : absl::StrCat(tag, ": ", message);
  }
  return body.substr(0, 200);
}

absl::StatusCode RestErrorCode(long http_status) {
  switch (http_status) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kFailedPrecondition;
    case 500:
    case 502:
    case 503:
    case 504:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kUnknown;
  }
}

absl::StatusOr<RestCrossConnects> ParseRestCrossConnects(const json& body) {
  RestCrossConnects out;
  if (const json* inner = Member(body, "optical-switch:cross-connects")) {
    if (Member(*inner, "pairs") != nullptr) out.list_name = "pairs";
    if (Member(*inner, "pair") != nullptr) out.list_name = "pair";
  }
  absl::StatusOr<const json*> list = List(body, "optical-switch:cross-connects", {"pair", "pairs"});
  if (!list.ok()) return list.status();
  for (const json& pair : **list) {
    const std::optional<uint32_t> ingress = PortNumber(Member(pair, "ingress"));
    const std::optional<uint32_t> egress = PortNumber(Member(pair, "egress"));
    if (!ingress || !egress) {
      return absl::InternalError(absl::StrCat("malformed pair ", Excerpt(pair)));
    }
    out.pairs.push_back({*ingress, *egress});
  }
  std::sort(out.pairs.begin(), out.pairs.end());
  return out;
}

absl::StatusOr<std::vector<PortState>> ParseRestPortConfig(const json& body) {
  absl::StatusOr<const json*> list = List(body, "optical-switch:port-config", {"port"});
  if (!list.ok()) return list.status();
  std::vector<PortState> out;
  for (const json& port : **list) {
    const std::optional<uint32_t> id = PortNumber(Member(port, "port-id"));
    const std::optional<std::string> status = StringMember(port, "status", "ENABLED");
    if (!id || !status) {
      return absl::InternalError(absl::StrCat("malformed port-config entry ", Excerpt(port)));
    }
    PortState state;
    state.port = *id;
    state.status = *status == "FAILED"     ? PortStatus::kFailed
                   : *status == "DISABLED" ? PortStatus::kDisabled
                                           : PortStatus::kEnabled;
    out.push_back(state);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.port < b.port; });
  return out;
}

absl::StatusOr<std::vector<PortPower>> ParseRestOpmPower(const json& body,
                                                         const std::vector<uint32_t>& ports) {
  absl::StatusOr<const json*> list = List(body, "optical-switch:opm-power", {"port"});
  if (!list.ok()) return list.status();
  std::vector<PortPower> out;
  for (const json& port : **list) {
    const std::optional<uint32_t> id = PortNumber(Member(port, "port-id"));
    const json* dbm = Member(port, "power");
    if (!id || (dbm != nullptr && !dbm->is_number())) {
      return absl::InternalError(absl::StrCat("malformed opm-power entry ", Excerpt(port)));
    }
    PortPower power;
    power.port = *id;
    if (dbm != nullptr) power.dbm = dbm->get<double>();
    if (ports.empty() || std::find(ports.begin(), ports.end(), power.port) != ports.end()) {
      out.push_back(power);
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.port < b.port; });
  return out;
}

absl::StatusOr<SwitchIdentity> ParseRestProductInformation(const json& body) {
  const json* info = Member(body, "optical-switch:product-information");
  if (info == nullptr) info = &body;
  if (!info->is_object()) {
    return absl::InternalError(
        absl::StrCat("answered product-information as ", Excerpt(*info), ", not a container"));
  }
  SwitchIdentity id;
  const std::pair<const char*, std::string*> fields[] = {
      {"manufacturer", &id.vendor},
      {"model-name", &id.model},
      {"serial-number", &id.serial},
      {"software-version", &id.software_version}};
  for (const auto& [name, field] : fields) {
    std::optional<std::string> value = StringMember(*info, name, "");
    if (!value) {
      return absl::InternalError(absl::StrCat("answered product-information '", name, "' as ",
                                              Excerpt(*Member(*info, name)), ", not a string"));
    }
    *field = *std::move(value);
  }
  absl::StatusOr<std::optional<std::pair<uint32_t, uint32_t>>> size = SizeInModel(id.model);
  if (!size.ok()) return size.status();
  if (*size) std::tie(id.ingress_ports, id.egress_ports) = **size;
  return id;
}

size_t RestPortCount(const json& body) {
  absl::StatusOr<const json*> list = List(body, "optical-switch:port-config", {"port"});
  return list.ok() ? (*list)->size() : 0;
}

}  // namespace fleet::polatis
