// ptl import-hf / ptl export-hf: Hugging Face GPT-2 model folders in and out of ptl (docs/gpt2.md).
//   import-hf: config.json, model.safetensors (or its shards) in F32, F16 or BF16 and the
//              tokenizer files -> a checkpoint, every name, shape and dtype checked.
//   export-hf: a checkpoint -> the same layout (F32), for transformers' GPT2LMHeadModel.
#include <cstdio>

#include "cli/commands.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/hf_gpt2.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

struct HfArgs {
  std::string in, out;
};

void run_import_hf(const HfArgs& a) {
  HfGpt2Folder folder = read_hf_gpt2(a.in);
  const ModelConfig mc = folder.config;
  // The folder's tokenizer goes into the checkpoint when it has exactly the model's ids; one with
  // fewer (a vocabulary padded past the tokenizer's, e.g. 50,304 for 50,257) is checked only:
  // the checkpoint's tokenizer must name every id the model can produce.
  std::optional<ModelTokenizer> stored;
  if (folder.tokenizer && folder.tokenizer->vocab_size() == mc.vocab_size)
    stored = ModelTokenizer::of(*folder.tokenizer);
  std::vector<uint8_t> bytes =
      encode_safetensors(with_checkpoint_metadata(std::move(folder.weights), mc, stored ? &*stored : nullptr));
  auto trainer = Trainer::from_checkpoint(bytes, a.in);  // the same checks as any checkpoint load
  bytes.clear();
  bytes.shrink_to_fit();
  write_file_atomic(a.out, trainer->save_checkpoint(false));
  std::string tok = "no tokenizer files";
  if (folder.tokenizer)
    tok = "tokenizer " + folder.tokenizer_from + ", " + std::to_string(folder.tokenizer->vocab_size()) + " ids, " +
          (!stored              ? "checked but not stored (fewer ids than the model's vocabulary)"
           : stored->is_bytes() ? "byte-level, stored"
                                : "byte-level BPE, stored");
  std::printf("wrote %s: GPT-2 with %d layers, d %d, %d heads, ctx %d, vocab %d, gelu %s, %lld parameters (%s; %s)\n",
              a.out.c_str(), mc.n_layers, mc.d_model, mc.n_heads, mc.ctx, mc.vocab_size, mc.gelu.c_str(),
              (long long)mc.param_count(), folder.weights_from.c_str(), tok.c_str());
}

void run_export_hf(const HfArgs& a) {
  const std::vector<uint8_t> bytes = read_file_bytes(a.in);
  const SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), a.in);
  const CheckpointContents c = inspect_checkpoint(f, a.in);  // every parameter there, with its shape
  // The tokenizer the checkpoint records (bytes for a byte-level model); none for a model of ids.
  std::optional<Tokenizer> tok;
  if (c.tokenizer.reads_text()) tok.emplace(c.tokenizer.text());
  write_hf_gpt2(a.out, c.model, f, tok ? &*tok : nullptr);
  std::printf("wrote %s: config.json (activation %s), model.safetensors (F32, %lld parameters)%s\n", a.out.c_str(),
              c.model.gelu == "tanh" ? "gelu_new" : "gelu", (long long)c.model.param_count(),
              !tok              ? " (no tokenizer: this checkpoint records none)"
              : tok->is_bytes() ? ", tokenizer.json (byte-level)"
                                : ", tokenizer.json (byte-level BPE)");
}

}  // namespace

void add_hf(CLI::App& app) {
  auto i = std::make_shared<HfArgs>();
  CLI::App* im = app.add_subcommand(
      "import-hf",
      "Make a checkpoint of a Hugging Face GPT-2 model folder (config.json, model.safetensors, tokenizer)");
  im->add_option("folder", i->in,
                 "Folder with config.json, model.safetensors (or model.safetensors.index.json and its shards; F32, F16 "
                 "or BF16) and vocab.json + merges.txt or tokenizer.json")
      ->required();
  im->add_option("--out", i->out, "Checkpoint to write")->required();
  im->callback([i]() { run_import_hf(*i); });

  auto e = std::make_shared<HfArgs>();
  CLI::App* ex = app.add_subcommand(
      "export-hf", "Write a checkpoint as a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer)");
  ex->add_option("checkpoint", e->in, "Checkpoint to export")->required();
  ex->add_option("--out", e->out,
                 "Folder to write (new, empty, or an earlier export; it is replaced as a whole, never half-written)")
      ->required();
  ex->callback([e]() { run_export_hf(*e); });
}

}  // namespace ptl::cli
