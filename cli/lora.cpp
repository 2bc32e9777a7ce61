// ptl lora train | merge | info | export-peft | import-peft: LoRA adapters on a frozen base
// checkpoint (docs/post-training.md), and PEFT's adapter folders for GPT-2 models (docs/gpt2.md).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "cli/finetune.h"
#include "engine/error.h"
#include "engine/peft.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAdapterFile = "adapter.tinygpt-lora";

// "q,k,v,o,fc_in,fc_out" reads better as the shorthand it is.
std::string targets_option(const std::set<std::string>& targets) {
  return targets == parse_lora_targets("all") ? "all" : lora_targets_string(targets);
}

// `ptl lora train`'s options; their defaults are the engine's (default_lora(), kDefaultLoraLr,
// kDefaultLoraSteps), which the WebAssembly API and the playground use too.
struct LoraArgs {
  FinetuneArgs run;
  int rank = default_lora().rank;
  double alpha = default_lora().alpha;
  std::string targets = targets_option(default_lora().targets);
  double weight_decay = default_lora().weight_decay;
  double dropout = default_lora().dropout;  // on the adapters' input
  LoraArgs() {
    run.lr = kDefaultLoraLr;
    run.steps = kDefaultLoraSteps;
  }
};

int64_t count(const std::vector<TensorInfo>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

void run_lora_train(const LoraArgs& a) {
  LoraConfig lora;
  lora.rank = a.rank;
  lora.alpha = a.alpha;
  lora.targets = parse_lora_targets(a.targets);
  lora.weight_decay = a.weight_decay;
  lora.dropout = a.dropout;
  validate_lora(lora);
  auto trainer = setup_finetune(a.run);
  trainer->enable_lora(lora, a.run.seed);
  const ModelConfig& mc = trainer->model_config();
  const TrainConfig& tc = trainer->train_config();
  const int64_t adapter_params = count(adapter_tensors(mc, lora));
  const std::string path = (fs::path(a.run.out) / kAdapterFile).string();
  check_not_overwriting(path, a.run.base, "--out " + a.run.out + " would write " + path + " over the base checkpoint");
  std::printf(
      "ptl lora train: base %s (%d layers, d %d, ctx %d, %lld parameters, frozen)\n"
      "adapters: rank %d, alpha %g on %s: %lld trainable parameters (%.2f%% of the base)\n"
      "batch %d, %s lr %.2e, %lld steps\ndata: %s\nout: %s\n",
      a.run.base.c_str(), mc.n_layers, mc.d_model, mc.ctx, (long long)mc.param_count(), lora.rank, lora.alpha,
      lora_targets_string(lora.targets).c_str(), (long long)adapter_params,
      100.0 * double(adapter_params) / double(mc.param_count()), tc.batch, tc.schedule.c_str(), tc.lr,
      (long long)tc.steps, describe_data(*trainer).c_str(), a.run.out.c_str());
  std::fflush(stdout);
  run_finetune_loop(
      *trainer, a.run, [&] { write_file_atomic(path, trainer->save_adapter()); }, "adapter");
  const auto& s = trainer->state();
  std::printf("done: %lld steps, %.1f s (%.0f tokens/s). Adapter: %s (%lld bytes)\n", (long long)s.step,
              s.elapsed_seconds, double(s.tokens_seen) / std::max(1e-9, s.elapsed_seconds), path.c_str(),
              (long long)fs::file_size(path));
}

struct MergeArgs {
  std::string base, adapter, out;
};

void run_lora_merge(const MergeArgs& a) {
  check_not_overwriting(a.out, a.base,
                        "--out " + a.out + " is the base checkpoint: the merge would replace it; choose another --out");
  check_not_overwriting(a.out, a.adapter, "--out " + a.out + " is the adapter file; choose another --out");
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.base), a.base);
  trainer->load_adapter(read_file_bytes(a.adapter), a.adapter);
  const LoraConfig lora = trainer->lora_config();
  trainer->merge_lora();
  write_file_atomic(a.out, trainer->save_checkpoint(false));
  std::printf("merged %s (rank %d, alpha %g on %s) into %s: %s\n", a.adapter.c_str(), lora.rank, lora.alpha,
              lora_targets_string(lora.targets).c_str(), a.base.c_str(), a.out.c_str());
}

