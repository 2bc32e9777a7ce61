// ptl export / ptl import: checkpoints in and out of ptl.
//   export: the weights and metadata of a checkpoint without its optimizer state (a third of
//           the size), for sampling, evaluating, fine-tuning or loading in PyTorch elsewhere;
//           with --dtype f16 or bf16 the weights are stored in 16 bits (a sixth of the size).
//   import: a safetensors file with the spec's parameters that another tool wrote (no ptl
//           metadata), turned into a checkpoint ptl can sample from, evaluate and train.
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/commands.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/tokenizer_files.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string checkpoint, out, dtype = "f32";
};

void run_export(const ExportArgs& a) {
  check_not_overwriting(a.out, a.checkpoint,
                        "--out " + a.out + " is the checkpoint being exported; choose another --out");
  const auto bytes = read_file_bytes(a.checkpoint);
  auto trainer = Trainer::from_checkpoint(bytes, a.checkpoint);
  auto out = trainer->save_checkpoint(false);
  if (a.dtype != "f32") {
    // Every tensor of a weights-only checkpoint is an F32 parameter; the metadata stays as it is
    // (every reader widens the weights back to F32 on load).
    SafeTensors f = decode_safetensors(out.data(), out.size(), a.out);
    for (auto& t : f.tensors) t.encoding = a.dtype == "f16" ? Encoding::f16 : Encoding::bf16;
    out = encode_safetensors(f);
  }
  write_file_atomic(a.out, out);
  std::printf("wrote %s: %lld parameters at step %lld as %s, %.2f MB (%s: %.2f MB; optimizer state left out)\n",
              a.out.c_str(), (long long)trainer->model_config().param_count(), (long long)trainer->state().step,
              a.dtype == "f32"   ? "F32"
              : a.dtype == "f16" ? "F16"
                                 : "BF16",
              out.size() / 1e6, a.checkpoint.c_str(), bytes.size() / 1e6);
}

struct ImportArgs {
  std::string file, out, tokenizer;
  int heads = 0;
};

void run_import(const ImportArgs& a) {
  check_not_overwriting(a.out, a.file, "--out " + a.out + " is the file being imported; choose another --out");
  const auto bytes = read_file_bytes(a.file);
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), a.file);
  std::string how;
  if (f.metadata.count("model_config")) {
    // Already a ptl checkpoint (or one from python_ref): validated and written as is, less the
    // optimizer state, which a model from elsewhere would not carry on.
    check(a.heads == 0, a.file + " is a ptl checkpoint: its config has the heads; --heads is for files without one");
    check(a.tokenizer.empty(),
          a.file + " is a ptl checkpoint: it records its tokenizer; --tokenizer is for files without one");
    how = "a ptl checkpoint already";
  } else {
    const ModelConfig mc = infer_model_config(f, a.heads, a.file);
    how = "config from the tensors' shapes" + std::string(a.heads ? "" : ", heads of the preset with those shapes");
    // The tokenizer given (its vocabulary must be tok_emb's rows); without one, bytes for 256 rows.
    std::optional<ModelTokenizer> tok;
    if (!a.tokenizer.empty()) {
      tok = ModelTokenizer::of(load_tokenizer(a.tokenizer));
      check(tok->vocab_size() == mc.vocab_size, a.tokenizer + " has " + std::to_string(tok->vocab_size()) +
                                                    " tokens but " + a.file + "'s tok_emb.weight has " +
                                                    std::to_string(mc.vocab_size) + " rows (they must be equal)");
      how += ", tokenizer " + a.tokenizer;
    }
    f = with_checkpoint_metadata(std::move(f), mc, tok ? &*tok : nullptr);
  }
  auto trainer = Trainer::from_checkpoint(encode_safetensors(f), a.file);  // every tensor checked here
  write_file_atomic(a.out, trainer->save_checkpoint(false));
  const ModelConfig& mc = trainer->model_config();
  std::printf("wrote %s: %d layers, d %d, %d heads, ctx %d, %lld parameters (%s)\n", a.out.c_str(), mc.n_layers,
              mc.d_model, mc.n_heads, mc.ctx, (long long)mc.param_count(), how.c_str());
}

}  // namespace

void add_import_export(CLI::App& app) {
  auto e = std::make_shared<ExportArgs>();
  CLI::App* ex = app.add_subcommand(
      "export",
      "Write a checkpoint's weights and metadata without its optimizer state (for sampling or use elsewhere)");
  ex->add_option("checkpoint", e->checkpoint, "Checkpoint to export")->required();
  ex->add_option("--out", e->out, "File to write (.tinygpt or .safetensors)")->required();
  ex->add_option("--dtype", e->dtype,
                 "Weights as f32 (exact), f16 or bf16 (half the size, rounded to nearest even; every ptl front "
                 "end and python_ref widens them back to f32 on load)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  ex->callback([e]() { run_export(*e); });

  auto i = std::make_shared<ImportArgs>();
  CLI::App* im = app.add_subcommand(
      "import", "Make a ptl checkpoint of a safetensors file holding this GPT's parameters (e.g. saved from PyTorch)");
  im->add_option("file", i->file,
                 "safetensors file with the parameter names of docs/checkpoint-format.md (F32, F16 or BF16)")
      ->required();
  im->add_option("--out", i->out, "Checkpoint to write")->required();
  im->add_option("--heads", i->heads, "Attention heads (not in any tensor's shape; default: the matching preset's)")
      ->check(at_least(1));
  im->add_option("--tokenizer", i->tokenizer,
                 "The tokenizer the weights read (tokenizer.json or a folder of GPT-2's files; default: bytes for a "
                 "vocabulary of 256)");
  im->callback([i]() { run_import(*i); });
}

}  // namespace ptl::cli
