// The post-training commands as a user meets them: ptl lora train | merge | info, ptl sft,
// ptl sft-eval, and --adapter on ptl sample and ptl eval.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "engine/lora.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

// Reversal of short letter strings as SFT examples.
std::string reversal_jsonl(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string w;
    for (unsigned k = 0, len = 2 + rng() % 2; k < len; ++k) w += char('a' + rng() % 6);
    out += nlohmann::json{{"prompt", w}, {"response", std::string(w.rbegin(), w.rend())}}.dump() + "\n";
  }
  return out;
}

// A tiny base with a 64-byte context (room for the chat template), trained for a few steps.
void make_base(const test::TempDir& d, const std::string& out = "base", uint64_t seed = 1337) {
  write(d.file("t.txt"), test::synthetic_text(20000));
  CliRun r = ptl_cli("train --preset tiny --ctx 64 --sample-every 0 --data t.txt --steps 10 --seed " +
                         std::to_string(seed) + " --out " + out,
                     d);
  ASSERT_EQ(r.code, 0) << r.err;
}

double eval_loss(const std::string& args, const test::TempDir& d) {
  CliRun r = ptl_cli("eval " + args + " --json", d);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out)["loss"].get<double>();
}

}  // namespace

TEST(CliLora, TrainEvalSampleMergeInfo) {
  test::TempDir d;
  make_base(d);
  const auto base_before = slurp(d.file("base/model.tinygpt"));
  CliRun r = ptl_cli(
      "lora train --base base/model.tinygpt --data t.txt --steps 20 --eval-every 10 --lr 1e-2 --rank 2 "
      "--targets q,v,fc_in --out run",
      d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("trainable parameters"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("val loss"), std::string::npos);
  const auto m = read_jsonl(d.file("run/metrics.jsonl"));
  ASSERT_EQ(m.size(), 21u);  // step 0 (validation only), then one line per step
  EXPECT_EQ(m[0]["step"], 0);
  EXPECT_TRUE(m[0].contains("val_loss"));
  for (int s = 1; s <= 20; ++s) {
    EXPECT_EQ(m[s]["step"].get<int>(), s);
    EXPECT_EQ(m[s].contains("val_loss"), s % 10 == 0);
  }
  EXPECT_LT(m[20]["val_loss"].get<double>(), m[0]["val_loss"].get<double>());
  EXPECT_EQ(slurp(d.file("base/model.tinygpt")), base_before);  // the base is never written

  // The adapter file: only adapter tensors, tied to the base.
  const auto bytes = read_file_bytes(d.file("run/adapter.tinygpt-lora"));
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size());
  EXPECT_EQ(f.metadata["format"], "tinygpt-lora");
  EXPECT_EQ(f.metadata["base_sha256"], sha256_hex(read_file_bytes(d.file("base/model.tinygpt"))));
  EXPECT_EQ(f.tensors.size(), 2u * 3 * 2);
  CliRun info = ptl_cli("lora info run/adapter.tinygpt-lora --json", d);
  ASSERT_EQ(info.code, 0) << info.err;
  auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["lora_config"]["rank"], 2);
  EXPECT_EQ(j["lora_config"]["targets"], nlohmann::json({"q", "v", "fc_in"}));
  EXPECT_EQ(j["steps"], 20);
  EXPECT_EQ(j["parameters"], 2 * (2 * (48 + 48) + 2 * (48 + 48) + 2 * (48 + 192)));

  // eval / sample with the adapter; merge gives the same loss.
  const double base_loss = eval_loss("base/model.tinygpt --data t.txt", d);
  const double lora_loss = eval_loss("base/model.tinygpt --adapter run/adapter.tinygpt-lora --data t.txt", d);
  EXPECT_LT(lora_loss, base_loss);
  CliRun s = ptl_cli(
      "sample base/model.tinygpt --adapter run/adapter.tinygpt-lora --prompt 'the ' --max-tokens 20 "
      "--temperature 0",
      d);
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("the ", 0), 0u);
  CliRun mg =
      ptl_cli("lora merge --base base/model.tinygpt --adapter run/adapter.tinygpt-lora --out merged.tinygpt", d);
  ASSERT_EQ(mg.code, 0) << mg.err;
  EXPECT_NEAR(eval_loss("merged.tinygpt --data t.txt", d), lora_loss, 1e-5);
  CliRun s2 = ptl_cli("sample merged.tinygpt --prompt 'the ' --max-tokens 20 --temperature 0", d);
  EXPECT_EQ(s2.out, s.out);
}

