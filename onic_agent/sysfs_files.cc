#include "onic_agent/sysfs_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"

namespace fleet::onic_agent {
namespace {

absl::Status PathError(int error, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path));
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Larger than any sysfs text attribute the backend reads (sysfs attributes are one page).
constexpr size_t kMaxAttributeSize = 64 * 1024;

}  // namespace

absl::StatusOr<std::vector<std::string>> PosixSysfsFiles::ListDir(const std::string& path) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return PathError(errno, "opendir", path);
  std::vector<std::string> names;
  errno = 0;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  const int error = errno;
  closedir(dir);
  if (error != 0) return PathError(error, "readdir", path);
  std::sort(names.begin(), names.end());
  return names;
}

bool PosixSysfsFiles::Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> PosixSysfsFiles::ReadFile(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return PathError(errno, "open", path);
  std::string out;
  char buf[4096];
  while (out.size() < kMaxAttributeSize) {
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathError(errno, "read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::StatusOr<std::string> PosixSysfsFiles::ReadAt(const std::string& path, uint64_t offset,
                                                    size_t size) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return PathError(errno, "open", path);
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n =
        pread(fd.get(), out.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PathError(errno, "pread", path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

absl::Status PosixSysfsFiles::WriteAt(const std::string& path, uint64_t offset,
                                      absl::string_view data) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return PathError(errno, "open", path);
  ssize_t n;
  do {
    n = pwrite(fd.get(), data.data(), data.size(), static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PathError(errno, "pwrite", path);
  if (static_cast<size_t>(n) != data.size()) {
    return absl::UnavailableError(absl::StrCat("short pwrite to ", path, " at offset ", offset,
                                               ": ", n, " of ", data.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status PosixSysfsFiles::WriteFile(const std::string& path, absl::string_view data) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (fd.get() < 0) return PathError(errno, "open", path);
  ssize_t n;
  do {
    n = write(fd.get(), data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PathError(errno, "write", path);
  if (static_cast<size_t>(n) != data.size()) {
    return absl::UnavailableError(
        absl::StrCat("short write to ", path, ": ", n, " of ", data.size(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace fleet::onic_agent
