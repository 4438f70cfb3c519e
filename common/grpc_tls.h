// How FLEET's gRPC clients (fleetctl, the O-NIC agent, tests and benchmarks) dial fleetd:
// mutual TLS with a certificate of their own, verifying fleetd's certificate against the
// site CA; or plaintext, only when asked for by name.
#ifndef FLEET_COMMON_GRPC_TLS_H_
#define FLEET_COMMON_GRPC_TLS_H_

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fleet {

// Paths of the PEM files a client presents and trusts.
struct ClientTlsFiles {
  std::string ca;         // The site CA bundle fleetd's certificate must chain to.
  std::string cert;       // The client's certificate (chain).
  std::string key;        // Its private key.
  bool insecure = false;  // Plaintext: no TLS, no identity (fleetd --insecure only).
};

// Credentials for a channel to fleetd. With `insecure`, plaintext (the files must be empty).
// Otherwise all three files must be given and readable: INVALID_ARGUMENT naming the missing
// one ("no client certificate: give --cert or FLEET_CERT ..." is the caller's to add), or
// NOT_FOUND "cannot read WHAT PATH", or INVALID_ARGUMENT "WHAT PATH is empty". The files are
// read once, now; their PEM is parsed by gRPC when the channel connects (a bad one fails the
// handshake: UNAVAILABLE).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const ClientTlsFiles& files);

}  // namespace fleet

#endif  // FLEET_COMMON_GRPC_TLS_H_
