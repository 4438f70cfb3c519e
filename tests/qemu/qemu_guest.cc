#include "tests/qemu/qemu_guest.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace fleet::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kQemu[] = "qemu-system-x86_64";
constexpr char kBusybox[] = "/bin/busybox";
constexpr char kReady[] = "FLEET-GUEST-READY";
// Ends a command's output, after a newline of its own: "\n@@FLEET-RC=<number>:<exit code>\n",
// where <number> is the one the host sent the command with ("<number> <command>\n").
constexpr char kExitMarker[] = "@@FLEET-RC=";
// What the guest loads before it can mount this host's files: virtio-pci and 9p over it.
constexpr char kGuestModules[] = "virtio_pci 9pnet_virtio 9p";

// The guest's /init. Modules come from /modules (file names, in load order).
constexpr char kInit[] = R"(#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
ip link set lo up
while read -r m; do insmod "/lib/modules/$m" || echo "fleet-guest: insmod $m failed"; done < /modules
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288 hostroot /host; then
  echo "fleet-guest: cannot mount the host's files over 9p"; poweroff -f
fi
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mount -t tmpfs tmpfs /host/run
stty -F /dev/ttyS1 raw -echo
exec 3<>/dev/ttyS1
echo FLEET-GUEST-READY >&3
# A child reads the commands, not PID 1: the background jobs of commands are reparented to
# PID 1 when their shell ends, and the SIGCHLD of each one's end interrupts busybox's read,
# which drops the part of the line it had read and goes on with the rest as a line of its own.
(
  while read -r number line <&3; do
    chroot /host /bin/sh -c "$line" </dev/null >&3 2>&1
    printf '\n@@FLEET-RC=%s:%d\n' "$number" $? >&3
  done
)
poweroff -f
)";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Tail(const std::string& text, size_t bytes = 3000) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  for (const char* dir : {"/usr/sbin", "/sbin"}) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// The newest /boot/vmlinuz-VERSION whose modules are installed; FLEET_QEMU_KERNEL overrides.
absl::StatusOr<std::pair<std::string, std::string>> FindKernel() {
  std::vector<std::string> versions;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator("/boot", ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "vmlinuz-")) continue;
    const std::string version = name.substr(8);
    if (fs::exists("/lib/modules/" + version + "/modules.dep")) versions.push_back(version);
  }
  if (const char* chosen = getenv("FLEET_QEMU_KERNEL"); chosen != nullptr && *chosen != '\0') {
    const std::string version(absl::StripPrefix(fs::path(chosen).filename().string(), "vmlinuz-"));
    if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("FLEET_QEMU_KERNEL=", chosen, ": no such kernel with its modules"));
    }
    return std::make_pair(absl::StrCat("/boot/vmlinuz-", version), version);
  }
  if (versions.empty()) {
    return absl::FailedPreconditionError(
        "no kernel with its modules in /boot and /lib/modules (Debian's linux-image-amd64)");
  }
  std::sort(versions.begin(), versions.end(), [](const std::string& a, const std::string& b) {
    return strverscmp(a.c_str(), b.c_str()) < 0;
  });
  return std::make_pair(absl::StrCat("/boot/vmlinuz-", versions.back()), versions.back());
}

// Whether `path` is an ELF executable without an interpreter (statically linked).
bool IsStaticElf(const std::string& path) {
  const std::string bytes = Slurp(path);
  if (bytes.size() < sizeof(Elf64_Ehdr) || memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) return false;
  Elf64_Ehdr header;
  memcpy(&header, bytes.data(), sizeof(header));
  for (size_t i = 0; i < header.e_phnum; ++i) {
    const size_t at = header.e_phoff + i * header.e_phentsize;
    if (at + sizeof(Elf64_Phdr) > bytes.size()) return false;
    Elf64_Phdr program;
    memcpy(&program, bytes.data() + at, sizeof(program));
    if (program.p_type == PT_INTERP) return false;
  }
  return true;
}

// Runs `command` with popen and returns its stdout; FAILED_PRECONDITION when it fails.
absl::StatusOr<std::string> Output(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen ", command));
  std::string out;
  char chunk[4096];
  size_t n = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) out.append(chunk, n);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::FailedPreconditionError(absl::StrCat("'", command, "' failed (", status, ")"));
  }
  return out;
}

