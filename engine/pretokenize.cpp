// GPT-2's pre-tokenisation pattern as code: one function per alternative of the pattern.
#include "engine/pretokenize.h"

#include "engine/unicode_classes.h"

namespace ptl {

namespace {

struct Cursor {
  std::string_view s;
  // The class and byte length of the character at byte i (i < s.size()).
  CharClass cls(size_t i, size_t* len) const {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {  // the common case, without decoding
      *len = 1;
      return char_class(c);
    }
    const Utf8Char u = next_utf8(s, i);
    *len = u.len;
    return u.valid ? char_class(u.cp) : CharClass::other;
  }
  // The end of the run of characters of class `c` that starts at i (i itself if none).
  size_t run(size_t i, CharClass c) const {
    size_t len;
    while (i < s.size() && cls(i, &len) == c) i += len;
    return i;
  }
};

// 's|'t|'re|'ve|'m|'ll|'d  (case-sensitive, as in GPT-2)
size_t contraction(std::string_view s, size_t i) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const char a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < s.size()) {
    const char b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

}  // namespace

size_t gpt2_piece_length(std::string_view s, size_t i) {
  if (const size_t n = contraction(s, i)) return n;
  const Cursor c{s};
  size_t len;
  const CharClass first = c.cls(i, &len);
  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ : an optional U+0020, then a run of one class. A space
  // followed by a letter, number or other character belongs to the run after it; a character of
  // one of those classes starts a run of its own class.
  if (first != CharClass::space) return c.run(i, first) - i;
  if (s[i] == ' ' && i + 1 < s.size()) {
    size_t len2;
    const CharClass next = c.cls(i + 1, &len2);
    if (next != CharClass::space) return c.run(i + 1, next) - i;
  }
  // \s+(?!\S) : the run of white space, less its last character when a non-space follows (so that
  // the last space can start the next word, " ?\p{L}+"); fails when that leaves nothing.
  // \s+ : then the run of one white space character (only reached when the run is one
  // character long and a non-space follows).
  const size_t end = c.run(i, CharClass::space);
  if (end == s.size()) return end - i;
  // Step back one character: find the start of the last character of the run.
  size_t last = end - 1;
  while (last > i && (static_cast<unsigned char>(s[last]) & 0xC0) == 0x80) --last;
  return last > i ? last - i : end - i;
}

}  // namespace ptl
