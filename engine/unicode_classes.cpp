// Letter and number classes from generated range tables; white space written out by hand.
#include "engine/unicode_classes.h"

#include <algorithm>
#include <array>

namespace ptl {

namespace {

struct CodeRange {
  uint32_t lo, hi;
};
#include "engine/unicode_classes.inc"

template <size_t N>
bool in_ranges(const CodeRange (&r)[N], uint32_t cp) {
  // The first range that ends at or after cp; cp is inside it if it starts at or before cp.
  const CodeRange* it = std::lower_bound(r, r + N, cp, [](const CodeRange& a, uint32_t c) { return a.hi < c; });
  return it != r + N && it->lo <= cp;
}

// Unicode's White_Space property (PropList.txt); it has not changed since Unicode 6.3.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ASCII is most of most text: one table look-up instead of two binary searches.
constexpr std::array<CharClass, 128> kAscii = [] {
  std::array<CharClass, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      t[c] = CharClass::letter;
    else if (c >= '0' && c <= '9')
      t[c] = CharClass::number;
    else if ((c >= 0x09 && c <= 0x0D) || c == 0x20)
      t[c] = CharClass::space;
    else
      t[c] = CharClass::other;
  }
  return t;
}();

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 128) return kAscii[cp];
  if (is_white_space(cp)) return CharClass::space;
  if (in_ranges(kLetterRanges, cp)) return CharClass::letter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::number;
  return CharClass::other;
}

Utf8Char next_utf8(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return {c, 1, true};
  const Utf8Char bad{0xFFFD, 1, false};
  int len;
  uint32_t cp, min;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return bad;  // a continuation byte, or a lead byte that can only start an overlong or too large value
  }
  if (i + len > s.size()) return bad;
  for (int k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return bad;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return bad;
  return {cp, static_cast<uint8_t>(len), true};
}

const char* unicode_version() { return kUnicodeVersion; }

}  // namespace ptl
