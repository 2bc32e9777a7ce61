// GPT-2's LoRA modules: the fused qkv adapter (GPT-2's c_attn, as PEFT adapts it), PEFT adapter
// folders in and out (engine/peft.h), and the fine-tuning commands on an imported GPT-2 model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/error.h"
#include "engine/hf_gpt2.h"
#include "engine/peft.h"
#include "engine/trainer.h"
#include "finite_differences.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;
namespace fs = std::filesystem;

namespace {

// A byte-level GPT-2 (tanh GELU) of test size.
ModelConfig tiny_gpt2() {
  ModelConfig mc;
  mc.vocab_size = 256;
  mc.n_layers = 2;
  mc.d_model = 32;
  mc.n_heads = 4;
  mc.ctx = 32;
  mc.gelu = "tanh";
  return mc;
}

std::vector<uint8_t> gpt2_base_bytes(uint64_t seed = 42) {
  return Trainer(tiny_gpt2(), train_config(4, seed)).save_checkpoint(false);
}

LoraConfig lora(std::set<std::string> targets, int rank = 4, double alpha = 8.0) {
  LoraConfig c;
  c.rank = rank;
  c.alpha = alpha;
  c.targets = std::move(targets);
  return c;
}

const std::set<std::string> kGpt2Modules = {"qkv", "o", "fc_in", "fc_out"};

// Every adapter tensor random (B is zero at the start, where the adapters do nothing).
void randomise(Trainer& tr, uint64_t seed) {
  Rng rng(seed);
  for (const auto& t : adapter_tensors(tr.model_config(), tr.lora_config())) {
    std::vector<float> v(size_t(t.numel()));
    for (auto& x : v) x = float(0.1 * rng.normal());
    tr.write_tensor(t.name, v.data(), v.size() * 4);
  }
}

std::vector<float> tensor(const Trainer& tr, const std::string& name, int64_t n) {
  const float* p = tr.read_tensor(name);
  return std::vector<float>(p, p + n);
}

const char* kPeftConfig = R"({
  "alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "gpt2", "bias": "none",
  "fan_in_fan_out": true, "inference_mode": true, "init_lora_weights": true, "layers_pattern": null,
  "layers_to_transform": null, "loftq_config": {}, "lora_alpha": 16, "lora_dropout": 0.05,
  "megatron_config": null, "megatron_core": "megatron.core", "modules_to_save": null,
  "peft_type": "LORA", "r": 8, "rank_pattern": {}, "revision": null, "target_modules": ["c_attn"],
  "task_type": "CAUSAL_LM", "use_dora": false, "use_rslora": false
})";

}  // namespace