// The modules `names` need, in load order, as modprobe would insert them.
absl::StatusOr<std::vector<std::string>> ModulesInOrder(const std::string& modprobe,
                                                        const std::string& version,
                                                        const std::string& names) {
  absl::StatusOr<std::string> listed =
      Output(absl::StrCat(modprobe, " --all -S ", version, " --show-depends ", names));
  if (!listed.ok()) return listed.status();
  std::vector<std::string> paths;
  for (absl::string_view line : absl::StrSplit(*listed, '\n', absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&line, "insmod ")) continue;  // "builtin X": nothing to load.
    // "insmod PATH [PARAMETERS]"
    const std::string path(line.substr(0, line.find(' ')));
    if (absl::EndsWith(path, ".ko.xz") || absl::EndsWith(path, ".ko.zst")) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is compressed; busybox's insmod loads plain .ko files"));
    }
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  }
  return paths;
}

// A cpio archive in the "newc" format the kernel unpacks as its initramfs.
class Cpio {
 public:
  void Directory(const std::string& name) { Entry(name, 040755, ""); }
  void File(const std::string& name, const std::string& data, int mode) {
    Entry(name, 0100000 | mode, data);
  }
  std::string Finish() {
    Entry("TRAILER!!!", 0, "");
    return std::move(out_);
  }

 private:
  void Entry(const std::string& name, uint32_t mode, const std::string& data) {
    char header[111];
    snprintf(header, sizeof(header), "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X",
             ++inode_, mode, 0, 0, 1, 0, data.size(), 0, 0, 0, 0, name.size() + 1, 0);
    out_.append(header, 110);
    out_.append(name);
    out_.push_back('\0');
    Pad();
    out_.append(data);
    Pad();
  }
  void Pad() { out_.append((4 - out_.size() % 4) % 4, '\0'); }
  std::string out_;
  uint32_t inode_ = 0;
};

