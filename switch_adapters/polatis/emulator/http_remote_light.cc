#include "switch_adapters/polatis/emulator/http_remote_light.h"

#include <curl/curl.h>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace fleet::polatis_emu {
namespace {

// A light reading is a few dozen bytes; anything much longer is not one.
constexpr size_t kMaxAnswerBytes = 64 * 1024;

size_t AppendAnswer(char* data, size_t size, size_t count, void* answer) {
  std::string& text = *static_cast<std::string*>(answer);
  if (text.size() + size * count > kMaxAnswerBytes) return 0;  // curl fails the transfer
  text.append(data, size * count);
  return size * count;
}

// Reads {"egress":E,"signal":"NAME"|null,"power_dbm":P}, the far emulator's GET
// /sim/v1/light answer; for any other answer, the error it carries.
absl::StatusOr<Light> ParseAnswer(long status, const std::string& body, const std::string& url) {
  const nlohmann::json answer = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status != 200) {
    static const nlohmann::json::json_pointer kMessage(
        "/ietf-restconf:errors/error/0/error-message");
    std::string why = body.substr(0, 200);
    if (answer.contains(kMessage) && answer.at(kMessage).is_string()) {
      why = answer.at(kMessage).get<std::string>();
    }
    return absl::InvalidArgumentError(absl::StrCat("GET ", url, ": HTTP ", status, ": ", why));
  }
  if (!answer.is_object() || !answer.contains("signal") || !answer.contains("power_dbm") ||
      !(answer["signal"].is_string() || answer["signal"].is_null()) ||
      !answer["power_dbm"].is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GET ", url, ": not a light reading: ", body.substr(0, 200)));
  }
  if (answer["signal"].is_null()) return Light{};
  return Light{answer["signal"].get<std::string>(), answer["power_dbm"].get<double>()};
}

}  // namespace

HttpRemoteLight::HttpRemoteLight(absl::Duration timeout) : timeout_(timeout) {
  // Not thread-safe in every libcurl, and curl_easy_init would otherwise run it lazily from
  // whichever server thread fetches first.
  static absl::once_flag curl_once;
  absl::call_once(curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpRemoteLight::~HttpRemoteLight() {
  absl::MutexLock lock(&mu_);
  for (void* handle : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

absl::StatusOr<Light> HttpRemoteLight::Fetch(const std::string& from, int egress, int hops) {
  CURL* curl = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_handles_.empty()) {
      curl = static_cast<CURL*>(idle_handles_.back());
      idle_handles_.pop_back();
    }
  }
  if (curl == nullptr) curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("libcurl could not make a handle");

  const std::string url = absl::StrCat("http://", from, "/sim/v1/light/", egress, "?hops=", hops);
  const long timeout_ms = static_cast<long>(absl::ToInt64Milliseconds(timeout_));
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: threads
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  // Emulators talk to each other directly; an http_proxy set for the tests' environment
  // must not come between them.
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendAnswer);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  const CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  {
    absl::MutexLock lock(&mu_);
    idle_handles_.push_back(curl);
  }
  if (code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", curl_easy_strerror(code)));
  }
  return ParseAnswer(status, body, url);
}

}  // namespace fleet::polatis_emu