struct LoraInfoArgs {
  std::string adapter;
  bool json = false;
};

void run_lora_info(const LoraInfoArgs& a) {
  const auto bytes = read_file_bytes(a.adapter);
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), a.adapter);
  AdapterContents c = inspect_adapter(f, a.adapter);
  const int64_t params = count(adapter_tensors(c.base_model, c.lora));
  nlohmann::json j = {{"adapter", a.adapter},
                      {"format_version", kAdapterVersion},
                      {"created_by", c.created_by},
                      {"base_sha256", c.base_sha256},
                      {"base_tokenizer", c.tokenizer.to_json()},
                      {"base_model_config", c.base_model.to_json()},
                      {"base_parameters", c.base_model.param_count()},
                      {"lora_config", lora_to_json(c.lora)},
                      {"parameters", params},
                      {"steps", c.steps}};
  if (c.train) j["train_config"] = c.train->to_json();
  if (!c.history.empty()) {
    const auto& h = c.history.back();
    j["last_loss"] = {{"step", h.step}, {"train_loss", h.train_loss}};
    if (h.val_loss) j["last_loss"]["val_loss"] = *h.val_loss;
  }
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("adapter:     %s (tinygpt-lora %d, %s)\n", a.adapter.c_str(), kAdapterVersion, c.created_by.c_str());
  std::printf("base:        sha256 %s\n             %d layers, d_model %d, %d heads, context %d (%lld parameters)\n",
              c.base_sha256.c_str(), c.base_model.n_layers, c.base_model.d_model, c.base_model.n_heads,
              c.base_model.ctx, (long long)c.base_model.param_count());
  std::printf(
      "lora:        rank %d, alpha %g, targets %s, weight decay %g, dropout %g: %lld parameters (%.2f%% of the "
      "base)\n",
      c.lora.rank, c.lora.alpha, lora_targets_string(c.lora.targets).c_str(), c.lora.weight_decay, c.lora.dropout,
      (long long)params, 100.0 * double(params) / double(c.base_model.param_count()));
  std::printf("tokenizer:   %s (the base's)\n", c.tokenizer.describe().c_str());
  std::printf("trained:     %lld steps", (long long)c.steps);
  if (c.train && !c.train->data_path.empty()) std::printf(" on %s", c.train->data_path.c_str());
  std::printf("\n");
  if (j.contains("last_loss")) {
    std::printf("last loss:   step %lld, train %.4f", (long long)j["last_loss"]["step"].get<int64_t>(),
                j["last_loss"]["train_loss"].get<double>());
    if (j["last_loss"].contains("val_loss")) std::printf(", val %.4f", j["last_loss"]["val_loss"].get<double>());
    std::printf("\n");
  }
}

struct PeftArgs {
  std::string in, out, base, base_model;
};

void run_export_peft(const PeftArgs& a) {
  const auto bytes = read_file_bytes(a.in);
  const PeftExport e = peft_export(decode_safetensors(bytes.data(), bytes.size(), a.in), a.in, a.base_model);
  const PeftConfig& pc = e.config;
  const SafeTensors& peft = e.tensors;
  const LoraConfig& lora = pc.lora;
  write_peft_folder(a.out, e.files);
  std::string modules;
  const nlohmann::json written = nlohmann::json::parse(peft_config_json(pc));
  for (const auto& m : written["target_modules"]) modules += (modules.empty() ? "" : ", ") + m.get<std::string>();
  std::printf(
      "wrote %s: adapter_config.json (LORA, r %d, lora_alpha %g, target_modules %s), adapter_model.safetensors "
      "(F32, %zu tensors)\n",
      a.out.c_str(), lora.rank, lora.alpha, modules.c_str(), peft.tensors.size());
}

