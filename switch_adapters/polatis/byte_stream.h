// The switch transport as a dependency: a connected byte stream and a way to dial one.
// TCP is the real implementation; tests can substitute their own.
#ifndef FLEET_SWITCH_ADAPTERS_POLATIS_BYTE_STREAM_H_
#define FLEET_SWITCH_ADAPTERS_POLATIS_BYTE_STREAM_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fleet::polatis {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Writes all of `bytes`; UNAVAILABLE if the peer closed, DEADLINE_EXCEEDED past `deadline`.
  virtual absl::Status Write(absl::string_view bytes, absl::Time deadline) = 0;
  // Returns at least one byte; UNAVAILABLE if the peer closed, DEADLINE_EXCEEDED past `deadline`.
  virtual absl::StatusOr<std::string> Read(absl::Time deadline) = 0;
};

class StreamDialer {
 public:
  virtual ~StreamDialer() = default;
  virtual absl::StatusOr<std::unique_ptr<ByteStream>> Dial(const std::string& host, uint16_t port,
                                                           absl::Time deadline) = 0;
};

// TCP (IPv4 or IPv6, by name or address), TCP_NODELAY on: TL1 commands are small.
std::unique_ptr<StreamDialer> NewTcpDialer();

}  // namespace fleet::polatis

#endif  // FLEET_SWITCH_ADAPTERS_POLATIS_BYTE_STREAM_H_
