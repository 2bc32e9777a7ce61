#pragma once
// Text corpora as tokens (bytes, or the ids of a BPE tokenizer): the 90/10 split, seeded random
// training windows, the fixed validation windows, and where to find TinyShakespeare.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/rng.h"
#include "engine/tokenizer.h"

namespace ptl {

// Byte-level tokenizer: one UTF-8 byte is one token (vocab 256).
std::vector<int32_t> encode(const std::string& text);
std::string decode(const std::vector<int32_t>& tokens);
// For display: replaces invalid or incomplete UTF-8 sequences with U+FFFD (the token stream is kept).
std::string printable_utf8(const std::string& bytes);

struct Batch {
  int batch = 0, seq = 0;
  std::vector<int32_t> inputs, targets;  // [batch, seq], targets are inputs shifted by one byte
  std::vector<float> mask = {};          // [batch, seq] loss weights (SFT); empty = every position counts
};

class Corpus {
 public:
  // Splits `bytes` contiguously: the first (1 - val_fraction) for training, the rest for
  // validation. `ctx` is the window length; each split must hold at least ctx + 1 tokens.
  // With a BPE `tokenizer` the split is still by bytes (the spec's: the last 10% of the file is
  // validation), and each side is encoded on its own; without one (or with the byte tokenizer)
  // a token is a byte.
  Corpus(std::string bytes, int ctx, double val_fraction = 0.1, const std::string& name = "corpus",
         const Tokenizer* tokenizer = nullptr);

  const std::string& train() const { return train_; }  // the bytes of each split
  const std::string& val() const { return val_; }
  size_t train_tokens() const { return bpe_ ? train_ids_.size() : train_.size(); }
  size_t val_tokens() const { return bpe_ ? val_ids_.size() : val_.size(); }
  bool has_val() const { return !val_.empty(); }
  int ctx() const { return ctx_; }

  // B random windows of ctx + 1 tokens from the training split, drawn from `rng`.
  Batch sample_train(Rng& rng, int batch) const;
  // The fixed validation windows: `count` windows from a generator with a fixed seed, so
  // every run (and every resume) measures on the same text.
  std::vector<Batch> val_batches(int batch, int count) const;

 private:
  std::string train_, val_;
  bool bpe_ = false;                          // windows over the ids below, not the bytes
  std::vector<int32_t> train_ids_, val_ids_;  // BPE only: each split encoded
  int ctx_;
};

// Consecutive non-overlapping windows covering a whole text (for `ptl eval --data`): each token
// after the first is predicted exactly once; the last window may be shorter.
std::vector<Batch> text_windows(const std::string& bytes, int ctx);
std::vector<Batch> text_windows(const std::vector<int32_t>& ids, int ctx);  // the same over token ids

std::string read_text_file(const std::string& path);  // throws naming the path if missing/empty
// TinyShakespeare: $PTL_DATA_DIR/tinyshakespeare.txt, then ../shared/data (from the working
// directory and from the executable's folder upwards), then a download from its public URL
// checked against the known sha256. Returns the path. Throws with what it tried.
std::string find_tinyshakespeare();

}  // namespace ptl
