// ptl eval: loss, perplexity and bits per byte of a checkpoint on a text.
#include <cstdio>

#include "cli/commands.h"
#include "engine/error.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

struct EvalArgs {
  std::string checkpoint, adapter, data;
  bool json = false;
};

void run_eval(const EvalArgs& a) {
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.checkpoint), a.checkpoint);
  if (!a.adapter.empty()) trainer->load_adapter(read_file_bytes(a.adapter), a.adapter);
  EvalResult r;
  std::string what;
  if (a.data.ends_with(".jsonl")) {
    // SFT examples: the loss of the replies only (the mask of training), every example once.
    SftData d(read_sft_file(a.data), trainer->model_config().ctx, 0.0, a.data);
    r = trainer->evaluate_batches(d.all_batches(trainer->train_config().batch));
    what = a.data + " (reply bytes only)";
  } else if (!a.data.empty()) {
    // The whole file, every byte after the first predicted once.
    r = trainer->evaluate_text(read_text_file(a.data));
    what = a.data;
  } else {
    // The validation split of the corpus the checkpoint was trained on, all of it.
    const std::string& path = trainer->train_config().data_path;
    check(!path.empty(), a.checkpoint + " does not record its training data; pass --data FILE");
    trainer->set_corpus(read_text_file(path), path);
    r = trainer->evaluate_text(trainer->corpus().val());
    what = "validation split of " + path;
  }
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"loss", r.loss},
                                       {"perplexity", r.perplexity()},
                                       {"bits_per_byte", r.bits_per_byte()},
                                       {"tokens", r.tokens}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%s\nloss %.4f | perplexity %.3f | %.4f bits/byte | %lld tokens\n", what.c_str(), r.loss,
                r.perplexity(), r.bits_per_byte(), (long long)r.tokens);
  }
}

}  // namespace

void add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a checkpoint: loss, perplexity, bits per byte");
  cmd->add_option("checkpoint", a->checkpoint, "Checkpoint (.tinygpt or .safetensors)")->required();
  cmd->add_option("--adapter", a->adapter, "LoRA adapter (.tinygpt-lora) trained on this checkpoint");
  cmd->add_option("--data", a->data,
                  "Text file to evaluate in full, or SFT examples (.jsonl: loss of the replies) "
                  "(default: the training corpus's validation split)");
  cmd->add_flag("--json", a->json, "Print one JSON object {loss, perplexity, bits_per_byte, tokens}");
  cmd->callback([a]() { run_eval(*a); });
}

}  // namespace ptl::cli
