#pragma once
// Supervised fine-tuning data (docs/post-training.md): JSONL conversations rendered with a
// chat template, tokenized by the model's tokenizer, packed into rows of ctx + 1 tokens, with a
// loss mask that selects only the assistant's tokens.
//
// The chat template, byte for byte (no special tokens: the markers are plain ASCII):
//
//   <|system|>\n{content}\n          (optional)
//   <|user|>\n{content}\n
//   <|assistant|>\n{content}<|end|>\n
//
// The loss counts the assistant's content and the "<|end|>\n" that closes it; everything else
// (markers, system and user text, padding) has mask 0. Generation stops at "<|end|>".
//
// Tokens: each part of the template (a marker, a message's content, "<|end|>\n") is encoded on
// its own, so that no token straddles trained and untrained text; a model of bytes reads one
// token per byte. Special tokens' text in a message is ordinary text.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data.h"
#include "engine/model_tokenizer.h"
#include "engine/rng.h"

namespace ptl {

constexpr const char* kChatEnd = "<|end|>";

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

struct SftExample {
  std::vector<ChatMessage> messages;  // ends with the assistant's reply
  int line = 0;                       // 1-based line in the JSONL file (0 = not from a file)
};

// The template applied to a conversation. When `trained` is given it receives one flag per
// byte: 1 for the bytes the loss counts.
std::string render_chat(const std::vector<ChatMessage>& messages, std::vector<uint8_t>* trained = nullptr);
// What the model is given to produce the last assistant reply: every message before it, then
// "<|assistant|>\n".
std::string chat_prompt(const SftExample& example);
const std::string& chat_reply(const SftExample& example);  // the last assistant message's content
// The same as tokens of `tokenizer`, part by part as training sees them (see above).
std::vector<int32_t> render_chat_tokens(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer,
                                        std::vector<uint8_t>* trained = nullptr);
std::vector<int32_t> chat_prompt_tokens(const SftExample& example, const Tokenizer& tokenizer);

// One example per line: {"prompt": "...", "response": "..."} or
// {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]} (the last message
// is the assistant's). Blank lines are skipped; other keys are ignored. Throws ptl::Error naming
// `what` and the line: malformed JSON, missing fields, unknown roles, an empty response, and a
// file without examples.
// The first line may instead declare the tokenizer the examples were prepared for,
// {"tokenizer": {"type": "bpe", "vocab_size": N, "sha256": "..."}} (TokenizerId, as `ptl info
// --json` prints a checkpoint's): with `expect`, a declaration of another tokenizer is refused.
std::vector<SftExample> parse_sft_jsonl(const std::string& text, const std::string& what,
                                        const TokenizerId* expect = nullptr);
std::vector<SftExample> read_sft_file(const std::string& path, const TokenizerId* expect = nullptr);

// Packed, masked batches of SFT examples for a model with context `ctx`, in the tokens of
// `tokenizer` (the data records which: a trainer refuses data prepared for another tokenizer).
//  - Split: the last val_fraction of the examples (in file order) is the validation set
//    (none when that rounds down to zero examples).
//  - Packing: whole examples are concatenated into rows of ctx + 1 tokens; one that does not fit
//    in the rest of a row starts the next row, and the rest is padding (token 0, mask 0). An
//    example longer than ctx + 1 tokens is an error (naming its line): never silently truncated.
//  - Order: each epoch visits the training examples in a fresh seeded shuffle (drawn from the
//    Rng passed to sample_train, so a run is reproducible from its seed).
class SftData {
 public:
  SftData(const std::vector<SftExample>& examples, int ctx, double val_fraction = 0.1,
          const std::string& what = "sft data", const ModelTokenizer& tokenizer = ModelTokenizer::bytes());

  Batch sample_train(Rng& rng, int batch);  // the next `batch` packed rows
  // Every validation example once, packed in file order; the last batch is filled with empty
  // (all-masked) rows.
  std::vector<Batch> val_batches(int batch) const;
  // Every example (training and validation) once, packed in file order (for evaluation).
  std::vector<Batch> all_batches(int batch) const;
  bool has_val() const { return !val_.empty(); }
  int ctx() const { return ctx_; }
  size_t train_examples() const { return train_.size(); }
  size_t val_examples() const { return val_.size(); }
  int64_t train_bytes() const;   // bytes of the rendered training examples
  int64_t train_tokens() const;  // their tokens
  int64_t epoch() const { return epoch_; }
  const TokenizerId& tokenizer() const { return tokenizer_; }  // the tokens' tokenizer

 private:
  struct Rendered {
    std::vector<int32_t> ids;
    std::vector<uint8_t> trained;  // per token: 1 where the loss counts it
    size_t bytes = 0;
  };
  static std::vector<Batch> pack(const std::vector<const Rendered*>& examples, int ctx, int batch);
  static void fill_row(Batch& b, int row, const std::vector<int32_t>& ids, const std::vector<uint8_t>& trained,
                       int ctx);

  std::vector<Rendered> train_, val_;
  int ctx_;
  TokenizerId tokenizer_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace ptl
