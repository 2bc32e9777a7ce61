// ptl eval: loss per token, perplexity and bits per byte of a checkpoint on a text, in the
// checkpoint's tokenizer.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "engine/data.h"
#include "engine/error.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

struct EvalArgs {
  std::string checkpoint, adapter, data, split;
  bool json = false;
};

// The corpus a checkpoint was trained on: the recorded path, or, for a model trained elsewhere on
// TinyShakespeare (the shipped model records the path of the machine that trained it), the copy
// this machine has.
std::string training_corpus_path(const std::string& recorded, const std::string& checkpoint) {
  check(!recorded.empty(), checkpoint + " does not record its training data; pass --data FILE");
  if (std::filesystem::exists(recorded)) return recorded;
  if (std::filesystem::path(recorded).filename() == "tinyshakespeare.txt") return find_tinyshakespeare();
  throw Error(checkpoint + " was trained on " + recorded + ", which is not on this machine; pass --data FILE");
}

void run_eval(const EvalArgs& a) {
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.checkpoint), a.checkpoint);
  if (!a.adapter.empty()) trainer->load_adapter(read_file_bytes(a.adapter), a.adapter);
  EvalResult r;
  std::string what;
  check(a.split.empty() || !a.data.ends_with(".jsonl"),
        "--split applies to a text corpus; SFT examples (.jsonl) are evaluated in full");
  if (a.data.ends_with(".jsonl")) {
    // SFT examples: the loss of the replies only (the mask of training), every example once.
    SftData d(read_sft_file(a.data, &trainer->tokenizer().id()), trainer->model_config().ctx, 0.0, a.data,
              trainer->tokenizer());
    r = trainer->evaluate_batches(d.all_batches(trainer->train_config().batch));
    what = a.data + (trainer->tokenizer().is_bytes() ? " (reply bytes only)" : " (reply tokens only)");
  } else {
    // A text: the whole file (every byte after the first predicted once) by default, or one side
    // of the spec's 90/10 split. Without --data, the validation split of the training corpus.
    std::string path = a.data.empty() ? training_corpus_path(trainer->train_config().data_path, a.checkpoint) : a.data;
    std::string split = a.split.empty() ? (a.data.empty() ? "val" : "all") : a.split;
    if (split == "all") {
      r = trainer->evaluate_text(read_text_file(path));
      what = path;
    } else {
      trainer->set_corpus(read_text_file(path), path);
      r = trainer->evaluate_text(split == "val" ? trainer->corpus().val() : trainer->corpus().train());
      what = (split == "val" ? "validation split of " : "training split of ") + path;
    }
  }
  // loss: nats per token; bits per byte: the same total over the bytes those tokens stand for,
  // comparable between a byte-level and a BPE model.
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"loss", r.loss},
                                       {"perplexity", r.perplexity()},
                                       {"bits_per_byte", r.bits_per_byte()},
                                       {"tokens", r.tokens},
                                       {"bytes", std::llround(r.bytes)},
                                       {"tokenizer", trainer->tokenizer().id().to_json()}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%s\nloss %.4f per token | perplexity %.3f | %.4f bits/byte | %lld tokens, %.0f bytes (%s)\n",
                what.c_str(), r.loss, r.perplexity(), r.bits_per_byte(), (long long)r.tokens, r.bytes,
                trainer->tokenizer().id().describe().c_str());
  }
}

}  // namespace

void add_eval(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd =
      app.add_subcommand("eval", "Evaluate a checkpoint: loss per token, perplexity, bits per byte (its tokenizer's)");
  cmd->add_option("checkpoint", a->checkpoint, "Checkpoint (.tinygpt or .safetensors)")->required();
  cmd->add_option("--adapter", a->adapter, "LoRA adapter (.tinygpt-lora) trained on this checkpoint");
  cmd->add_option("--data", a->data,
                  "Text file to evaluate in full, or SFT examples (.jsonl: loss of the replies) "
                  "(default: the training corpus's validation split)");
  cmd->add_option("--split", a->split,
                  "Which part of the text: all, train (the first 90%) or val (the last 10%, the spec's "
                  "validation split) (default: all with --data, else val)")
      ->check(CLI::IsMember({"all", "train", "val"}));
  cmd->add_flag("--json", a->json,
                "Print one JSON object {loss (per token), perplexity, bits_per_byte, tokens, bytes, tokenizer}");
  cmd->callback([a]() { run_eval(*a); });
}

}  // namespace ptl::cli
