// SFT JSONL parsing, packing and batching (engine/sft.h), and corpus splitting and windowing
// (engine/data.h), on arbitrary text. The first bytes choose the context length, batch and
// validation fraction (out-of-range values included: they must be refused, not obeyed); the
// rest is the file. Checks that batches stay inside their rows, that every token is a byte, and
// that the byte tokenizer round-trips the text exactly.
#include <cmath>
#include <limits>

#include "engine/data.h"
#include "engine/error.h"
#include "engine/rng.h"
#include "engine/sft.h"
#include "tests/fuzz/fuzz_common.h"

using namespace ptl;

namespace {

void check_batch(const Batch& b, int batch, int ctx, bool masked) {
  const size_t n = size_t(batch) * size_t(ctx);
  if (b.batch != batch || b.inputs.size() != n || b.targets.size() != n || (masked && b.mask.size() != n))
    fuzz::fail_property("batch of the wrong size");
  for (size_t i = 0; i < n; ++i)
    if (b.inputs[i] < 0 || b.inputs[i] > 255 || b.targets[i] < 0 || b.targets[i] > 255)
      fuzz::fail_property("token outside 0..255");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  // ctx -2..61, batch 0..3, val_fraction one of a few values, NaN and out-of-range ones included.
  const int ctx = int(data[0] % 64) - 2;
  const int batch = data[1] % 4;
  static const double kFractions[] = {0.0, 0.1, 0.5, 0.9, 0.999, 1.0, -0.1, std::numeric_limits<double>::quiet_NaN()};
  const double frac = kFractions[data[2] % 8];
  const std::string text(reinterpret_cast<const char*>(data) + 3, size - 3);

  if (decode(encode(text)) != text) fuzz::fail_property("decode(encode(x)) != x");
  (void)printable_utf8(text);

  try {
    std::vector<SftExample> ex = parse_sft_jsonl(text, "fuzz.jsonl");
    for (const auto& e : ex) {
      (void)chat_prompt(e);
      (void)chat_reply(e);
    }
    SftData sft(ex, ctx, frac, "fuzz.jsonl");
    Rng rng(1);
    for (int i = 0; i < 3; ++i) check_batch(sft.sample_train(rng, batch), batch, ctx, true);
    for (const auto& b : sft.all_batches(batch)) check_batch(b, batch, ctx, true);
    if (sft.has_val())
      for (const auto& b : sft.val_batches(batch)) check_batch(b, batch, ctx, true);
  } catch (const Error&) {
  }

  try {
    Corpus c(text, ctx, frac, "fuzz corpus");
    Rng rng(2);
    check_batch(c.sample_train(rng, batch), batch, ctx, false);
    if (c.has_val())
      for (const auto& b : c.val_batches(batch, 2)) check_batch(b, batch, ctx, false);
  } catch (const Error&) {
  }

  try {
    size_t covered = 0;
    for (const auto& b : text_windows(text, ctx)) {
      check_batch(b, 1, b.seq, false);
      covered += size_t(b.seq);
    }
    if (covered != text.size() - 1) fuzz::fail_property("text_windows does not cover the text once");
  } catch (const Error&) {
  }
  return 0;
}
