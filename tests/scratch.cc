#include "tests/scratch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace fleet::testing {
namespace {

// The directories made so far, by the test that made them ("" outside a test). Never
// destroyed, so a directory made or finished during the program's exit finds it alive.
class ScratchRegistry {
 public:
  static ScratchRegistry& Get() {
    static ScratchRegistry* const registry = new ScratchRegistry;
    return *registry;
  }

  void Add(const std::string& test, const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_[test].push_back(dir);
  }

  static std::string TestName(const ::testing::TestInfo* info) {
    return info == nullptr ? "" : absl::StrCat(info->test_suite_name(), ".", info->name());
  }

 private:
  // gtest owns (and deletes at exit) its listeners: it gets a forwarder, not the registry.
  class Forwarder : public ::testing::EmptyTestEventListener {
   public:
    // After the test's fixture is torn down and destroyed: its daemons are gone.
    void OnTestEnd(const ::testing::TestInfo& info) override {
      Get().Finish(TestName(&info), !info.result()->Failed());
    }
    void OnTestProgramEnd(const ::testing::UnitTest& unit_test) override {
      Get().Finish("", !unit_test.Failed());
    }
  };

  ScratchRegistry() {
    ::testing::UnitTest::GetInstance()->listeners().Append(new Forwarder);
    // A benchmark runs no tests, so its directories go at exit.
    std::atexit([] { Get().Finish("", !::testing::UnitTest::GetInstance()->Failed()); });
  }

  void Finish(const std::string& test, bool passed) {
    std::vector<std::string> dirs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = dirs_.find(test);
      if (it == dirs_.end()) return;
      dirs = std::move(it->second);
      dirs_.erase(it);
    }
    for (const std::string& dir : dirs) {
      if (passed) {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      } else {
        std::cerr << "kept for the post-mortem: " << dir << "\n";
      }
    }
  }

  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> dirs_;
};

// Made while the program starts, on one thread: gtest's listener list has no lock of its own.
[[maybe_unused]] const bool registered = (ScratchRegistry::Get(), true);

}  // namespace

std::string FreshDirectory(const std::string& name) {
  ScratchRegistry& registry = ScratchRegistry::Get();
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // A parameterised test's names hold '/': one level of directory per test keeps removal whole.
  const std::string leaf = absl::StrReplaceAll(
      absl::StrCat("fleet_", getpid(), "_", info ? info->test_suite_name() : "main", "_",
                   info ? info->name() : "run", "_", name),
      {{"/", "_"}});
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / leaf;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  registry.Add(ScratchRegistry::TestName(info), dir.string());
  return dir.string();
}

}  // namespace fleet::testing