// Connects to QEMU's socket `path` as soon as QEMU opens it. When QEMU exits first, `*qemu` is
// reaped and set to -1.
absl::Status ConnectUnix(const std::string& path, int* fd, pid_t* qemu, const std::string& log,
                         absl::Time deadline) {
  for (;;) {
    const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    if (connect(s, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      *fd = s;
      return absl::OkStatus();
    }
    close(s);
    int status = 0;
    if (waitpid(*qemu, &status, WNOHANG) == *qemu) {
      *qemu = -1;
      return absl::FailedPreconditionError(absl::StrCat("QEMU exited (status ", status, ") before ",
                                                        path, " opened: ", Tail(Slurp(log))));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("QEMU did not open ", path));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

absl::Status QemuGuest::CanBoot() {
  std::vector<std::string> missing;
  if (FindOnPath(kQemu).empty()) missing.push_back("qemu-system-x86_64 (Debian's qemu-system-x86)");
  if (absl::StatusOr<std::pair<std::string, std::string>> kernel = FindKernel(); !kernel.ok()) {
    missing.push_back(std::string(kernel.status().message()));
  } else if (access(kernel->first.c_str(), R_OK) != 0) {
    missing.push_back(absl::StrCat(kernel->first, " is not readable"));
  }
  if (!IsStaticElf(kBusybox)) missing.push_back("a static /bin/busybox (Debian's busybox-static)");
  if (FindOnPath("modprobe").empty()) {
    missing.push_back("modprobe (Debian's kmod)");
  } else if (absl::StatusOr<std::pair<std::string, std::string>> kernel = FindKernel();
             kernel.ok()) {
    if (absl::StatusOr<std::vector<std::string>> modules =
            ModulesInOrder(FindOnPath("modprobe"), kernel->second, kGuestModules);
        !modules.ok()) {
      missing.push_back(std::string(modules.status().message()));
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("cannot boot a QEMU guest here: missing ", absl::StrJoin(missing, "; ")));
}

absl::StatusOr<std::unique_ptr<QemuGuest>> QemuGuest::Boot(const Options& options,
                                                           const std::string& work_dir) {
  if (absl::Status can = CanBoot(); !can.ok()) return can;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.boot_timeout;
  absl::StatusOr<std::pair<std::string, std::string>> kernel = FindKernel();
  if (!kernel.ok()) return kernel.status();
  absl::StatusOr<std::vector<std::string>> modules =
      ModulesInOrder(FindOnPath("modprobe"), kernel->second, kGuestModules);
  if (!modules.ok()) return modules.status();

  Cpio cpio;
  for (const char* dir : {"bin", "dev", "proc", "sys", "host", "lib", "lib/modules"}) {
    cpio.Directory(dir);
  }
  cpio.File("init", kInit, 0755);
  cpio.File("bin/busybox", Slurp(kBusybox), 0755);
  std::string module_list;
  for (const std::string& path : *modules) {
    const std::string name = fs::path(path).filename().string();
    cpio.File("lib/modules/" + name, Slurp(path), 0644);
    absl::StrAppend(&module_list, name, "\n");
  }
  cpio.File("modules", module_list, 0644);
  const std::string initramfs = work_dir + "/initramfs.cpio";
  {
    std::ofstream out(initramfs, std::ios::binary | std::ios::trunc);
    out << cpio.Finish();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", initramfs));
  }

  std::unique_ptr<QemuGuest> guest(new QemuGuest());
  guest->kernel_version_ = kernel->second;
  // Unix socket paths are short (108 bytes): the sockets live in a directory of their own.
  char socket_dir[] = "/tmp/fleet-qemu-XXXXXX";
  if (mkdtemp(socket_dir) == nullptr) return absl::InternalError("mkdtemp for QEMU's sockets");
  guest->socket_dir_ = socket_dir;
  guest->console_path_ = work_dir + "/console.log";
  guest->qemu_log_path_ = work_dir + "/qemu.log";
  const int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  guest->accelerator_ = kvm >= 0 ? "kvm" : "tcg";
  if (kvm >= 0) close(kvm);

  std::vector<std::string> argv = {
      FindOnPath(kQemu), "-machine", "q35", "-accel", guest->accelerator_, "-m",
      absl::StrCat(options.memory_mib), "-smp", "1", "-display", "none", "-nodefaults",
      "-no-reboot", "-kernel", kernel->first, "-initrd", initramfs, "-append",
      "console=ttyS0 loglevel=4 panic=-1",
      // Native PCIe hot-plug (pciehp), as on a host whose firmware grants it to the OS.
      "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off", "-virtfs",
      "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap", "-chardev",
      absl::StrCat("socket,id=commands,path=", guest->socket_dir_, "/commands,server=on,wait=off"),
      "-serial", absl::StrCat("file:", guest->console_path_), "-serial", "chardev:commands", "-qmp",
      absl::StrCat("unix:", guest->socket_dir_, "/qmp,server=on,wait=off")};
  for (const std::string& device : options.devices) argv.insert(argv.end(), {"-device", device});

  // Built before fork: the child only execs.
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork for QEMU");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int log = open(guest->qemu_log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    close(null);
    close(log);
    execv(args[0], args.data());
    _exit(127);
  }
  guest->pid_ = pid;

  if (absl::Status connected = ConnectUnix(guest->socket_dir_ + "/commands", &guest->command_fd_,
                                           &guest->pid_, guest->qemu_log_path_, deadline);
      !connected.ok()) {
    return connected;
  }
  for (;;) {
    std::string line;
    if (absl::Status read =
            guest->ReadLine(guest->command_fd_, guest->command_buffer_, line, deadline);
        !read.ok()) {
      return absl::Status(read.code(), absl::StrCat("the guest did not come up: ", read.message(),
                                                    "; console: ", Tail(guest->console())));
    }
    if (line == kReady) break;
  }
  guest->boot_time_ = absl::Now() - start;
  if (absl::Status connected = ConnectUnix(guest->socket_dir_ + "/qmp", &guest->qmp_fd_,
                                           &guest->pid_, guest->qemu_log_path_, deadline);
      !connected.ok()) {
    return connected;
  }
  if (absl::StatusOr<nlohmann::json> greeting = guest->ReadQmpMessage(deadline); !greeting.ok()) {
    return greeting.status();
  }
  if (absl::StatusOr<nlohmann::json> ok = guest->Qmp("qmp_capabilities"); !ok.ok()) {
    return ok.status();
  }
  return guest;
}

QemuGuest::~QemuGuest() {
  if (command_fd_ >= 0) close(command_fd_);
  if (qmp_fd_ >= 0) close(qmp_fd_);
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!socket_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(socket_dir_, ec);
  }
}

absl::Status QemuGuest::ReadLine(int fd, std::string& buffer, std::string& line,
                                 absl::Time deadline) {
  for (;;) {
    if (const size_t end = buffer.find('\n'); end != std::string::npos) {
      line = buffer.substr(0, end);
      buffer.erase(0, end + 1);
      return absl::OkStatus();
    }
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) return absl::DeadlineExceededError("timed out reading from the guest");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(wait_ms, 1000))) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("the guest's channel closed; QEMU said: ", Tail(Slurp(qemu_log_path_))));
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

