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
  HfGpt2Import imported = import_hf_gpt2(read_hf_gpt2(a.in), a.in);
  write_file_atomic(a.out, imported.checkpoint);
  std::printf("wrote %s: %s\n", a.out.c_str(), imported.summary.c_str());
}

void run_export_hf(const HfArgs& a) {
  const std::vector<uint8_t> bytes = read_file_bytes(a.in);
  const HfGpt2Export e = hf_gpt2_export(decode_safetensors(bytes.data(), bytes.size(), a.in), a.in);
  write_hf_gpt2(a.out, e.files);
  std::printf("wrote %s: %s\n", a.out.c_str(), e.summary.c_str());
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
