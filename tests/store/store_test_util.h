// Helpers shared by the store tests: status matchers (Abseil 20220623 has none), a one-value
// query, a private temporary directory, and file reading for byte-for-byte comparisons.
#ifndef FLEET_TESTS_STORE_STORE_TEST_UTIL_H_
#define FLEET_TESTS_STORE_STORE_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "controller/store/sqlite.h"

namespace fleet::store::testing_util {

// Runs a one-column, one-row query and returns the column as text ("" on any failure, which
// the caller's expectation then reports).
inline std::string QueryText(Database& db, const std::string& sql) {
  absl::StatusOr<Statement> stmt = db.Prepare(sql);
  if (!stmt.ok()) {
    ADD_FAILURE() << sql << ": " << stmt.status();
    return "";
  }
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok() || !*row) {
    ADD_FAILURE() << sql << ": no row";
    return "";
  }
  return stmt->Text(0);
}

inline absl::Status ToStatus(const absl::Status& s) { return s; }
template <typename T>
absl::Status ToStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  absl::Status s = ToStatus(arg);
  if (!s.ok()) *result_listener << "status: " << s;
  return s.ok();
}

// StatusIs(code, message_matcher) for Status and StatusOr.
MATCHER_P2(StatusIs, code, message_matcher,
           "has code " + absl::StatusCodeToString(code) + " and a message that " +
               ::testing::DescribeMatcher<std::string>(message_matcher)) {
  absl::Status s = ToStatus(arg);
  *result_listener << "status: " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

#define FLEET_TEST_CONCAT_INNER_(a, b) a##b
#define FLEET_TEST_CONCAT_(a, b) FLEET_TEST_CONCAT_INNER_(a, b)

// ASSERT_OK_AND_ASSIGN(lhs, expr): asserts `expr` (a StatusOr) is OK and moves its value.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(FLEET_TEST_CONCAT_(statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr)             \
  auto statusor = (expr);                                           \
  ASSERT_TRUE(statusor.ok()) << #expr << ": " << statusor.status(); \
  lhs = std::move(statusor).value()

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::fleet::store::testing_util::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::fleet::store::testing_util::IsOk())

// A fresh directory under the test's temporary directory, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string base = ::testing::TempDir();
    if (base.empty() || base.back() != '/') base += '/';
    std::string pattern = base + "fleet_store_test.XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "" when `before` and `after` are the same bytes, else where they first differ (a whole file
// would be too long to print).
inline std::string ByteDifference(const std::string& before, const std::string& after) {
  if (before == after) return "";
  size_t i = 0;
  while (i < before.size() && i < after.size() && before[i] == after[i]) ++i;
  std::ostringstream out;
  out << "sizes " << before.size() << " and " << after.size() << ", first difference at byte " << i;
  if (i < before.size() && i < after.size()) {
    out << ": " << static_cast<int>(static_cast<unsigned char>(before[i])) << " became "
        << static_cast<int>(static_cast<unsigned char>(after[i]));
  }
  return out.str();
}

}  // namespace fleet::store::testing_util

#endif  // FLEET_TESTS_STORE_STORE_TEST_UTIL_H_
