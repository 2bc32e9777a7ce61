// ptl sample: stream a continuation of a prompt to stdout, in the checkpoint's tokenizer; timing
// goes to stderr.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "engine/error.h"
#include "engine/tokenizer.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

struct SampleArgs {
  std::string checkpoint, adapter, prompt;
  int max_tokens = 200;
  SamplingOptions opt;
  bool raw = false;
};

// Writes bytes as they come, holding back an incomplete UTF-8 sequence until it completes and
// replacing invalid bytes with U+FFFD, so a person never sees half a character.
class Utf8Stream {
 public:
  explicit Utf8Stream(bool raw) : raw_(raw) {}
  void put(unsigned char c) {
    if (raw_) return (void)std::fputc(c, stdout);
    pending_.push_back(char(c));
    const unsigned char lead = pending_[0];
    const size_t need = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (need == 0 || (pending_.size() > 1 && (c >> 6) != 0x2)) {
      // Invalid lead byte, or a continuation byte was expected: replace what we held.
      std::string rest = pending_.size() > 1 && need != 0 ? std::string(1, char(c)) : "";
      pending_.clear();
      std::fputs("\xEF\xBF\xBD", stdout);
      for (char r : rest) put(static_cast<unsigned char>(r));
      return;
    }
    if (pending_.size() == need) {
      std::fwrite(pending_.data(), 1, pending_.size(), stdout);
      pending_.clear();
    }
  }
  void flush() {
    if (!pending_.empty()) std::fputs("\xEF\xBF\xBD", stdout);
    pending_.clear();
    std::fflush(stdout);
  }

 private:
  bool raw_;
  std::string pending_;
};

void run_sample(const SampleArgs& a) {
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.checkpoint), a.checkpoint);
  check(trainer->tokenizer().reads_text(), a.checkpoint + ": the model reads token ids only (vocabulary " +
                                               std::to_string(trainer->model_config().vocab_size) +
                                               ", no tokenizer recorded): it has no text to sample");
  if (!a.adapter.empty()) trainer->load_adapter(read_file_bytes(a.adapter), a.adapter);
  Utf8Stream out(a.raw);
  for (unsigned char c : a.prompt) out.put(c);
  out.flush();
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  double first_token_s = -1;
  int count = 0;
  // The checkpoint's tokenizer: the prompt in its tokens, each new token's bytes as they come
  // (a character split across tokens is held back until it completes).
  TokenStreamDecoder decoder(trainer->tokenizer().text());
  trainer->generate(trainer->encode(a.prompt), a.max_tokens, a.opt, [&](int32_t tok) {
    if (first_token_s < 0) first_token_s = std::chrono::duration<double>(clock::now() - t0).count();
    for (unsigned char c : decoder.push(tok)) out.put(c);
    std::fflush(stdout);
    ++count;
    return true;
  });
  for (unsigned char c : decoder.finish()) out.put(c);
  out.flush();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const double total = std::chrono::duration<double>(clock::now() - t0).count();
  if (count == 0) return (void)std::fprintf(stderr, "[0 tokens]\n");
  std::fprintf(stderr, "[%d tokens in %.3f s: %.1f tokens/s, time to first token %.1f ms]\n", count, total,
               count / std::max(total, 1e-9), first_token_s * 1000.0);
}

}  // namespace

void add_sample(CLI::App& app) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App* cmd = app.add_subcommand("sample", "Generate text from a checkpoint (streams to stdout)");
  cmd->add_option("checkpoint", a->checkpoint, "Checkpoint (.tinygpt or .safetensors)")->required();
  cmd->add_option("--adapter", a->adapter, "LoRA adapter (.tinygpt-lora) trained on this checkpoint");
  cmd->add_option("--prompt", a->prompt, "Text to continue (default: start of a new line)");
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate (bytes for a byte-level model)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--temperature", a->opt.temperature, "0 = greedy; higher = more random")->capture_default_str();
  cmd->add_option("--top-k", a->opt.top_k, "Keep only the k most likely tokens (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", a->opt.top_p, "Nucleus sampling: keep the most likely tokens up to this mass (1 = off)")
      ->capture_default_str();
  cmd->add_option("--seed", a->opt.seed, "Seed of the sampler")->capture_default_str();
  cmd->add_flag("--raw", a->raw, "Write the bytes as generated (no UTF-8 clean-up)");
  cmd->callback([a]() { run_sample(*a); });
}

}  // namespace ptl::cli
