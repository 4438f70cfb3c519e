#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "switch_adapters/polatis/polatis_switch.h"
#include "tests/integration/subprocess.h"

namespace fleet::polatis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Write(const std::string& text) {
  const std::string path = fleet::testing::FreshDirectory("creds") + "/credentials.yaml";
  std::ofstream(path) << text;
  return path;
}

TEST(CredentialsTest, ReadsEverySwitch) {
  absl::StatusOr<std::map<std::string, Credentials>> creds = ReadCredentialsFile(Write(
      "switches:\n  ocs1: {user: admin, password: root}\n  ocs2: {user: ops, password: s3cret}\n"));
  ASSERT_TRUE(creds.ok()) << creds.status();
  ASSERT_EQ(creds->size(), 2u);
  EXPECT_EQ(creds->at("ocs2").user, "ops");
  EXPECT_EQ(creds->at("ocs2").password, "s3cret");
}

TEST(CredentialsTest, ErrorsNameTheFileButNeverThePassword) {
  EXPECT_EQ(ReadCredentialsFile("/nonexistent/creds.yaml").status().code(),
            absl::StatusCode::kNotFound);
  absl::Status missing = ReadCredentialsFile(Write("switches:\n  ocs1: {user: admin}\n")).status();
  EXPECT_THAT(std::string(missing.message()), HasSubstr("switch ocs1 needs 'user' and 'password'"));
  absl::Status broken =
      ReadCredentialsFile(Write("switches:\n  ocs1: {user: admin, password: hunter2\n")).status();
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(broken.message()), Not(HasSubstr("hunter2")));
  EXPECT_THAT(std::string(ReadCredentialsFile(Write("ocs1: x\n")).status().message()),
              HasSubstr("expected 'switches:'"));
}

}  // namespace
}  // namespace fleet::polatis
