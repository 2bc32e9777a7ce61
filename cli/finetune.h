#pragma once
// What `ptl lora train` and `ptl sft` share: the options of a fine-tuning run, setting a trainer
// up on a base checkpoint and its data in the base's tokenizer (.txt: next-token LM with a 90/10
// split; .jsonl: SFT), and
// the loop with progress, metrics.jsonl, validation, divergence and Ctrl-C handling.
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "engine/trainer.h"

namespace ptl::cli {

struct FinetuneArgs {
  std::string base, data, out;
  int64_t steps = 500, eval_every = 100, log_every = 50, warmup = -1;
  int batch = 0;  // 0 = the base run's batch
  double lr = kDefaultFinetuneLr;
  std::string schedule = "cosine";
  uint64_t seed = 1337;
  int threads = 0;
  double dropout = 0;  // the model's dropout rate (`ptl sft --dropout`; a LoRA run's is the adapters')
};

// Registers the shared options on `cmd` (the default learning rate is `a.lr` as given);
// `data_help` says what --data takes.
void add_finetune_options(CLI::App* cmd, FinetuneArgs& a, const std::string& data_help);

// Loads the base, starts a fresh run with the arguments' train config (its dropout is a.dropout,
// not the base run's), and attaches the data
// (.jsonl = SFT examples, anything else = text). Returns the trainer.
std::unique_ptr<Trainer> setup_finetune(const FinetuneArgs& a);

// A one-line description of the data attached by setup_finetune.
std::string describe_data(Trainer& trainer);

// Runs steps 1..steps: metrics.jsonl in `out`, validation every eval_every steps and at the end
// (when there is validation data), and `save()` after each validation, at the end and on Ctrl-C.
// `result` names what save() writes (for messages).
void run_finetune_loop(Trainer& trainer, const FinetuneArgs& a, const std::function<void()>& save,
                       const std::string& result);

}  // namespace ptl::cli
