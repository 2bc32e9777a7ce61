#pragma once
// Tokenizers: text (bytes) to token ids and back. Two kinds behind one class:
// - bytes: one byte is one token (vocabulary 256), what every model read before BPE;
// - byte-level BPE, GPT-2's scheme: the text is cut into pieces by GPT-2's pattern
//   (engine/pretokenize.h), each piece starts as its bytes, and merges join adjacent tokens,
//   lowest rank first, until none applies. Special tokens (`<|endoftext|>`) are matched in the
//   text before that and stand for themselves.
// Any byte string encodes (invalid UTF-8 too) and decode(encode(x)) == x.
//
// The byte-level tokenizer is the BPE one with no merges and ids equal to byte values, so one
// file format (tokenizer.json, engine/tokenizer_files.cpp) describes both.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptl {

// GPT-2's byte-to-unicode mapping: vocabulary files spell each byte as a printable character
// ('!'..'~', '¡'..'¬', '®'..'ÿ' stand for themselves; the other 68 bytes, space and control
// bytes among them, become U+0100.. in order: space is 'Ġ', newline 'Ċ'), so that a token is a
// readable string without spaces. Returns the UTF-8 of the mapped characters.
std::string bytes_to_unicode(std::string_view bytes);
// The inverse. False when `text` holds a character outside the mapping (or is not UTF-8).
bool unicode_to_bytes(std::string_view text, std::string* bytes);

struct SpecialToken {
  std::string text;  // matched verbatim in the text being encoded
  int32_t id = 0;
};

constexpr const char* kEndOfText = "<|endoftext|>";
// Vocabulary files with ids at or past this are refused (before anything that size is allocated).
constexpr int64_t kMaxVocab = 1 << 20;

class Tokenizer {
 public:
  Tokenizer();  // bytes: vocabulary 256, no merges, no special tokens

  // A BPE tokenizer from a vocabulary file's contents: `vocab` pairs each token's spelling
  // (bytes_to_unicode form) with its id, `merges` are pairs of spellings by rank, `specials` are
  // added tokens (their id may also be in `vocab` with the same spelling, as in GPT-2's files).
  // Checks everything (every byte has a token, each merge's parts and result are in the
  // vocabulary, ids are unique and below kMaxVocab) and throws ptl::Error naming `file` (and
  // `merges_where(i)`, which names merge i for the message, e.g. "merges.txt line 3").
  struct Spelled {
    std::vector<std::pair<std::string, int64_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<SpecialToken> specials;
  };
  static Tokenizer from_spelled(Spelled s, const std::string& file,
                                const std::function<std::string(size_t)>& merges_where);

  bool is_bytes() const { return is_bytes_; }
  std::string type() const { return is_bytes_ ? "bytes" : "bpe"; }
  int vocab_size() const { return static_cast<int>(bytes_.size()); }  // largest id + 1
  size_t merge_count() const { return merges_.size(); }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  bool has_token(int32_t id) const { return id >= 0 && id < vocab_size() && present_[id]; }
  // The bytes a token stands for (a special token: its text). Throws for an id not in the vocabulary.
  const std::string& token_bytes(int32_t id) const;
  // How the vocabulary files spell a token (bytes_to_unicode form; a special token: its text).
  const std::string& token_spelling(int32_t id) const;
  // Merge `rank`: the ids of its left and right parts and of the token it makes.
  struct Merge {
    int32_t left, right, result;
  };
  const Merge& merge(size_t rank) const { return merges_[rank]; }
  // The id of a special token by its text, or -1.
  int32_t special_id(std::string_view text) const;

  // Token ids of `text`. With `allow_special`, the text of a special token is that token;
  // without, it is ordinary text (as `gpt-3-encoder` and tiktoken's encode_ordinary read it).
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  void encode_append(std::string_view text, std::vector<int32_t>& out, bool allow_special = true) const;
  // The bytes of `ids`, concatenated (not necessarily valid UTF-8: a token may end inside a
  // character). Throws for an id not in the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

  // tokenizer.json (Hugging Face tokenizers: a BPE model with GPT-2's ByteLevel pre-tokenizer
  // and decoder), which engine/tokenizer_files.cpp reads back and @huggingface/tokenizers reads.
  std::string to_json() const;

 private:
  struct Scratch;
  static constexpr int kShortPiece = 16;  // pieces up to this many bytes take GPT-2's plain loop
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_piece(std::string_view piece, std::vector<int32_t>& out, Scratch& s) const;
  int64_t find_merge(int32_t left, int32_t right) const;  // rank, or -1

  bool is_bytes_ = true;
  std::vector<std::string> bytes_;     // id -> the bytes it stands for
  std::vector<std::string> spelling_;  // id -> its spelling in vocabulary files
  std::vector<uint8_t> present_;       // id -> whether the vocabulary has it (ids may have gaps)
  int32_t byte_id_[256];               // byte -> the id of its one-byte token
  std::vector<Merge> merges_;          // by rank
  // Merge look-up: open addressing over (left, right) packed in 64 bits; value = rank.
  std::vector<uint64_t> merge_keys_;
  std::vector<int32_t> merge_ranks_;
  std::vector<SpecialToken> specials_;
};

// Decodes a stream of token ids as it arrives (sampling), holding back the bytes of a UTF-8
// character that is not complete yet, so that what comes out can be shown at once. A sequence
// that can no longer become valid is passed on as it is; finish() returns what is held back.
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& t) : t_(t) {}
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer& t_;
  std::string pending_;
};

}  // namespace ptl
