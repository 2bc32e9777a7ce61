#pragma once
// The tokenizer a model reads, as its checkpoint records it (docs/checkpoint-format.md,
// "Tokenizer"), and the identity that ties adapters and prepared data to it. Three kinds:
// - bytes: one byte is one token, vocabulary 256. Metadata "tokenizer" = {"type":"byte",
//   "vocab_size":256}, as every checkpoint had before BPE;
// - BPE: metadata "tokenizer" = {"type":"bpe","vocab_size":N,"sha256":H} and "tokenizer_json" =
//   the tokenizer's tokenizer.json as Tokenizer::to_json writes it (its canonical form, whatever
//   file it was read from), H = that text's sha256: the tokenizer's identity;
// - none: a model of V token ids that reads no text (made in code, e.g. parity tests of other
//   vocabulary sizes): {"type":"none","vocab_size":V}.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/safetensors.h"
#include "engine/tokenizer.h"

namespace ptl {

// What a LoRA adapter and prepared SFT data record of their model's tokenizer: equal identities
// mean the same ids for the same text.
struct TokenizerId {
  std::string type = "byte";  // byte | bpe | none
  int vocab_size = 256;
  std::string sha256;  // bpe only: of the canonical tokenizer.json
  bool operator==(const TokenizerId&) const = default;
  nlohmann::json to_json() const;  // the "tokenizer" metadata value
  // Throws naming `what` for anything but the three kinds above.
  static TokenizerId from_json(const nlohmann::json& j, const std::string& what);
  // For messages: "bytes (256 tokens)", "a BPE tokenizer of 1024 tokens (sha256 3f2a9c01d4e5b6a7...)".
  std::string describe() const;
};

class ModelTokenizer {
 public:
  ModelTokenizer();  // bytes
  static ModelTokenizer bytes();
  static ModelTokenizer none(int vocab_size);
  // Bytes for the byte tokenizer (Tokenizer() or a file with exactly its 256 tokens), else BPE.
  static ModelTokenizer of(Tokenizer t);
  // What a model of `vocab_size` reads when nothing says otherwise: bytes for 256, else none.
  static ModelTokenizer default_for(int vocab_size);

  const TokenizerId& id() const { return id_; }
  int vocab_size() const { return id_.vocab_size; }
  bool is_bytes() const { return id_.type == "byte"; }
  bool reads_text() const { return tokenizer_ != nullptr; }
  // The tokenizer; throws for a model without one ("none"), naming what it cannot do.
  const Tokenizer& text() const;
  // The canonical tokenizer.json of a BPE tokenizer; empty for the other kinds.
  const std::string& json() const { return json_; }

  // Writes "tokenizer" (and "tokenizer_json" for BPE) into a file's metadata.
  void write_metadata(std::map<std::string, std::string>& metadata) const;
  // Reads them from a checkpoint's metadata, validated: a known type, a tokenizer.json that loads
  // and whose sha256 is the recorded one, and a vocabulary of exactly `model_vocab` ids. No
  // "tokenizer" key (a file from elsewhere): default_for(model_vocab). Throws naming `what`.
  static ModelTokenizer read_metadata(const std::map<std::string, std::string>& metadata, int model_vocab,
                                      const std::string& what);

 private:
  TokenizerId id_;
  std::shared_ptr<const Tokenizer> tokenizer_;  // null for "none"
  std::string json_;
};

// A checkpoint's tokenizer, for `--tokenizer CKPT` (load_tokenizer): the byte tokenizer of a
// byte-level model. Throws naming `path` for a model without a tokenizer, or for an adapter.
Tokenizer checkpoint_tokenizer(const std::string& path);

}  // namespace ptl