TEST(LoraQkv, IsOneAdapterOverQKAndV) {
  // The fused adapter with A and B = [Bq; Bk; Bv] is three adapters that share A: q, k and v
  // each with A and their row block of B.
  const auto bytes = gpt2_base_bytes();
  auto fused = Trainer::from_checkpoint(bytes, "base");
  auto apart = Trainer::from_checkpoint(bytes, "base");
  const Batch b = random_batch(2, 32, 5);
  const auto base_logits = logits_of(*fused, b);
  fused->enable_lora(lora({"qkv"}), 7);
  EXPECT_EQ(logits_of(*fused, b), base_logits);  // B = 0: bitwise the base
  randomise(*fused, 3);
  apart->enable_lora(lora({"q", "k", "v"}), 7);
  const int64_t C = 32, r = 4;
  for (int i = 0; i < 2; ++i) {
    const std::string pre = "blocks." + std::to_string(i) + ".attn.";
    const auto A = tensor(*fused, pre + "qkv.lora_A", r * C);
    for (const char* p : {"q", "k", "v"}) {
      apart->write_tensor(pre + p + "_proj.lora_A", A.data(), A.size() * 4);
      const auto B = tensor(*fused, pre + "qkv." + p + ".lora_B", C * r);
      apart->write_tensor(pre + p + "_proj.lora_B", B.data(), B.size() * 4);
    }
  }
  const auto lf = logits_of(*fused, b), la = logits_of(*apart, b);
  EXPECT_GT(max_abs_diff(lf, base_logits), 1e-3);
  EXPECT_LT(max_abs_diff(lf, la), 1e-5);
  // One A and three B blocks per layer: r (C + 3C) parameters.
  const auto tensors = adapter_tensors(tiny_gpt2(), lora({"qkv"}));
  ASSERT_EQ(tensors.size(), 8u);
  EXPECT_EQ(tensors[0].name, "blocks.0.attn.qkv.lora_A");
  EXPECT_EQ(tensors[0].shape, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(tensors[1].name, "blocks.0.attn.qkv.q.lora_B");
  EXPECT_EQ(tensors[3].name, "blocks.0.attn.qkv.v.lora_B");
  EXPECT_EQ(tensors[3].shape, (std::vector<int64_t>{32, 4}));
  // Generation (the KV-cache program) goes through it too: greedy text as the merged model's.
  SamplingOptions greedy;
  greedy.temperature = 0;
  const auto text = fused->generate({'T', 'h'}, 12, greedy);
  fused->merge_lora();
  EXPECT_EQ(fused->generate({'T', 'h'}, 12, greedy), text);
  EXPECT_LT(max_abs_diff(logits_of(*fused, b), lf), 2e-5);
}

TEST(LoraQkv, GradientsMatchFiniteDifferences) {
  auto tr = Trainer::from_checkpoint(gpt2_base_bytes(), "base");
  tr->enable_lora(lora(kGpt2Modules, 2, 4.0), 3);
  randomise(*tr, 9);
  const Batch b = random_batch(4, 32, 11);
  cpu::Executor& ex = tr->train_executor();
  std::memcpy(ex.i32("tokens"), b.inputs.data(), b.inputs.size() * 4);
  std::memcpy(ex.i32("targets"), b.targets.data(), b.targets.size() * 4);
  ex.f32("optim.hparams")[0] = 0.0f;  // lr 0: the weights stay
  ex.f32("optim.hparams")[1] = 1.0f;
  ex.run();
  const int checked = expect_adapter_gradients_match(*tr, b);
  EXPECT_EQ(checked, 2 * (4 + 2 + 2 + 2) * 2);  // 2 layers x (A, 3 B blocks; o, fc_in, fc_out A, B) x 2
}

TEST(LoraQkv, ConfigsAreChecked) {
  EXPECT_EQ(parse_lora_targets("qkv, o"), (std::set<std::string>{"qkv", "o"}));
  EXPECT_EQ(lora_targets_string({"fc_out", "o", "qkv"}), "qkv,o,fc_out");
  EXPECT_EQ(parse_lora_targets("all"), (std::set<std::string>{"q", "k", "v", "o", "fc_in", "fc_out"}));
  // GPT-2's module names, as PEFT's target_modules give them.
  EXPECT_EQ(parse_lora_targets("c_attn,c_proj,c_fc"), kGpt2Modules);
  EXPECT_EQ(parse_lora_targets("attn.c_proj, mlp.c_fc"), (std::set<std::string>{"o", "fc_in"}));
  EXPECT_NE(error_of([] { parse_lora_targets("q_proj"); }).find("unknown LoRA target 'q_proj'"), std::string::npos);
  EXPECT_NE(error_of([] {
              validate_lora(lora({"qkv", "k"}));
            }).find("LoRA targets qkv and k overlap"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              adapter_tensors(tiny_gpt2(), lora({"qkv"}, 33));
            }).find("LoRA rank 33 is larger than the layer blocks.0.attn.qkv [96, 32]"),
            std::string::npos);
  const auto j = lora_to_json(lora({"qkv", "fc_in"}));
  EXPECT_EQ(j["targets"], nlohmann::json({"qkv", "fc_in"}));
  EXPECT_EQ(lora_from_json(j).targets, (std::set<std::string>{"qkv", "fc_in"}));
}