void run_import_peft(const PeftArgs& a) {
  check_not_overwriting(a.out, a.base, "--out " + a.out + " is the base checkpoint; choose another --out");
  const PeftFolder folder = read_peft_folder(a.in);
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.base), a.base);
  const ModelConfig mc = trainer->model_config();
  const LoraConfig& lora = folder.config.lora;
  try {
    trainer->enable_lora(lora, 0);  // throws when the rank is larger than a layer of this base
  } catch (const Error& e) {
    fail(folder.weights_path + ": does not fit the base " + a.base + ": " + e.what());
  }
  const SafeTensors ours = adapter_from_peft(folder.tensors, mc, lora, folder.weights_path);
  for (const auto& t : ours.tensors) trainer->write_tensor(t.name, t.data.data(), t.data.size());
  // The adapter file of a run that never trained here: no train config, state or history.
  const std::vector<uint8_t> saved = trainer->save_adapter();
  SafeTensors f = decode_safetensors(saved.data(), saved.size(), a.out);
  for (const char* key : {"train_config", "train_state", "loss_history"}) f.metadata.erase(key);
  if (!folder.config.base_model.empty()) f.metadata[kPeftBaseModelKey] = folder.config.base_model;
  write_file_atomic(a.out, encode_safetensors(f));
  std::printf("wrote %s: LoRA rank %d, alpha %g on %s (%zu tensors) for base %s\n", a.out.c_str(), lora.rank,
              lora.alpha, lora_targets_string(lora.targets).c_str(), ours.tensors.size(), a.base.c_str());
}

struct LoraBenchArgs {
  std::string presets = "small,large";
  int rank = default_lora().rank, steps = 20, warmup = 3;
  double alpha = default_lora().alpha;
  std::string targets = targets_option(default_lora().targets);
  bool json = false;
};

// Bytes of a training program's tensors by role, as the CPU backend lays them out: persistent
// ones in the store (weights, AdamW moments), the rest in the executor's arena.
nlohmann::json program_bytes(const Program& p) {
  int64_t weights = 0, grads = 0, moments = 0, acts = 0;
  for (const auto& t : p.tensors) {
    if (t.kind == TensorKind::parameter)
      weights += t.bytes();
    else if (t.kind == TensorKind::optim_state)
      moments += t.bytes();
    else if (t.kind == TensorKind::gradient && p.find(t.name.substr(5)) >= 0 &&
             p.tensor(p.find(t.name.substr(5))).kind == TensorKind::parameter)
      grads += t.bytes();
    else
      acts += t.bytes();
  }
  // (The arena can be smaller than the sum of the rest: the backend may reuse memory.)
  return {{"weights", weights}, {"gradients", grads}, {"moments", moments}, {"other_tensors_sum", acts}};
}

