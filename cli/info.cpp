// ptl info: what a checkpoint or preset is, how many parameters, how much memory training takes.
#include <cstdio>

#include "cli/commands.h"
#include "cli/finetune.h"
#include "engine/error.h"
#include "engine/memory.h"
#include "engine/tokenizer.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

struct InfoArgs {
  std::string checkpoint, preset;
  int batch = 0, vocab = 0;
  bool json = false, defaults = false;
};

// Bytes of the training program (engine/memory.h), each activation counted on its own: an upper
// bound of what the CPU backend allocates, whose arena shares memory by liveness.
nlohmann::json memory_estimate(const ModelConfig& mc, int batch) {
  BuildOptions opt;
  opt.batch = batch;
  const TrainingMemory m = training_memory(mc, opt, TrainConfig{});
  return {{"weights_bytes", m.weights},
          {"gradients_bytes", m.gradients},
          {"optimizer_bytes", m.optimizer},
          {"activations_bytes", m.activations},
          {"total_bytes", m.weights + m.gradients + m.optimizer + m.activations},
          {"batch", batch}};
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}

void run_info(const InfoArgs& a) {
  if (a.defaults) {
    check(a.checkpoint.empty() && a.preset.empty(), "--defaults takes no checkpoint and no --preset");
    nlohmann::json d = train_defaults();
    const nlohmann::json lora = lora_train_defaults();
    const FinetuneArgs sft_args;  // ptl sft's
    const nlohmann::json sft = {{"lr", sft_args.lr}, {"steps", sft_args.steps}};
    if (a.json) {
      d["lora_train"] = lora;
      d["sft"] = sft;
      std::printf("%s\n", d.dump(2).c_str());
      return;
    }
    std::printf("ptl train with no options:\n");
    for (const auto& [key, value] : d.items()) std::printf("  %-13s %s\n", key.c_str(), value.dump().c_str());
    std::printf("ptl lora train with no options:\n");
    for (const auto& [key, value] : lora.items()) std::printf("  %-13s %s\n", key.c_str(), value.dump().c_str());
    std::printf("ptl sft with no options:\n");
    for (const auto& [key, value] : sft.items()) std::printf("  %-13s %s\n", key.c_str(), value.dump().c_str());
    return;
  }
  check(a.checkpoint.empty() != a.preset.empty(), "give either a checkpoint or --preset NAME (or --defaults)");
  check(!a.vocab || !a.preset.empty(), "--vocab goes with --preset (a checkpoint has its own vocabulary)");
  nlohmann::json j;
  ModelConfig mc;
  int batch = a.batch;
  if (!a.preset.empty()) {
    const Preset& p = find_preset(a.preset);
    mc = p.model;
    if (a.vocab) mc.vocab_size = a.vocab;
    if (!batch) batch = p.batch;
    j["preset"] = p.name;
    j["lr"] = p.lr;
  } else {
    auto bytes = read_file_bytes(a.checkpoint);
    SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), a.checkpoint);
    CheckpointContents c = inspect_checkpoint(f, a.checkpoint);
    mc = c.model;
    if (!batch) batch = c.train ? c.train->batch : 1;
    j["checkpoint"] = a.checkpoint;
    j["format_version"] = kCheckpointVersion;
    j["created_by"] = c.created_by;
    j["step"] = c.state.step;
    j["tokens_seen"] = c.state.tokens_seen;
    j["has_optimizer_state"] = c.has_optimizer;
    // How the weights lie in the file (a half-precision export, or F32); they are F32 once loaded.
    // ("mixed" for a file from elsewhere that stores tensors in different dtypes.)
    std::string dtype;
    for (const auto& t : f.tensors) {
      if (t.name.starts_with("optim.")) continue;
      const char* d = t.encoding == Encoding::f16 ? "F16" : t.encoding == Encoding::bf16 ? "BF16" : "F32";
      dtype = dtype.empty() || dtype == d ? d : "mixed";
    }
    j["weights_dtype"] = dtype;
    if (c.train) j["train_config"] = c.train->to_json();
    if (!c.history.empty()) {
      const auto& h = c.history.back();
      j["last_loss"] = {{"step", h.step}, {"train_loss", h.train_loss}};
      if (h.val_loss) j["last_loss"]["val_loss"] = *h.val_loss;
    }
    j["sha256"] = sha256_hex(bytes);
    // The tokenizer's identity (what adapters and SFT files record), and what it is.
    nlohmann::json tok = c.tokenizer.id().to_json();
    if (c.tokenizer.reads_text()) {
      const Tokenizer& t = c.tokenizer.text();
      nlohmann::json specials = nlohmann::json::array();
      for (const auto& sp : t.specials()) specials.push_back({{"text", sp.text}, {"id", sp.id}});
      tok["merges"] = t.merge_count();
      tok["specials"] = specials;
    }
    j["tokenizer"] = tok;
  }
  j["model_config"] = mc.to_json();
  j["parameters"] = mc.param_count();
  j["training_memory"] = memory_estimate(mc, batch);
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (j.contains("preset"))
    std::printf("preset:      %s (default learning rate %g)\n", j["preset"].get<std::string>().c_str(),
                j["lr"].get<double>());
  if (j.contains("checkpoint")) {
    std::printf("checkpoint:  %s (format %d, %s)\n", a.checkpoint.c_str(), kCheckpointVersion,
                j["created_by"].get<std::string>().c_str());
    std::printf("trained:     %lld steps, %lld tokens; optimizer state %s\n", (long long)j["step"].get<int64_t>(),
                (long long)j["tokens_seen"].get<int64_t>(),
                j["has_optimizer_state"].get<bool>() ? "included" : "absent");
    if (j["weights_dtype"] != "F32")
      std::printf("weights:     %s in the file (widened to F32 on load)\n",
                  j["weights_dtype"].get<std::string>().c_str());
    if (j.contains("last_loss")) {
      std::printf("last loss:   step %lld, train %.4f", (long long)j["last_loss"]["step"].get<int64_t>(),
                  j["last_loss"]["train_loss"].get<double>());
      if (j["last_loss"].contains("val_loss")) std::printf(", val %.4f", j["last_loss"]["val_loss"].get<double>());
      std::printf("\n");
    }
  }
  std::printf("model:       %d layers, d_model %d, %d heads (head dim %d), context %d, vocab %d%s\n", mc.n_layers,
              mc.d_model, mc.n_heads, mc.head_dim(), mc.ctx, mc.vocab_size, mc.vocab_size == 256 ? " (bytes)" : "");
  if (j.contains("tokenizer")) {
    const auto& tok = j["tokenizer"];
    const std::string type = tok["type"].get<std::string>();
    if (type == "bpe") {
      std::printf("tokenizer:   byte-level BPE, %d tokens (%lld merges", tok["vocab_size"].get<int>(),
                  (long long)tok["merges"].get<int64_t>());
      for (const auto& sp : tok["specials"])
        std::printf(", %s = %d", sp["text"].get<std::string>().c_str(), sp["id"].get<int>());
      std::printf("), sha256 %s\n", tok["sha256"].get<std::string>().c_str());
    } else if (type == "byte") {
      std::printf("tokenizer:   bytes (one token per byte)\n");
    } else {
      std::printf("tokenizer:   none (the model reads token ids only)\n");
    }
  }
  std::printf("parameters:  %lld\n", (long long)mc.param_count());
  const auto& m = j["training_memory"];
  std::printf("training memory at batch %d: %s (weights %s, gradients %s, AdamW moments %s, activations %s)\n", batch,
              mib(m["total_bytes"]).c_str(), mib(m["weights_bytes"]).c_str(), mib(m["gradients_bytes"]).c_str(),
              mib(m["optimizer_bytes"]).c_str(), mib(m["activations_bytes"]).c_str());
}

}  // namespace

void add_info(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a checkpoint or a preset: config, parameters, memory");
  cmd->add_option("checkpoint", a->checkpoint, "Checkpoint to describe");
  cmd->add_option("--preset", a->preset, "Describe a preset instead");
  cmd->add_option("--batch", a->batch, "Batch size for the memory estimate (default: the run's or preset's)")
      ->check(at_least(1));
  cmd->add_option("--vocab", a->vocab, "With --preset: that preset with this vocabulary size instead of 256")
      ->check(CLI::Range(1, ModelConfig::kMaxVocab));
  cmd->add_flag("--defaults", a->defaults, "Describe what `ptl train` and `ptl lora train` do with no options instead");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a]() { run_info(*a); });
}

}  // namespace ptl::cli
