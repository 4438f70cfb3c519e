#include "common/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstring>

#include "absl/strings/escaping.h"

namespace fleet {
namespace {

// The build ID note among the first loaded object's PT_NOTE segments, as raw bytes. Walks
// each segment by offsets within it, so no pointer past its end is ever formed.
int FindBuildId(dl_phdr_info* info, size_t /*size*/, void* out) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    // Notes are padded to the segment's alignment: 4, or 8 for .note.gnu.property on x86-64.
    const size_t align = segment.p_align == 8 ? 8 : 4;
    auto padded = [align](size_t n) { return (n + align - 1) & ~(align - 1); };
    const char* const base = reinterpret_cast<const char*>(info->dlpi_addr + segment.p_vaddr);
    const size_t size = segment.p_filesz;
    size_t at = 0;
    while (size - at >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) note;
      std::memcpy(&note, base + at, sizeof(note));
      const size_t name = at + sizeof(note);
      const size_t desc = name + padded(note.n_namesz);
      if (desc > size || size - desc < note.n_descsz) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
          std::memcmp(base + name, "GNU", 4) == 0) {
        static_cast<std::string*>(out)->assign(base + desc, note.n_descsz);
        return 1;
      }
      at = desc + padded(note.n_descsz);
      if (at > size) break;
    }
  }
  return 1;  // glibc gives the main executable first (a PIE too): look no further.
}

}  // namespace

std::string ExecutableBuildId() {
  std::string id;
  dl_iterate_phdr(FindBuildId, &id);
  return absl::BytesToHexString(id);
}

}  // namespace fleet