TEST(Peft, ConfigReadAndWritten) {
  const PeftConfig c = peft_config_from_json(kPeftConfig, "adapter_config.json");
  EXPECT_EQ(c.lora.rank, 8);
  EXPECT_EQ(c.lora.alpha, 16.0);
  EXPECT_EQ(c.lora.dropout, 0.05);
  EXPECT_EQ(c.lora.targets, (std::set<std::string>{"qkv"}));
  EXPECT_EQ(c.base_model, "gpt2");
  // What we write reads back the same, with GPT-2's module names.
  PeftConfig all{lora(kGpt2Modules, 4, 8.0), ""};
  const std::string text = peft_config_json(all);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["target_modules"], nlohmann::json({"c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"}));
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["fan_in_fan_out"], true);
  EXPECT_EQ(j["bias"], "none");
  EXPECT_EQ(j["lora_alpha"], 8);
  EXPECT_TRUE(j["base_model_name_or_path"].is_null());
  const PeftConfig back = peft_config_from_json(text, "x");
  EXPECT_EQ(back.lora.targets, kGpt2Modules);
  EXPECT_EQ(back.lora.rank, 4);
  EXPECT_EQ(back.lora.alpha, 8.0);
  // "c_proj" is both projections of that name; rsLoRA's alpha / sqrt(r) is alpha sqrt(r) / r.
  auto with = [](const std::string& key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(kPeftConfig);
    j[key] = value;
    return j.dump();
  };
  EXPECT_EQ(peft_config_from_json(with("target_modules", {"c_proj"}), "x").lora.targets,
            (std::set<std::string>{"o", "fc_out"}));
  EXPECT_EQ(peft_config_from_json(with("target_modules", "all-linear"), "x").lora.targets, kGpt2Modules);
  EXPECT_NEAR(peft_config_from_json(with("use_rslora", true), "x").lora.alpha, 16.0 * std::sqrt(8.0), 1e-12);
  // q, k, v alone have no GPT-2 module.
  EXPECT_NE(error_of([] {
              peft_config_json({lora({"q", "v"}), ""});
            }).find("LoRA target q has no GPT-2 module"),
            std::string::npos);

  // Errors: one line naming the file and the problem.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{", "adapter_config.json: not valid JSON"},
      {"[]", "adapter_config.json: not a JSON object"},
      {with("peft_type", "PREFIX_TUNING"), "peft_type is \"PREFIX_TUNING\"; only \"LORA\" adapters are read"},
      {with("bias", "all"), "bias is \"all\"; only \"none\" is supported"},
      {with("r", 0), "adapter_config.json: r"},
      {with("r", 2.5), "adapter_config.json: r"},
      {with("lora_alpha", "16"), "lora_alpha \"16\" is not a non-zero number"},
      {with("lora_dropout", 1.5), "lora_dropout 1.5 is not a rate in [0, 1)"},
      {with("target_modules", {"q_proj", "v_proj"}), "target_modules names \"q_proj\", which is no GPT-2 module"},
      {with("target_modules", ".*c_attn"), "target_modules is \".*c_attn\", not a list of module names"},
      {with("target_modules", nlohmann::json::array()), "target_modules is empty"},
      {with("use_dora", true), "use_dora is true; DoRA is not supported"},
      {with("rank_pattern", {{"c_attn", 4}}), "per-module ranks and alphas are not supported"},
      {with("layers_to_transform", {0}), "layers_to_transform is [0]"},
      {with("modules_to_save", {"lm_head"}), "modules_to_save is [\"lm_head\"]"},
      {R"({"r": 8, "target_modules": ["c_attn"]})", "no peft_type"},
      {R"({"peft_type": "LORA", "target_modules": ["c_attn"]})", "no r (the adapter's rank)"},
      {R"({"peft_type": "LORA", "r": 8})", "no target_modules"},
  };
  for (const auto& [text, phrase] : bad) {
    const std::string e = error_of([&json = text] { peft_config_from_json(json, "adapter_config.json"); });
    EXPECT_NE(e.find(phrase), std::string::npos) << text << "\n -> " << e;
    EXPECT_EQ(e.rfind("adapter_config.json", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(Peft, TensorsMapToGpt2Names) {
  auto tr = Trainer::from_checkpoint(gpt2_base_bytes(), "base");
  tr->set_base_sha256(std::string(64, 'a'));
  tr->enable_lora(lora(kGpt2Modules), 1);
  randomise(*tr, 2);
  const auto bytes = tr->save_adapter();
  const SafeTensors adapter = decode_safetensors(bytes.data(), bytes.size());
  const ModelConfig mc = tiny_gpt2();
  const SafeTensors peft = peft_from_adapter(adapter, mc, tr->lora_config());
  ASSERT_EQ(peft.tensors.size(), 2u * 4 * 2);
  const StoredTensor* b = peft.find("base_model.model.transformer.h.1.attn.c_attn.lora_B.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{96, 4}));
  // B's rows: q's block, then k's, then v's.
  const auto k = tensor(*tr, "blocks.1.attn.qkv.k.lora_B", 32 * 4);
  EXPECT_EQ(std::memcmp(b->f32() + 32 * 4, k.data(), k.size() * 4), 0);
  for (const auto& [name, shape] :
       std::vector<std::pair<std::string, std::vector<int64_t>>>{{"h.0.attn.c_attn.lora_A", {4, 32}},
                                                                 {"h.0.attn.c_proj.lora_A", {4, 32}},
                                                                 {"h.0.attn.c_proj.lora_B", {32, 4}},
                                                                 {"h.0.mlp.c_fc.lora_A", {4, 32}},
                                                                 {"h.0.mlp.c_fc.lora_B", {128, 4}},
                                                                 {"h.0.mlp.c_proj.lora_A", {4, 128}},
                                                                 {"h.0.mlp.c_proj.lora_B", {32, 4}}}) {
    const StoredTensor* t = peft.find("base_model.model.transformer." + name + ".weight");
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
  }
  // Back: bitwise the adapter's tensors, in its order; GPT2Model's names (no "transformer.") too.
  const SafeTensors back = adapter_from_peft(peft, mc, tr->lora_config(), "a");
  ASSERT_EQ(back.tensors.size(), adapter.tensors.size());
  for (size_t i = 0; i < back.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, adapter.tensors[i].name);
    EXPECT_EQ(back.tensors[i].data, adapter.tensors[i].data) << back.tensors[i].name;
  }
  SafeTensors bare;
  for (const auto& t : peft.tensors)
    bare.add("base_model.model." + t.name.substr(std::string("base_model.model.transformer.").size()), t.dtype, t.shape,
             t.data.data());
  EXPECT_EQ(adapter_from_peft(bare, mc, tr->lora_config(), "a").tensors[5].data, adapter.tensors[5].data);

  // Wrong names and shapes: one line naming the file.
  SafeTensors missing = peft;
  missing.tensors.pop_back();
  EXPECT_NE(error_of([&] {
              adapter_from_peft(missing, mc, tr->lora_config(), "w.safetensors");
            }).find("w.safetensors: missing tensor 'base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight'"),
            std::string::npos);
  SafeTensors extra = peft;
  extra.add("base_model.model.transformer.h.2.attn.c_attn.lora_A.weight", DType::f32, {4, 32},
            peft.tensors[0].data.data());
  EXPECT_NE(error_of([&] {
              adapter_from_peft(extra, mc, tr->lora_config(), "w.safetensors");
            }).find("w.safetensors: unexpected tensor 'base_model.model.transformer.h.2.attn.c_attn.lora_A.weight'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { adapter_from_peft(peft, mc, lora(kGpt2Modules, 2), "w.safetensors"); })
                .find("w.safetensors: tensor 'base_model.model.transformer.h.0.attn.c_attn.lora_A.weight' has shape "
                      "[4, 32] but r 2 on a base with d 32 needs [2, 32]"),
            std::string::npos);
}

TEST(Peft, CliRoundTripIsBitwiseAndBadFoldersAreOneLine) {
  TempDir d;
  write_file_atomic(d.file("base.tinygpt"), gpt2_base_bytes());
  auto tr = Trainer::from_checkpoint(read_file_bytes(d.file("base.tinygpt")), "base.tinygpt");
  tr->enable_lora(lora(kGpt2Modules, 4, 16.0), 1);
  randomise(*tr, 2);
  write_file_atomic(d.file("a.tinygpt-lora"), tr->save_adapter());
  CliRun r = ptl_cli("lora export-peft a.tinygpt-lora --out peft --base-model gpt2", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("target_modules c_attn, attn.c_proj, c_fc, mlp.c_proj"), std::string::npos) << r.out;
  const auto cfg = nlohmann::json::parse(slurp(d.file("peft/adapter_config.json")));
  EXPECT_EQ(cfg["base_model_name_or_path"], "gpt2");
  EXPECT_EQ(cfg["r"], 4);
  EXPECT_EQ(cfg["lora_alpha"], 16);
  r = ptl_cli("lora import-peft peft --base base.tinygpt --out b.tinygpt-lora", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto a_bytes = read_file_bytes(d.file("a.tinygpt-lora")), b_bytes = read_file_bytes(d.file("b.tinygpt-lora"));
  const SafeTensors a = decode_safetensors(a_bytes.data(), a_bytes.size());
  const SafeTensors b = decode_safetensors(b_bytes.data(), b_bytes.size());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].name, b.tensors[i].name);
    EXPECT_EQ(a.tensors[i].data, b.tensors[i].data) << a.tensors[i].name;
  }
  const AdapterContents c = inspect_adapter(b, "b");
  EXPECT_EQ(c.base_sha256, sha256_hex(read_file_bytes(d.file("base.tinygpt"))));
  EXPECT_EQ(c.lora.targets, kGpt2Modules);
  EXPECT_EQ(c.lora.alpha, 16.0);
  // Export of the import: the same folder, byte for byte (the base name travels along).
  r = ptl_cli("lora export-peft b.tinygpt-lora --out peft2", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(d.file("peft2/adapter_model.safetensors")), slurp(d.file("peft/adapter_model.safetensors")));
  EXPECT_EQ(slurp(d.file("peft2/adapter_config.json")), slurp(d.file("peft/adapter_config.json")));
  // And an earlier export is replaced as a whole.
  r = ptl_cli("lora export-peft b.tinygpt-lora --out peft2", d);
  ASSERT_EQ(r.code, 0) << r.err;

  // Errors: one line, nothing written.
  write(d.file("peft2/notes.txt"), "mine");
  expect_error(ptl_cli("lora export-peft a.tinygpt-lora --out peft2", d),
               "cannot write peft2: it holds notes.txt, which export-peft does not write");
  EXPECT_EQ(slurp(d.file("peft2/notes.txt")), "mine");
  auto qv = Trainer::from_checkpoint(read_file_bytes(d.file("base.tinygpt")), "base.tinygpt");
  qv->enable_lora(lora({"q", "v"}), 1);
  write_file_atomic(d.file("qv.tinygpt-lora"), qv->save_adapter());
  expect_error(ptl_cli("lora export-peft qv.tinygpt-lora --out x", d),
               "qv.tinygpt-lora: cannot export to PEFT: LoRA target q has no GPT-2 module");
  EXPECT_FALSE(fs::exists(d.file("x")));
  expect_error(ptl_cli("lora import-peft nowhere --base base.tinygpt --out x.tinygpt-lora", d),
               "no such folder: nowhere");
  fs::create_directories(d.file("bad"));
  expect_error(ptl_cli("lora import-peft bad --base base.tinygpt --out x.tinygpt-lora", d),
               "bad/adapter_config.json: no such file");
  fs::copy_file(d.file("peft/adapter_config.json"), d.file("bad/adapter_config.json"));
  expect_error(ptl_cli("lora import-peft bad --base base.tinygpt --out x.tinygpt-lora", d),
               "bad/adapter_model.safetensors: no such file");
  const auto broken = [&](const std::string& key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(slurp(d.file("peft/adapter_config.json")));
    j[key] = value;
    write(d.file("bad/adapter_config.json"), j.dump());
    fs::copy_file(d.file("peft/adapter_model.safetensors"), d.file("bad/adapter_model.safetensors"),
                  fs::copy_options::overwrite_existing);
    return ptl_cli("lora import-peft bad --base base.tinygpt --out x.tinygpt-lora", d);
  };
  expect_error(broken("peft_type", "IA3"), "bad/adapter_config.json: peft_type is \"IA3\"");
  expect_error(broken("bias", "lora_only"), "bad/adapter_config.json: bias is \"lora_only\"");
  expect_error(broken("target_modules", {"c_attn", "wte"}), "target_modules names \"wte\", which is no GPT-2 module");
  expect_error(broken("target_modules", {"c_attn"}),
               "bad/adapter_model.safetensors: unexpected tensor "
               "'base_model.model.transformer.h.0.attn.c_proj.lora_A.weight'");
  expect_error(broken("r", 8), "bad/adapter_model.safetensors: tensor");
  expect_error(broken("r", 40), "bad/adapter_model.safetensors: does not fit the base base.tinygpt: LoRA rank 40");
  write(d.file("bad/adapter_model.safetensors"), "not a safetensors file");
  expect_error(ptl_cli("lora import-peft bad --base base.tinygpt --out x.tinygpt-lora", d),
               "bad/adapter_model.safetensors");
  EXPECT_FALSE(fs::exists(d.file("x.tinygpt-lora")));
}

TEST(Peft, FineTuningCommandsOnAnImportedGpt2) {
  // A random byte-level GPT-2 folder, as transformers would save it, through every command.
  TempDir d;
  ModelConfig mc = tiny_gpt2();
  mc.ctx = 64;  // room for the chat template of the SFT examples
  SafeTensors weights;
  Rng rng(5);
  for (const auto& t : parameter_list(mc)) {
    std::vector<float> v(size_t(t.numel()));
    for (auto& x : v) x = float(0.05 * rng.normal());
    if (t.name.ends_with("ln1.weight") || t.name.ends_with("ln2.weight") || t.name == "ln_f.weight")
      for (auto& x : v) x += 1.0f;
    weights.add(t.name, DType::f32, t.shape, v.data());
  }
  const Tokenizer bytes_tokenizer;
  write_hf_gpt2(d.file("hf"), mc, weights, &bytes_tokenizer);
  ASSERT_EQ(ptl_cli("import-hf hf --out gpt2.tinygpt", d).code, 0);
  write(d.file("t.txt"), synthetic_text(20000));
  const auto eval = [&](const std::string& args) {
    CliRun r = ptl_cli("eval " + args + " --data t.txt --json", d);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out)["loss"].get<double>() : 0.0;
  };
  const double base_loss = eval("gpt2.tinygpt");
  CliRun r = ptl_cli(
      "lora train --base gpt2.tinygpt --data t.txt --steps 20 --batch 4 --lr 1e-2 --eval-every 0 --rank 4 "
      "--targets qkv,o,fc_in,fc_out --out run",
      d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("on qkv,o,fc_in,fc_out"), std::string::npos) << r.out;
  const double lora_loss = eval("gpt2.tinygpt --adapter run/adapter.tinygpt-lora");
  EXPECT_LT(lora_loss, base_loss);
  CliRun s = ptl_cli(
      "sample gpt2.tinygpt --adapter run/adapter.tinygpt-lora --prompt 'the ' --max-tokens 16 --temperature 0", d);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("the ", 0), 0u) << s.out;
  // Merge, and the PEFT folder of the adapter imported back gives the same merged model.
  ASSERT_EQ(ptl_cli("lora merge --base gpt2.tinygpt --adapter run/adapter.tinygpt-lora --out m.tinygpt", d).code, 0);
  EXPECT_NEAR(eval("m.tinygpt"), lora_loss, 1e-5);
  ASSERT_EQ(ptl_cli("lora export-peft run/adapter.tinygpt-lora --out peft", d).code, 0);
  ASSERT_EQ(ptl_cli("lora import-peft peft --base gpt2.tinygpt --out back.tinygpt-lora", d).code, 0);
  ASSERT_EQ(ptl_cli("lora merge --base gpt2.tinygpt --adapter back.tinygpt-lora --out m2.tinygpt", d).code, 0);
  EXPECT_EQ(read_file_bytes(d.file("m2.tinygpt")), read_file_bytes(d.file("m.tinygpt")));
  // The merged model goes back out as a Hugging Face folder.
  ASSERT_EQ(ptl_cli("export-hf m.tinygpt --out merged-hf", d).code, 0);
  // Full fine-tuning with SFT data.
  std::string jsonl;
  for (int i = 0; i < 40; ++i)
    jsonl += R"({"prompt": "ab", "response": "ba"})"
             "\n";
  write(d.file("sft.jsonl"), jsonl);
  r = ptl_cli("sft --base gpt2.tinygpt --data sft.jsonl --steps 5 --batch 2 --eval-every 0 --out sft", d);
  ASSERT_EQ(r.code, 0) << r.err;
  auto ck = Trainer::from_checkpoint(read_file_bytes(d.file("sft/model.tinygpt")), "sft");
  EXPECT_EQ(ck->model_config(), mc);
  EXPECT_EQ(ck->state().step, 5);
}
