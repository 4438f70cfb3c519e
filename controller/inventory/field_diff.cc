#include "controller/inventory/field_diff.h"
#include "controller/inventory/inventory.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/hex_id.h"

namespace fleet::inventory {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The inventory file's key for a proto field, where the two differ.
std::string FileName(const FieldDescriptor& field) {
  if (field.name() == "management_port") return "port";
  if (field.name() == "credentials_ref") return "credentials";
  if (field.name() == "trunk_reserved_ports") return "trunk_reserved";
  if (field.name() == "pcie_address") return "pcie";
  return field.name();
}

// SWITCH_PROTOCOL_TL1 -> tl1: the enum's own name taken off its values.
std::string EnumText(const google::protobuf::EnumValueDescriptor& value) {
  std::string prefix = value.type()->name();
  std::string upper;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (i > 0 && absl::ascii_isupper(prefix[i])) upper += '_';
    upper += absl::ascii_toupper(prefix[i]);
  }
  return absl::AsciiStrToLower(absl::StripPrefix(value.name(), upper + "_"));
}

std::string MessageText(const Message& m) {
  if (const auto* ref = dynamic_cast<const v1::SwitchPortRef*>(&m)) {
    return ref->switch_id().empty() && ref->port() == 0
               ? std::string()
               : absl::StrCat(ref->switch_id(), "/", ref->port());
  }
  return m.ShortDebugString();
}

std::string ScalarText(const Message& m, const FieldDescriptor& f, int index) {
  const Reflection& r = *m.GetReflection();
  const bool repeated = f.is_repeated();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return (repeated ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumText(repeated ? *r.GetRepeatedEnum(m, &f, index) : *r.GetEnum(m, &f));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageText(repeated ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
    default:
      break;
  }
  // A PCIe identity as the inventory file writes it: ids and the DSN in hex.
  if (f.containing_type() == v1::PcieIdentity::descriptor()) {
    const uint64_t value =
        f.cpp_type() == FieldDescriptor::CPPTYPE_UINT64 ? r.GetUInt64(m, &f) : r.GetUInt32(m, &f);
    if (value == 0) return "";
    return f.name() == "dsn" ? DsnText(value) : PcieIdText(static_cast<uint32_t>(value));
  }
  // The integer and floating types: protobuf's own text of the one value.
  std::string text;
  google::protobuf::TextFormat::PrintFieldValueToString(m, &f, repeated ? index : -1, &text);
  return text;
}

std::string FieldText(const Message& m, const FieldDescriptor& f) {
  const Reflection& r = *m.GetReflection();
  if (!f.is_repeated()) return ScalarText(m, f, -1);
  const int n = r.FieldSize(m, &f);
  if (f.cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {  // Ports.
    std::vector<uint32_t> numbers;
    for (int i = 0; i < n; ++i) numbers.push_back(r.GetRepeatedUInt32(m, &f, i));
    std::sort(numbers.begin(), numbers.end());
    return PortRanges(numbers);
  }
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back(ScalarText(m, f, i));
  return absl::StrJoin(items, ", ");
}

std::string OrNone(std::string text) { return text.empty() ? "(none)" : text; }

void Diff(const Message& from, const Message& to, const std::string& path,
          std::vector<v1::FieldChange>* out) {
  const google::protobuf::Descriptor& d = *to.GetDescriptor();
  const Reflection& rf = *from.GetReflection();
  const Reflection& rt = *to.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    const std::string name = path + FileName(f);
    const bool leaf_message =
        f.message_type() != nullptr && f.message_type() != v1::SwitchPortRef::descriptor();
    if (leaf_message && f.is_repeated() && rf.FieldSize(from, &f) == rt.FieldSize(to, &f)) {
      for (int k = 0; k < rt.FieldSize(to, &f); ++k) {
        Diff(rf.GetRepeatedMessage(from, &f, k), rt.GetRepeatedMessage(to, &f, k),
             absl::StrCat(name, "[", k + 1, "]."), out);
      }
      continue;
    }
    if (leaf_message && !f.is_repeated()) {
      Diff(rf.GetMessage(from, &f), rt.GetMessage(to, &f), name + ".", out);
      continue;
    }
    std::string before = FieldText(from, f);
    std::string after = FieldText(to, f);
    if (before == after) continue;
    if (f.name() == "management_port") {  // 0 is the protocol's default port.
      for (std::string* port : {&before, &after}) {
        if (*port == "0") *port = "(default)";
      }
    }
    v1::FieldChange& change = out->emplace_back();
    change.set_field(name);
    change.set_from(OrNone(std::move(before)));
    change.set_to(OrNone(std::move(after)));
  }
}

}  // namespace

std::vector<v1::FieldChange> DiffFields(const Message& from, const Message& to) {
  std::vector<v1::FieldChange> out;
  Diff(from, to, "", &out);
  return out;
}

std::string DescribeFieldChanges(const std::vector<v1::FieldChange>& changes) {
  std::vector<std::string> parts;
  for (const v1::FieldChange& c : changes) {
    parts.push_back(absl::StrCat(c.field(), " ", c.from(), " -> ", c.to()));
  }
  return absl::StrJoin(parts, ", ");
}

bool IsSwitchConnectionField(const std::string& field) {
  return field == "address" || field == "port" || field == "protocol" || field == "credentials" ||
         field == "ca_bundle" || field == "insecure_http";
}

}  // namespace fleet::inventory
