#include "common/build_id.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace fleet {
namespace {

// What binutils reads from this test's own file: the same ID, found in memory.
TEST(BuildIdTest, IsTheIdReadelfReadsFromTheExecutable) {
  const std::string id = ExecutableBuildId();
  ASSERT_FALSE(id.empty()) << "Debian's toolchain links every executable with --build-id";
  const std::string command = "readelf -n /proc/" + std::to_string(getpid()) +
                              "/exe 2>/dev/null | sed -n 's/.*Build ID: //p'";
  FILE* readelf = popen(command.c_str(), "r");
  ASSERT_NE(readelf, nullptr);
  char line[256] = {};
  const bool read = std::fgets(line, sizeof(line), readelf) != nullptr;
  pclose(readelf);
  if (!read) GTEST_SKIP() << "readelf (binutils) is not installed";
  EXPECT_EQ(id + "\n", line);
}

}  // namespace
}  // namespace fleet
