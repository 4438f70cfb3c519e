#include "common/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace fleet {
namespace {

// Notes are 4-byte aligned in ELF64 files as the GNU linker writes them.
size_t Aligned(size_t n) { return (n + 3) & ~size_t{3}; }

// The build ID note among the loaded object's PT_NOTE segments, as raw bytes.
int FindBuildId(dl_phdr_info* info, size_t /*size*/, void* out) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const char* at = reinterpret_cast<const char*>(info->dlpi_addr + segment.p_vaddr);
    const char* const end = at + segment.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof(note));
      const char* name = at + sizeof(note);
      const char* desc = name + Aligned(note.n_namesz);
      if (desc + note.n_descsz > end) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        static_cast<std::string*>(out)->assign(desc, note.n_descsz);
        return 1;
      }
      at = desc + Aligned(note.n_descsz);
    }
  }
  return 1;  // The first object dl_iterate_phdr gives is the executable: look no further.
}

}  // namespace

std::string ExecutableBuildId() {
  std::string id;
  dl_iterate_phdr(FindBuildId, &id);
  return absl::BytesToHexString(id);
}

}  // namespace fleet