// Full fine-tuning against LoRA on the same base: memory (store + arena) and step time, the two
// sides alternating step by step so machine noise hits both alike.
void run_lora_bench(const LoraBenchArgs& a) {
  LoraConfig lora;
  lora.rank = a.rank;
  lora.alpha = a.alpha;
  lora.targets = parse_lora_targets(a.targets);
  validate_lora(lora);
  nlohmann::json out = nlohmann::json::array();
  std::stringstream list(a.presets);
  for (std::string name; std::getline(list, name, ',');) {
    const Preset& preset = find_preset(name);
    TrainConfig tc;
    tc.batch = preset.batch;
    tc.steps = 1000;
    const auto bytes = Trainer(preset.model, tc).save_checkpoint(false);
    auto full = Trainer::from_checkpoint(bytes, name), adapted = Trainer::from_checkpoint(bytes, name);
    full->start_finetune(tc);
    adapted->start_finetune(tc);
    adapted->enable_lora(lora, 1);
    Rng rng(7);
    Batch b{tc.batch, preset.model.ctx, std::vector<int32_t>(size_t(tc.batch) * preset.model.ctx),
            std::vector<int32_t>(size_t(tc.batch) * preset.model.ctx)};
    for (auto& t : b.inputs) t = int32_t(rng.below(256));
    for (auto& t : b.targets) t = int32_t(rng.below(256));
    std::vector<double> tf, tl;
    for (int i = 0; i < a.warmup + a.steps; ++i) {
      const double f = full->train_step(b).seconds, l = adapted->train_step(b).seconds;
      if (i >= a.warmup) tf.push_back(f), tl.push_back(l);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto side = [&](Trainer& t, const std::vector<double>& times) {
      nlohmann::json j = program_bytes(t.train_executor().program());
      j["store_bytes"] = t.store().bytes();
      j["arena_bytes"] = t.train_executor().arena_bytes();
      j["total_bytes"] = t.store().bytes() + t.train_executor().arena_bytes();
      j["step_ms"] = 1000 * median(times);
      return j;
    };
    nlohmann::json j = {{"preset", preset.name},
                        {"batch", tc.batch},
                        {"parameters", preset.model.param_count()},
                        {"lora", lora_to_json(lora)},
                        {"adapter_parameters", count(adapter_tensors(preset.model, lora))},
                        {"full", side(*full, tf)},
                        {"lora_run", side(*adapted, tl)}};
    out.push_back(j);
    if (a.json) continue;
    auto mib = [](const nlohmann::json& v) { return double(v.get<int64_t>()) / (1 << 20); };
    const auto &F = j["full"], &L = j["lora_run"];
    std::printf("%s (batch %d, %lld parameters; LoRA rank %d on %s: %lld trainable)\n", preset.name.c_str(), tc.batch,
                (long long)preset.model.param_count(), lora.rank, lora_targets_string(lora.targets).c_str(),
                (long long)j["adapter_parameters"].get<int64_t>());
    std::printf("  %-5s %10s %10s %10s | %10s %10s %10s | %9s\n", "", "weights", "grads", "moments", "store", "arena",
                "total", "step");
    for (const auto* s : {&F, &L}) {
      const auto& v = *s;
      std::printf("  %-5s %6.2f MiB %6.2f MiB %6.2f MiB | %6.2f MiB %6.2f MiB %6.2f MiB | %6.1f ms\n",
                  s == &F ? "full" : "lora", mib(v["weights"]), mib(v["gradients"]), mib(v["moments"]),
                  mib(v["store_bytes"]), mib(v["arena_bytes"]), mib(v["total_bytes"]), v["step_ms"].get<double>());
    }
    std::printf("  lora/full: memory %.2fx, step time %.2fx\n", mib(L["total_bytes"]) / mib(F["total_bytes"]),
                L["step_ms"].get<double>() / F["step_ms"].get<double>());
    std::fflush(stdout);
  }
  if (a.json) std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace

nlohmann::json lora_train_defaults() {
  const LoraArgs a;
  LoraConfig lora;
  lora.targets = parse_lora_targets(a.targets);
  return {{"rank", a.rank},
          {"alpha", a.alpha},
          {"targets", lora_to_json(lora)["targets"]},  // one by one, in the canonical order
          {"lr", a.run.lr},
          {"steps", a.run.steps}};
}

void add_lora(CLI::App& app) {
  CLI::App* lora = app.add_subcommand(
      "lora", "LoRA adapters: train on a frozen base, merge into it, describe, export to and import from PEFT");
  lora->require_subcommand(1);

  auto t = std::make_shared<LoraArgs>();
  CLI::App* train = lora->add_subcommand(
      "train", "Train a LoRA adapter on a frozen base (.txt = next-token LM, .jsonl = SFT) into OUT/" +
                   std::string(kAdapterFile));
  add_finetune_options(train, t->run, "Training data: FILE.jsonl = SFT examples, any other file = plain text");
  train
      ->add_option("--rank", t->rank,
                   "Adapter rank r: r (in + out) parameters per adapted [out, in] projection (the default on all six "
                   "stays under 3% of a Small base or larger; docs/post-training.md, \"The defaults\")")
      ->capture_default_str();
  train->add_option("--alpha", t->alpha, "Scale: the update is (alpha / r) B A")->capture_default_str();
  train
      ->add_option("--targets", t->targets,
                   "Projections to adapt: q,k,v,o,fc_in,fc_out (or attn, mlp, all), or qkv: one adapter over q, k "
                   "and v together (GPT-2's c_attn, as PEFT adapts it); GPT-2's names c_attn, attn.c_proj, c_fc, "
                   "mlp.c_proj also work")
      ->capture_default_str();
  train->add_option("--weight-decay", t->weight_decay, "AdamW weight decay on the adapters")->capture_default_str();
  train->add_option("--dropout", t->dropout, "Dropout rate on the adapters' input (the base path sees it undropped)")
      ->capture_default_str()
      ->check(dropout_rate());
  train->callback([t]() { run_lora_train(*t); });

  auto m = std::make_shared<MergeArgs>();
  CLI::App* merge =
      lora->add_subcommand("merge", "Fold an adapter into its base: W += (alpha / r) B A, as a normal checkpoint");
  merge->add_option("--base", m->base, "Base checkpoint the adapter was trained on")->required();
  merge->add_option("--adapter", m->adapter, "Adapter file")->required();
  merge->add_option("--out", m->out, "Merged checkpoint to write")->required();
  merge->callback([m]() { run_lora_merge(*m); });

  auto i = std::make_shared<LoraInfoArgs>();
  CLI::App* info = lora->add_subcommand("info", "Describe an adapter file");
  info->add_option("adapter", i->adapter, "Adapter file")->required();
  info->add_flag("--json", i->json, "Print JSON");
  info->callback([i]() { run_lora_info(*i); });

  auto e = std::make_shared<PeftArgs>();
  CLI::App* ex = lora->add_subcommand(
      "export-peft",
      "Write an adapter as a PEFT LoRA folder for the GPT-2 model of its base (adapter_config.json, "
      "adapter_model.safetensors)");
  ex->add_option("adapter", e->in, "Adapter file (targets qkv, o, fc_in, fc_out: GPT-2's modules)")->required();
  ex->add_option("--out", e->out,
                 "Folder to write (new, empty, or an earlier export; it is replaced as a whole, never half-written)")
      ->required();
  ex->add_option("--base-model", e->base_model,
                 "base_model_name_or_path to record (the Hugging Face folder or name of the base); default: the one "
                 "an imported adapter came with, else null");
  ex->callback([e]() { run_export_peft(*e); });

  auto im = std::make_shared<PeftArgs>();
  CLI::App* imp = lora->add_subcommand("import-peft", "Make an adapter file of a PEFT LoRA folder for a GPT-2 base");
  imp->add_option("folder", im->in, "Folder with adapter_config.json and adapter_model.safetensors")->required();
  imp->add_option("--base", im->base, "The base checkpoint (ptl import-hf of the model the adapter was trained on)")
      ->required();
  imp->add_option("--out", im->out, "Adapter file to write")->required();
  imp->callback([im]() { run_import_peft(*im); });

  auto b = std::make_shared<LoraBenchArgs>();
  CLI::App* bench = lora->add_subcommand("bench", "Memory and step time of LoRA against full fine-tuning, per preset");
  bench->add_option("--presets", b->presets, "Comma-separated presets")->capture_default_str();
  bench->add_option("--rank", b->rank, "Adapter rank")->capture_default_str();
  bench->add_option("--alpha", b->alpha, "Adapter alpha")->capture_default_str();
  bench->add_option("--targets", b->targets, "Adapted projections")->capture_default_str();
  bench->add_option("--steps", b->steps, "Timed steps per side (median reported)")
      ->capture_default_str()
      ->check(at_least(1));
  bench->add_option("--warmup", b->warmup, "Untimed steps per side first")->capture_default_str()->check(at_least(0));
  bench->add_flag("--json", b->json, "Print JSON");
  bench->callback([b]() { run_lora_bench(*b); });
}

}  // namespace ptl::cli
