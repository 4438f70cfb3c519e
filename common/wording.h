// How messages word things for people: a count with its noun in the right number ("1 switch",
// "2 switches"), and the known word nearest to a misspelt one, for "did you mean …?".
#ifndef FLEET_COMMON_WORDING_H_
#define FLEET_COMMON_WORDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fleet {

// `n` and the noun: `singular` when n is 1, else `plural` ("" means `singular` + "s").
std::string Counted(int64_t n, absl::string_view singular, absl::string_view plural = "");

// The word of `known` that `typed` is most likely a misspelling of: the fewest single-letter
// edits (insert, delete, substitute, or swap two neighbours), ties to the earlier word; ""
// when even that one is too far to be a slip (more than a third of the typed word's
// letters, at least 1 and at most 3) or `typed` is itself known.
std::string NearestWord(absl::string_view typed, const std::vector<std::string>& known);

// ` (did you mean 'WORD'?)` for NearestWord, or "" when there is none: the tail of an error
// about an unknown word.
std::string DidYouMean(absl::string_view typed, const std::vector<std::string>& known);

}  // namespace fleet

#endif  // FLEET_COMMON_WORDING_H_
