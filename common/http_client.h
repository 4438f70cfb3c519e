// HTTP as a dependency of the REST adapter and of the emulated agents' light reads: one request
// at a time over a reused connection.
#ifndef FLEET_COMMON_HTTP_CLIENT_H_
#define FLEET_COMMON_HTTP_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fleet {

struct HttpResponse {
  long status = 0;
  std::string body;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // `path` is appended to the base URL. Transport failures, TLS failures (the message names
  // the URL and curl's reason) and timeouts are UNAVAILABLE; any HTTP status is returned as a
  // response. FAILED_PRECONDITION, nothing sent, for credentials the options keep off http://.
  virtual absl::StatusOr<HttpResponse> Send(const std::string& method, const std::string& path,
                                            const std::string& body) = 0;
  virtual int requests_sent() const = 0;
  // From any thread: the request under way, if any, ends now with UNAVAILABLE, and so does
  // every later one. For a client waiting in a long poll that its owner wants to stop.
  virtual void Abort() = 0;
};

struct CurlHttpClientOptions {
  std::string base_url;  // e.g. "https://192.0.2.10:8008"
  std::string user;      // Empty: no Authorization header.
  std::string password;
  // For https:// URLs, the server's certificate is always verified, its name included; this is
  // the PEM CA bundle it must chain to. Empty: the system's CAs.
  std::string ca_file;
  // The user and password go over plain http:// only with this set (an operator's explicit
  // choice, for labs); otherwise such a request is refused before anything is sent.
  bool basic_auth_over_http = false;
  std::string content_type = "application/yang-data+json";  // Also sent as `Accept`.
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(10);
};

// libcurl, one easy handle kept for the client's life so the connection is reused; HTTP
// Basic auth when a user is given; `Content-Type` and `Accept` from the options.
std::unique_ptr<HttpClient> NewCurlHttpClient(const CurlHttpClientOptions& options);

}  // namespace fleet

#endif  // FLEET_COMMON_HTTP_CLIENT_H_