absl::StatusOr<QemuGuest::Result> QemuGuest::Run(const std::string& command,
                                                 absl::Duration timeout) {
  if (command.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError("a guest command is one line");
  }
  if (!broken_.empty()) return absl::FailedPreconditionError(broken_);
  const uint64_t number = ++commands_sent_;
  const std::string line = absl::StrCat(number, " ", command, "\n");
  if (send(command_fd_, line.data(), line.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(line.size())) {
    return absl::UnavailableError("cannot write to the guest's command channel");
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::string output;
  for (;;) {
    std::string received;
    if (absl::Status read = ReadLine(command_fd_, command_buffer_, received, deadline);
        !read.ok()) {
      // What the guest sends next would belong to this command: no later one can be read.
      broken_ = absl::StrCat("the guest is out of step: '", command, "' did not finish");
      return absl::Status(read.code(),
                          absl::StrCat("'", command, "': ", read.message(), " (within ",
                                       absl::FormatDuration(timeout), "); output: ", Tail(output)));
    }
    absl::string_view rest = received;
    if (!absl::ConsumePrefix(&rest, kExitMarker)) {
      absl::StrAppend(&output, received, "\n");
      continue;
    }
    Result result;
    uint64_t answered = 0;
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(rest, ':');
    if (!absl::SimpleAtoi(parts.first, &answered) ||
        !absl::SimpleAtoi(parts.second, &result.exit_code)) {
      broken_ = absl::StrCat("the guest is out of step: unreadable end of '", command, "'");
      return absl::InternalError(absl::StrCat("unreadable exit code from the guest: ", received));
    }
    if (answered != number) {
      // The guest ran something other than the line sent (or answered an earlier one).
      broken_ = absl::StrCat("the guest is out of step: '", command, "' was answered as command ",
                             answered, " of ", number);
      return absl::InternalError(absl::StrCat(broken_, "; output: ", Tail(output)));
    }
    output.pop_back();  // The newline the guest puts before the exit code.
    result.output = std::move(output);
    return result;
  }
}

absl::StatusOr<nlohmann::json> QemuGuest::ReadQmpMessage(absl::Time deadline) {
  std::string line;
  if (absl::Status read = ReadLine(qmp_fd_, qmp_buffer_, line, deadline); !read.ok()) return read;
  nlohmann::json message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return absl::InternalError(absl::StrCat("QMP sent: ", line));
  return message;
}

absl::StatusOr<nlohmann::json> QemuGuest::Qmp(const std::string& command,
                                              const nlohmann::json& arguments,
                                              absl::Duration timeout) {
  nlohmann::json request = {{"execute", command}};
  if (!arguments.empty()) request["arguments"] = arguments;
  const std::string line = request.dump() + "\n";
  if (send(qmp_fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    return absl::UnavailableError("cannot write to QMP");
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    absl::StatusOr<nlohmann::json> message = ReadQmpMessage(deadline);
    if (!message.ok()) return message.status();
    if (message->contains("event")) {
      events_.push_back(*message);
    } else if (message->contains("return")) {
      return (*message)["return"];
    } else if (message->contains("error")) {
      return absl::FailedPreconditionError(
          absl::StrCat("QMP ", command, ": ", (*message)["error"].value("desc", message->dump())));
    }
  }
}

absl::StatusOr<nlohmann::json> QemuGuest::AwaitEvent(const std::string& name,
                                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    for (auto it = events_.begin(); it != events_.end(); ++it) {
      if ((*it)["event"] == name) {
        nlohmann::json data = it->value("data", nlohmann::json::object());
        events_.erase(it);
        return data;
      }
    }
    absl::StatusOr<nlohmann::json> message = ReadQmpMessage(deadline);
    if (!message.ok()) {
      return absl::Status(message.status().code(), absl::StrCat("waiting for QMP event ", name,
                                                                ": ", message.status().message()));
    }
    if (message->contains("event")) events_.push_back(*message);
  }
}

std::string QemuGuest::console() const { return Slurp(console_path_); }

}  // namespace fleet::testing