TEST(CliLora, SftFullAndLora) {
  test::TempDir d;
  make_base(d);
  write(d.file("train.jsonl"), reversal_jsonl(200, 1));
  write(d.file("test.jsonl"), reversal_jsonl(20, 2));
  CliRun r =
      ptl_cli("sft --base base/model.tinygpt --data train.jsonl --steps 30 --eval-every 15 --lr 3e-3 --out sft", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("180 training / 20 validation examples"), std::string::npos) << r.out;
  const auto m = read_jsonl(d.file("sft/metrics.jsonl"));
  ASSERT_EQ(m.size(), 31u);
  EXPECT_LT(m[30]["val_loss"].get<double>(), 0.5 * m[0]["val_loss"].get<double>());
  auto ck = Trainer::from_checkpoint(read_file_bytes(d.file("sft/model.tinygpt")), "ck");
  EXPECT_EQ(ck->state().step, 30);
  // The loss of the replies only, before and after.
  EXPECT_LT(eval_loss("sft/model.tinygpt --data test.jsonl", d),
            0.5 * eval_loss("base/model.tinygpt --data test.jsonl", d));
  CliRun e = ptl_cli("sft-eval sft/model.tinygpt --data test.jsonl --json", d);
  ASSERT_EQ(e.code, 0) << e.err;
  auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["examples"], 20);
  EXPECT_GE(j["accuracy"].get<double>(), 0.0);
  EXPECT_TRUE(j.contains("ended") && j.contains("failures"));
  CliRun base_eval = ptl_cli("sft-eval base/model.tinygpt --data test.jsonl --json", d);
  EXPECT_EQ(nlohmann::json::parse(base_eval.out)["exact_match"], 0);
  // LoRA on SFT data.
  CliRun l = ptl_cli("lora train --base base/model.tinygpt --data train.jsonl --steps 10 --eval-every 0 --out lsft", d);
  ASSERT_EQ(l.code, 0) << l.err;
  CliRun le = ptl_cli("sft-eval base/model.tinygpt --adapter lsft/adapter.tinygpt-lora --data test.jsonl", d);
  ASSERT_EQ(le.code, 0) << le.err;
  EXPECT_NE(le.out.find("exact match"), std::string::npos);
}

TEST(CliLora, ErrorsAreOneLine) {
  test::TempDir d;
  make_base(d);
  make_base(d, "other", 99);
  ASSERT_EQ(ptl_cli("lora train --base base/model.tinygpt --data t.txt --steps 2 --out run", d).code, 0);
  expect_error(ptl_cli("sample other/model.tinygpt --adapter run/adapter.tinygpt-lora", d),
               "run/adapter.tinygpt-lora: the adapter was trained on a base with other weights");
  expect_error(ptl_cli("eval base/model.tinygpt --adapter base/model.tinygpt --data t.txt", d), "not a LoRA adapter");
  expect_error(ptl_cli("sample run/adapter.tinygpt-lora", d), "is a LoRA adapter, not a model checkpoint");
  expect_error(ptl_cli("lora train --base base/model.tinygpt --data t.txt --rank 100 --out x", d),
               "LoRA rank 100 is larger than the layer");
  expect_error(ptl_cli("lora train --base base/model.tinygpt --data t.txt --targets q,mlp_up --out x", d),
               "unknown LoRA target 'mlp_up'");
  write(d.file("bad.jsonl"), "{\"prompt\": \"a\", \"response\": \"b\"}\n{\"prompt\": \"a\" \"response\": \"b\"}\n");
  expect_error(ptl_cli("sft --base base/model.tinygpt --data bad.jsonl --out x", d),
               "bad.jsonl line 2: not valid JSON");
  write(d.file("empty.jsonl"), "{\"prompt\": \"a\", \"response\": \"\"}\n");
  expect_error(ptl_cli("lora train --base base/model.tinygpt --data empty.jsonl --out x", d),
               "empty.jsonl line 1: empty response");
  write(d.file("long.jsonl"), "{\"prompt\": \"" + std::string(100, 'a') + "\", \"response\": \"b\"}\n");
  expect_error(ptl_cli("sft --base base/model.tinygpt --data long.jsonl --out x", d),
               "long.jsonl line 1: the example is 133 bytes with the chat template, longer than one context window");
  expect_error(ptl_cli("sft --base base/model.tinygpt --data t.txt --out x", d), "--data must be a .jsonl file");
  write(d.file("nothing.jsonl"), "\n");
  expect_error(ptl_cli("sft --base base/model.tinygpt --data nothing.jsonl --out x", d), "nothing.jsonl: no examples");
}

// ptl program with adapters: the programs another executor runs for LoRA (the WebGPU and
// WebAssembly tests run its train program against the CPU engine's).
TEST(CliLora, ProgramWithAdapters) {
  test::TempDir d;
  CliRun r = ptl_cli("program --preset tiny --batch 2 --lora-rank 4 --lora-alpha 8 --lora-targets c_attn", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json p = nlohmann::json::parse(r.out);
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.targets = {"qkv"};
  std::vector<std::string> trainable, want;
  for (const auto& t : p.at("tensors"))
    if (t.at("trainable").get<bool>()) trainable.push_back(t.at("name").get<std::string>());
  for (const auto& t : adapter_tensors(find_preset("tiny").model, lora)) want.push_back(t.name);
  EXPECT_EQ(trainable, want);  // only the adapters train: one A and q, k, v blocks of B per layer
  EXPECT_EQ(want.size(), size_t(4 * find_preset("tiny").model.n_layers));
  // The generate program carries the adapters too; without --lora-rank there are none.
  r = ptl_cli("program --preset tiny --program generate --lora-rank 2 --lora-targets q,v", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("blocks.0.attn.v_proj.lora_B"), std::string::npos);
  r = ptl_cli("program --preset tiny --lora-targets qkv", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("lora_"), std::string::npos);
  expect_error(ptl_cli("program --preset tiny --lora-rank 200 --lora-targets qkv", d),
               "LoRA rank 200 is larger than the layer blocks.0.attn.qkv");
  expect_error(ptl_cli("program --preset tiny --lora-rank 2 --lora-targets q,qkv", d),
               "LoRA targets qkv and q overlap");
  expect_error(ptl_cli("program --preset tiny --lora-rank 2 --lora-targets mlp_up", d), "unknown LoRA target 'mlp_up'");
}
