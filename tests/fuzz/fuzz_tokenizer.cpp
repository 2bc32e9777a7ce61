// libFuzzer target for the tokenizer (scripts/fuzz.sh fuzz_tokenizer; docs/reliability.md).
// The first byte picks what the rest is:
//   even: text, encoded and decoded with fixed tokenizers (bytes, a small trained BPE with
//         <|endoftext|>): decode(encode(x)) must be x, streamed or not;
//   odd:  a tokenizer.json; it must load or fail with ptl::Error, and one that loads must round-trip
//         its own bytes as text.
// A mismatch aborts, which libFuzzer reports with the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/bpe_trainer.h"
#include "engine/error.h"
#include "engine/tokenizer.h"
#include "engine/tokenizer_files.h"

namespace {

void round_trip(const ptl::Tokenizer& t, std::string_view x, bool allow_special) {
  const std::vector<int32_t> ids = t.encode(x, allow_special);
  if (t.decode(ids) != x) {
    std::fprintf(stderr, "decode(encode(x)) != x with a %s tokenizer\n", t.type().c_str());
    std::abort();
  }
  ptl::TokenStreamDecoder d(t);
  std::string streamed;
  for (int32_t id : ids) streamed += d.push(id);
  streamed += d.finish();
  if (streamed != x) {
    std::fprintf(stderr, "streaming decode differs from decode\n");
    std::abort();
  }
}

const ptl::Tokenizer& trained() {
  static const ptl::Tokenizer t = [] {
    std::string text;
    const char* lines[] = {"First Citizen:\nBefore we proceed any further, hear me speak.\n\n",
                           "All:\nSpeak, speak.\n\n", "It's 1,000 ducats; we'll see. 日本語 café 😀\n",
                           "   spaces   and\ttabs\t\n<|endoftext|>"};
    for (int i = 0; i < 50; ++i)
      for (const char* l : lines) text += l;
    ptl::BpeTrainOptions opt;
    opt.vocab_size = 400;
    return ptl::train_bpe(text, opt);
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    static const ptl::Tokenizer bytes;
    round_trip(bytes, rest, true);
    round_trip(trained(), rest, true);
    round_trip(trained(), rest, false);
    return 0;
  }
  try {
    const ptl::Tokenizer t = ptl::tokenizer_from_json(rest, "fuzz.json");
    round_trip(t, rest, true);
    // What it writes, it reads back as the same tokenizer.
    if (ptl::tokenizer_from_json(t.to_json(), "again.json").to_json() != t.to_json()) {
      std::fprintf(stderr, "to_json does not read back\n");
      std::abort();
    }
  } catch (const ptl::Error&) {
    // A clean refusal is the expected outcome for most inputs.
  }
  return 0;
}
