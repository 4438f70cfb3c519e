#include <curl/curl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/http_client.h"

namespace fleet {
namespace {

size_t Collect(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

class CurlHttpClient : public HttpClient {
 public:
  explicit CurlHttpClient(const CurlHttpClientOptions& options)
      : options_(options), curl_(curl_easy_init()) {
    headers_ = curl_slist_append(headers_, ("Content-Type: " + options.content_type).c_str());
    headers_ = curl_slist_append(headers_, ("Accept: " + options.content_type).c_str());
  }
  ~CurlHttpClient() override {
    curl_slist_free_all(headers_);
    if (curl_) curl_easy_cleanup(curl_);
  }

  absl::StatusOr<HttpResponse> Send(const std::string& method, const std::string& path,
                                    const std::string& body) override {
    if (curl_ == nullptr) return absl::InternalError("libcurl could not be initialized");
    {
      absl::MutexLock lock(&socket_mu_);
      if (aborted_) return absl::UnavailableError(absl::StrCat(method, " ", path, ": aborted"));
    }
    const std::string url = options_.base_url + path;
    const bool tls = absl::StartsWithIgnoreCase(url, "https://");
    if (!options_.user.empty() && !tls && !options_.basic_auth_over_http) {
      return absl::FailedPreconditionError(
          absl::StrCat(method, " ", url, ": refusing to send credentials over plain HTTP"));
    }
    ++requests_;
    HttpResponse response;
    // Options are set afresh for every request; the handle keeps the connection cache.
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    // Only HTTP(S), and no redirects: a Location cannot carry credentials elsewhere.
    curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
    if (tls) {
      curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 1L);
      curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 2L);
      if (!options_.ca_file.empty())
        curl_easy_setopt(curl_, CURLOPT_CAINFO, options_.ca_file.c_str());
    }
    // curl's own reason ("SSL certificate problem: ..."), more telling than its code's text.
    char reason[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, reason);
    if (!options_.user.empty()) {
      curl_easy_setopt(curl_, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(curl_, CURLOPT_USERNAME, options_.user.c_str());
      curl_easy_setopt(curl_, CURLOPT_PASSWORD, options_.password.c_str());
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
    if (method == "GET" || method == "DELETE") {
      // HTTPGET resets a previous request's body; DELETE then renames the verb.
      curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
      curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method == "GET" ? nullptr : "DELETE");
    } else {
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
      curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
    // The connection's socket is known, so Abort can shut it down under a blocked transfer.
    curl_easy_setopt(curl_, CURLOPT_OPENSOCKETFUNCTION, OpenSocket);
    curl_easy_setopt(curl_, CURLOPT_OPENSOCKETDATA, this);
    curl_easy_setopt(curl_, CURLOPT_CLOSESOCKETFUNCTION, CloseSocket);
    curl_easy_setopt(curl_, CURLOPT_CLOSESOCKETDATA, this);
    CURLcode rc = curl_easy_perform(curl_);
    curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, nullptr);  // `reason` goes out of scope.
    if (rc != CURLE_OK) {
      return absl::UnavailableError(absl::StrCat(
          method, " ", url, ": ", reason[0] != '\0' ? reason : curl_easy_strerror(rc)));
    }
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
  }

  int requests_sent() const override { return requests_; }

  void Abort() override {
    absl::MutexLock lock(&socket_mu_);
    aborted_ = true;
    if (socket_ >= 0) shutdown(socket_, SHUT_RDWR);
  }

 private:
  static curl_socket_t OpenSocket(void* self, curlsocktype, curl_sockaddr* address) {
    auto* client = static_cast<CurlHttpClient*>(self);
    absl::MutexLock lock(&client->socket_mu_);
    if (client->aborted_) return CURL_SOCKET_BAD;
    client->socket_ = socket(address->family, address->socktype, address->protocol);
    return client->socket_;
  }
  static int CloseSocket(void* self, curl_socket_t socket) {
    auto* client = static_cast<CurlHttpClient*>(self);
    // Closed under the mutex: Abort never shuts down a number the kernel has given out again.
    absl::MutexLock lock(&client->socket_mu_);
    if (client->socket_ == socket) client->socket_ = -1;
    return close(socket);
  }

  const CurlHttpClientOptions options_;
  CURL* curl_;
  curl_slist* headers_ = nullptr;
  int requests_ = 0;
  absl::Mutex socket_mu_;
  curl_socket_t socket_ ABSL_GUARDED_BY(socket_mu_) = -1;  // The connection's, while open.
  bool aborted_ ABSL_GUARDED_BY(socket_mu_) = false;
};

}  // namespace

std::unique_ptr<HttpClient> NewCurlHttpClient(const CurlHttpClientOptions& options) {
  return std::make_unique<CurlHttpClient>(options);
}

}  // namespace fleet
