// ptl init / ptl program: what another executor (the WebGPU backend, a test harness) needs to
// run the engine's model without knowing it: freshly initialised weights and the programs.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "engine/error.h"
#include "engine/lora.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

struct ModelArgs {
  std::string preset = "tiny", checkpoint, out, program = "train";
  int batch = 0, seq = 0, layers = 0, d_model = 0, heads = 0, ctx = 0;
  uint64_t seed = 1337;
  double dropout = 0;  // the train program's dropout rate
  LoraConfig lora;     // rank 0: no adapters
  std::string lora_targets = "q,v";
};

ModelConfig model_from(const ModelArgs& a, int* batch) {
  ModelConfig mc;
  if (!a.checkpoint.empty()) {
    auto bytes = read_file_bytes(a.checkpoint);
    mc = inspect_checkpoint(decode_safetensors(bytes.data(), bytes.size(), a.checkpoint), a.checkpoint).model;
    if (!*batch) *batch = 1;
  } else {
    const Preset& p = find_preset(a.preset);
    mc = p.model;
    if (!*batch) *batch = p.batch;
  }
  if (a.layers) mc.n_layers = a.layers;
  if (a.d_model) mc.d_model = a.d_model;
  if (a.heads) mc.n_heads = a.heads;
  if (a.ctx) mc.ctx = a.ctx;
  mc.validate();
  return mc;
}

void add_model_options(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("--preset", a.preset, "Model preset")->capture_default_str();
  cmd->add_option("--batch", a.batch, "Batch size (default: the preset's)")->check(at_least(1));
  cmd->add_option("--layers", a.layers, "Override the number of layers")->check(at_least(1));
  cmd->add_option("--d-model", a.d_model, "Override the width")->check(at_least(1));
  cmd->add_option("--heads", a.heads, "Override the number of heads")->check(at_least(1));
  cmd->add_option("--ctx", a.ctx, "Override the context length")->check(at_least(1));
}

void run_init(const ModelArgs& a) {
  int batch = a.batch;
  ModelConfig mc = model_from(a, &batch);
  TrainConfig tc;
  tc.batch = batch;
  tc.seed = a.seed;
  Trainer t(mc, tc);
  write_file_atomic(a.out, t.save_checkpoint(false));
  std::printf("wrote %s: %lld parameters, seed %llu\n", a.out.c_str(), (long long)mc.param_count(),
              (unsigned long long)a.seed);
}

void run_program(const ModelArgs& a) {
  int batch = a.batch;
  ModelConfig mc = model_from(a, &batch);
  BuildOptions opt;
  opt.batch = batch;
  opt.seq = a.seq;
  if (a.lora.rank > 0) {
    opt.lora = a.lora;
    opt.lora.targets = parse_lora_targets(a.lora_targets);
    validate_lora(opt.lora);
    adapter_tensors(mc, opt.lora);  // throws when the rank is larger than a projection
  }
  Program p;
  check(a.dropout == 0 || a.program == "train", "--dropout applies to the train program only");
  if (a.program == "train") {
    TrainConfig tc;
    tc.dropout = a.dropout;
    p = build_train_program(mc, opt, tc);
  } else if (a.program == "eval")
    p = build_eval_program(mc, opt);
  else if (a.program == "forward")
    p = build_forward_program(mc, opt);
  else if (a.program == "inspect")
    p = build_inspect_program(mc, a.seq ? a.seq : mc.ctx, opt.lora);  // batch 1
  else {
    // --seq K: a prompt's K tokens per run into the KV cache (one product per weight for all K)
    check(a.seq <= mc.ctx,
          "--seq " + std::to_string(a.seq) + " is longer than the context (" + std::to_string(mc.ctx) + ")");
    p = build_generate_program(mc, opt.lora, a.seq ? a.seq : 1);
  }
  nlohmann::json j = p.to_json();
  j["model_config"] = mc.to_json();
  const std::string text = j.dump(1);
  if (a.out.empty() || a.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    write_file_atomic(a.out, std::vector<uint8_t>(text.begin(), text.end()));
    std::fprintf(stderr, "wrote %s: %zu tensors, %zu ops\n", a.out.c_str(), p.tensors.size(), p.ops.size());
  }
}

}  // namespace

void add_export(CLI::App& app) {
  auto a = std::make_shared<ModelArgs>();
  CLI::App* init = app.add_subcommand("init", "Write a freshly initialised (untrained) checkpoint");
  add_model_options(init, *a);
  init->add_option("--seed", a->seed, "Seed of the initial weights")->capture_default_str();
  init->add_option("--out", a->out, "Checkpoint to write")->required();
  init->callback([a]() { run_init(*a); });

  auto b = std::make_shared<ModelArgs>();
  CLI::App* prog =
      app.add_subcommand("program", "Print a model's program (tensors and ops) as JSON for other executors");
  add_model_options(prog, *b);
  prog->add_option("checkpoint", b->checkpoint, "Take the model config from this checkpoint instead of --preset");
  prog->add_option("--program", b->program, "Which program")
      ->check(CLI::IsMember({"train", "eval", "forward", "generate", "inspect"}))
      ->capture_default_str();
  prog->add_option("--seq", b->seq,
                   "Tokens per row (default: the context); generate: tokens per run (default 1; more for a prompt)")
      ->check(at_least(1));
  prog->add_option("--out", b->out, "File to write (default: stdout)");
  prog->add_option("--dropout", b->dropout, "Dropout rate of the train program (docs/model.md, \"Dropout\")")
      ->check(dropout_rate());
  // An adapted model's programs (the frozen base plus adapters; in the train program only the
  // adapters train), as the fine-tuning engine builds them: for executors that run LoRA.
  prog->add_option("--lora-rank", b->lora.rank, "LoRA adapter rank r (0 = no adapters)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  prog->add_option("--lora-alpha", b->lora.alpha, "LoRA scale: the update is (alpha / r) B A")->capture_default_str();
  prog->add_option("--lora-targets", b->lora_targets,
                   "Adapted projections: q, k, v, o, fc_in, fc_out, qkv (one adapter over q, k and v) or all")
      ->capture_default_str();
  prog->callback([b, prog]() {
    check(b->checkpoint.empty() || prog->count("--preset") == 0,
          "--preset and a checkpoint both name the model: give one of them");
    run_program(*b);
  });
}

}  // namespace ptl::cli
