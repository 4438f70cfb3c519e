#include "common/grpc_tls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/scratch.h"

namespace fleet {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The files only need to be readable: gRPC parses the PEM when the channel connects.
class ClientCredentialsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    if (dir_.empty()) dir_ = fleet::testing::FreshDirectory("tls");
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  ClientTlsFiles AllThree() {
    return {Write("ca.pem", "-----BEGIN CERTIFICATE-----\n"),
            Write("client.pem", "-----BEGIN CERTIFICATE-----\n"),
            Write("client.key", "-----BEGIN PRIVATE KEY-----\n")};
  }
  std::string dir_;  // made on the first Write
};

TEST_F(ClientCredentialsTest, AllThreeFilesGiveTlsCredentials) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials(AllThree());
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  ASSERT_NE(*credentials, nullptr);
}

TEST_F(ClientCredentialsTest, InsecureGivesPlaintext) {
  ClientTlsFiles files;
  files.insecure = true;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientCredentials(files);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  ASSERT_NE(*credentials, nullptr);
}

TEST_F(ClientCredentialsTest, EachMissingFieldIsNamed) {
  struct Case {
    std::string ClientTlsFiles::*field;
    const char* expected;
  };
  for (const Case& c : {Case{&ClientTlsFiles::ca, "no CA bundle (ca) given"},
                        Case{&ClientTlsFiles::cert, "no client certificate (cert) given"},
                        Case{&ClientTlsFiles::key, "no client key (key) given"}}) {
    ClientTlsFiles files = AllThree();
    files.*c.field = "";
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ClientCredentials(files);
    ASSERT_FALSE(credentials.ok()) << c.expected;
    EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(credentials.status().message(), HasSubstr(c.expected));
  }
}

TEST_F(ClientCredentialsTest, NothingGivenNamesTheCaFirst) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientCredentials(ClientTlsFiles{});
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("no CA bundle (ca) given"));
  EXPECT_THAT(credentials.status().message(), HasSubstr("insecure"));
}

TEST_F(ClientCredentialsTest, UnreadableFileIsNotFoundNamingWhatAndPath) {
  struct Case {
    std::string ClientTlsFiles::*field;
    const char* what;
  };
  const std::string missing = absl::StrCat(::testing::TempDir(), "/grpc_tls_test_no_such_file");
  for (const Case& c :
       {Case{&ClientTlsFiles::ca, "CA bundle"}, Case{&ClientTlsFiles::cert, "client certificate"},
        Case{&ClientTlsFiles::key, "client key"}}) {
    ClientTlsFiles files = AllThree();
    files.*c.field = missing;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        ClientCredentials(files);
    ASSERT_FALSE(credentials.ok()) << c.what;
    EXPECT_EQ(credentials.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(credentials.status().message(),
                HasSubstr(absl::StrCat("cannot read ", c.what, " ", missing)));
  }
}

TEST_F(ClientCredentialsTest, DirectoryIsNotFound) {
  ClientTlsFiles files = AllThree();
  files.key = ::testing::TempDir();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientCredentials(files);
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(credentials.status().message(), HasSubstr("cannot read client key"));
}

TEST_F(ClientCredentialsTest, EmptyFileIsRefusedByName) {
  ClientTlsFiles files = AllThree();
  files.cert = Write("empty.pem", "");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientCredentials(files);
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(),
              HasSubstr(absl::StrCat("client certificate ", files.cert, " is empty")));
}

TEST_F(ClientCredentialsTest, InsecureWithFilesIsRefused) {
  ClientTlsFiles files = AllThree();
  files.insecure = true;
  files.ca = "";
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientCredentials(files);
  ASSERT_FALSE(credentials.ok());
  EXPECT_EQ(credentials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(credentials.status().message(), HasSubstr("insecure"));
  EXPECT_THAT(credentials.status().message(), HasSubstr(absl::StrCat("cert ", files.cert)));
  EXPECT_THAT(credentials.status().message(), HasSubstr(absl::StrCat("key ", files.key)));
  EXPECT_THAT(credentials.status().message(), Not(HasSubstr("ca ")));
}

}  // namespace
}  // namespace fleet
