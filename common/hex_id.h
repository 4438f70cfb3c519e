// Hex identifiers as operators write them: PCIe vendor and device ids (0x10de or 10de) and
// Device Serial Numbers (0x48b02d0300a1b2c3, or byte by byte as lspci prints them,
// 48-b0-2d-03-00-a1-b2-c3, also with ':'). One parser for the inventory file and the agent's
// command line.
#ifndef FLEET_COMMON_HEX_ID_H_
#define FLEET_COMMON_HEX_ID_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleet {

// `text` as a non-zero hex number of at most `bits` bits (16 or 64), with or without 0x, no
// sign; with 64 bits also as eight two-digit bytes joined by '-' or ':'. INVALID_ARGUMENT
// "<what> '<text>' is not a non-zero hex number of at most <bits> bits (e.g. ...)" otherwise.
absl::StatusOr<uint64_t> ParseHexId(absl::string_view text, int bits, absl::string_view what);

// A 16-bit PCIe vendor or device id as lspci prints it and ParseHexId reads it back: four
// lowercase hex digits, 10de.
std::string PcieIdText(uint32_t id);

// A Device Serial Number byte by byte, most significant first, as lspci prints it and ParseHexId
// reads it back: 48-b0-2d-03-00-a1-b2-c3.
std::string DsnText(uint64_t dsn);

}  // namespace fleet

#endif  // FLEET_COMMON_HEX_ID_H_
