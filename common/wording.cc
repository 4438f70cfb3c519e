#include "common/wording.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fleet {
namespace {

// Optimal string alignment distance (Damerau–Levenshtein without repeated edits of one
// substring): a swapped pair of letters is one slip, as people type them.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string Counted(int64_t n, absl::string_view singular, absl::string_view plural) {
  if (n == 1) return absl::StrCat(n, " ", singular);
  if (plural.empty()) return absl::StrCat(n, " ", singular, "s");
  return absl::StrCat(n, " ", plural);
}

std::string NearestWord(absl::string_view typed, const std::vector<std::string>& known) {
  // A slip is a few letters: "swithces" is a switch, "host" is not a "port".
  const size_t allowed = std::clamp<size_t>(typed.size() / 3, 1, 3);
  std::string nearest;
  size_t best = allowed + 1;
  for (const std::string& word : known) {
    if (word == typed) return "";
    const size_t distance = EditDistance(typed, word);
    if (distance < best) {
      best = distance;
      nearest = word;
    }
  }
  return nearest;
}

std::string DidYouMean(absl::string_view typed, const std::vector<std::string>& known) {
  std::string nearest = NearestWord(typed, known);
  return nearest.empty() ? "" : absl::StrCat(" (did you mean '", nearest, "'?)");
}

}  // namespace fleet
