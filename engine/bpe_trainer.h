#pragma once
// Training a byte-level BPE tokenizer on a text (GPT-2's scheme, as Hugging Face's BpeTrainer
// does it): cut the text into pieces with GPT-2's pattern, count the distinct pieces, then
// repeatedly merge the most frequent adjacent pair of tokens, counted over all pieces.
//
// The vocabulary: ids 0..255 are the bytes (id = byte value, the ids of the byte-level model),
// then the tokens the merges make, in order, then the special tokens (<|endoftext|>: one id, the
// last). `vocab_size` counts all three, so 257 is bytes plus <|endoftext|> and no merges.
// Ties between pairs of equal count go to the smaller (left id, right id): the same corpus
// always gives the same tokenizer. Two merges can make the same bytes (("a","bc") and
// ("ab","c")): the second reuses the first's id, so there can be more merges than new tokens.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer.h"

namespace ptl {

constexpr int kMinTrainVocab = 257, kMaxTrainVocab = 65536;

struct BpeTrainOptions {
  int vocab_size = 4096;  // kMinTrainVocab..kMaxTrainVocab, special tokens included
  std::vector<std::string> specials = {kEndOfText};
  // Called now and then with the tokens made so far and the number wanted (for progress output).
  std::function<void(int made, int wanted)> progress;
};

struct BpeTrainStats {
  int64_t pieces = 0, distinct_pieces = 0;
  int merges = 0;          // merges learnt (rank count)
  int vocab_size = 0;      // of the result: below the one asked for when the text ran out of pairs
  double split_s = 0;      // pre-tokenisation and counting
  double merge_s = 0;      // the merges
  int64_t last_count = 0;  // the count of the last pair merged
};

// Special tokens in `text` are not learnt from: the text is cut at them.
Tokenizer train_bpe(std::string_view text, const BpeTrainOptions& options, BpeTrainStats* stats = nullptr);

}  // namespace ptl
