#pragma once
// The character classes of GPT-2's pre-tokenisation pattern (engine/pretokenize.h) over UTF-8
// bytes: letters (\p{L}), numbers (\p{N}), white space (\s) and everything else.
#include <cstdint>
#include <string_view>

namespace ptl {

enum class CharClass : uint8_t { letter, number, space, other };

// The class of one Unicode code point. White space is Unicode's White_Space property (what \s
// means in Python's `regex`, with which GPT-2 was made, and in the Oniguruma engine of Hugging
// Face's Rust tokenizers). JavaScript's \s differs at two code points: it includes U+FEFF and
// excludes U+0085.
CharClass char_class(uint32_t cp);

// The next character of `s` from byte `i`: its length in bytes (1 to 4) and class. A byte that does
// not start a well-formed UTF-8 sequence (a stray continuation byte, a truncated or overlong
// sequence, a surrogate, a value above U+10FFFF) is one character of its own, of class `other`:
// the class of U+FFFD, the character that JavaScript and Rust readers put in its place, so that
// the text around it is split as they split it, and every byte still reaches the tokenizer.
struct Utf8Char {
  uint32_t cp;  // the code point, or 0xFFFD for an invalid byte
  uint8_t len;
  bool valid;
};
Utf8Char next_utf8(std::string_view s, size_t i);

const char* unicode_version();  // of the generated tables (unicode_classes.inc)

}  // namespace ptl
