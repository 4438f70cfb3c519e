#include "fleet/v1/names.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace fleet::v1 {
namespace {

// The shared prefix of an enum's value names: "DEVICE_KIND_" from "DEVICE_KIND_UNSPECIFIED".
std::string Prefix(const google::protobuf::EnumDescriptor* descriptor) {
  const std::string& first = descriptor->value(0)->name();
  constexpr absl::string_view kUnspecified = "UNSPECIFIED";
  if (absl::EndsWith(first, kUnspecified))
    return first.substr(0, first.size() - kUnspecified.size());
  return "";
}

std::string Text(const std::string& prefix, const std::string& value_name) {
  std::string text = absl::AsciiStrToLower(value_name.substr(prefix.size()));
  absl::StrReplaceAll({{"_", "-"}}, &text);
  return text;
}

}  // namespace

std::string EnumText(const google::protobuf::EnumDescriptor* descriptor, int value) {
  const google::protobuf::EnumValueDescriptor* v = descriptor->FindValueByNumber(value);
  if (v == nullptr || v->index() == 0) return "";
  return Text(Prefix(descriptor), v->name());
}

std::optional<int> ParseEnumText(const google::protobuf::EnumDescriptor* descriptor,
                                 absl::string_view text) {
  const std::string prefix = Prefix(descriptor);
  std::string wanted = absl::AsciiStrToLower(text);
  absl::StrReplaceAll({{"_", "-"}}, &wanted);
  for (int i = 1; i < descriptor->value_count(); ++i) {
    if (Text(prefix, descriptor->value(i)->name()) == wanted) return descriptor->value(i)->number();
  }
  return std::nullopt;
}

std::vector<std::string> EnumTexts(const google::protobuf::EnumDescriptor* descriptor) {
  std::vector<std::string> out;
  const std::string prefix = Prefix(descriptor);
  for (int i = 1; i < descriptor->value_count(); ++i) {
    out.push_back(Text(prefix, descriptor->value(i)->name()));
  }
  return out;
}

std::string PortName(absl::string_view owner, int64_t port) {
  return absl::StrCat(owner, "/", port);
}
std::string PortName(const OnicPortRef& ref) { return PortName(ref.onic(), ref.port()); }
std::string PortName(const SwitchPortRef& ref) { return PortName(ref.switch_id(), ref.port()); }

}  // namespace fleet::v1
