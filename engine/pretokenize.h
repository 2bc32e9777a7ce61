#pragma once
// GPT-2's pre-tokenisation: the text is cut into pieces ("pre-tokens") by the pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// and BPE merges only ever join bytes inside one piece. It is written out by hand (no regex
// library): the alternatives are tried in order at each position, as a backtracking regex engine
// would, and the first that matches is taken. Bytes that are not well-formed UTF-8 are characters
// of class `other` (engine/unicode_classes.h), so every byte of the text lies in exactly one piece.
#include <cstddef>
#include <string_view>

namespace ptl {

// The length in bytes of the piece that starts at byte `i` of `text` (i < text.size()); at least 1.
size_t gpt2_piece_length(std::string_view text, size_t i);

// Calls f(std::string_view piece) for each piece of `text`, in order.
template <class F>
void for_each_gpt2_piece(std::string_view text, F&& f) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = gpt2_piece_length(text, i);
    f(text.substr(i, n));
    i += n;
  }
}

}  // namespace ptl
