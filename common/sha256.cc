#include "common/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

#include "absl/strings/escaping.h"

namespace fleet {

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  // Fails only when OpenSSL cannot allocate or has no SHA-256: nothing sensible to go on with.
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    std::abort();
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), size));
}

}  // namespace fleet
