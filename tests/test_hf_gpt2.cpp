// Hugging Face GPT-2 folders (engine/hf_gpt2.h, `ptl import-hf` / `ptl export-hf`): config.json,
// the layout of the weights (Conv1D [in, out], the fused c_attn), sharded and half-precision
// files, round trips, and the one-line errors of bad folders. Small random models only.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/bpe_trainer.h"
#include "engine/error.h"
#include "engine/half.h"
#include "engine/hf_gpt2.h"
#include "engine/model_tokenizer.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;
namespace fs = std::filesystem;

namespace {

// A GPT-2 of the shapes the tests use: vocabulary 300 (not bytes), the tanh GELU.
ModelConfig small_gpt2() {
  ModelConfig mc;
  mc.vocab_size = 300;
  mc.n_layers = 2;
  mc.d_model = 32;
  mc.n_heads = 4;
  mc.ctx = 64;
  mc.gelu = "tanh";
  return mc;
}

// Random weights with non-zero biases and gains, so that every tensor matters.
SafeTensors random_weights(const ModelConfig& mc, uint64_t seed = 5) {
  SafeTensors f;
  Rng rng(seed);
  for (const auto& t : parameter_list(mc)) {
    std::vector<float> v(size_t(t.numel()));
    for (auto& x : v) x = float(0.1 * rng.normal());
    f.add(t.name, DType::f32, t.shape, v.data());
  }
  return f;
}

const char* kGpt2Config = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
  "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
  "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257
})";

#define EXPECT_ERROR(expr, phrase)                                                  \
  do {                                                                              \
    const std::string message_ = error_of([&] { (void)(expr); });                   \
    EXPECT_NE(message_.find(phrase), std::string::npos) << "message: " << message_; \
    EXPECT_EQ(message_.find('\n'), std::string::npos) << message_;                  \
  } while (0)

// A safetensors file written byte by byte, for what encode_safetensors cannot write (BOOL and
// F64 tensors). Each entry: name, dtype, shape, raw bytes.
struct Raw {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
std::vector<uint8_t> raw_safetensors(const std::vector<Raw>& tensors) {
  nlohmann::ordered_json h = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t off = 0;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  // Sized once and filled by memcpy (appending makes GCC 12 warn of an overflow that cannot happen).
  std::vector<uint8_t> out(8 + text.size() + off);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t at = 8 + text.size();
  for (const auto& t : tensors) {
    if (!t.bytes.empty()) std::memcpy(out.data() + at, t.bytes.data(), t.bytes.size());
    at += t.bytes.size();
  }
  return out;
}
Raw raw_of(const StoredTensor& t, const std::string& name) { return {name, "F32", t.shape, t.data}; }

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) { write_file_atomic(p.string(), b); }
void write_text(const fs::path& p, const std::string& s) { write_bytes(p, std::vector<uint8_t>(s.begin(), s.end())); }

// The GPT-2 tensors of random weights, names without the prefix (what a test then renames, drops or damages).
std::vector<StoredTensor> hf_tensors(const ModelConfig& mc, const SafeTensors& spec) {
  SafeTensors hf = hf_gpt2_from_spec(spec, mc);
  for (auto& t : hf.tensors) t.name = t.name.substr(std::strlen("transformer."));
  return hf.tensors;
}

// A folder with config.json and model.safetensors holding `tensors` as they are.
fs::path folder_with(const TempDir& tmp, const std::string& name, const ModelConfig& mc,
                     const std::vector<StoredTensor>& tensors) {
  const fs::path dir = tmp.path / name;
  fs::create_directories(dir);
  write_text(dir / "config.json", hf_gpt2_config_json(mc));
  SafeTensors f;
  f.tensors = tensors;
  write_bytes(dir / "model.safetensors", encode_safetensors(f));
  return dir;
}

const StoredTensor& tensor(const SafeTensors& f, const std::string& name) {
  const StoredTensor* t = f.find(name);
  if (!t) throw std::runtime_error("no tensor " + name);
  return *t;
}

}  // namespace

TEST(HfGpt2, ReadsGpt2Config) {
  const ModelConfig mc = hf_gpt2_config(kGpt2Config, "config.json");
  EXPECT_EQ(mc.vocab_size, 50257);
  EXPECT_EQ(mc.n_layers, 12);
  EXPECT_EQ(mc.d_model, 768);
  EXPECT_EQ(mc.n_heads, 12);
  EXPECT_EQ(mc.ctx, 1024);
  EXPECT_EQ(mc.gelu, "tanh");
  EXPECT_EQ(mc.param_count(), 124439808);  // GPT-2 small, tied embeddings
  // What export writes reads back as the same config, for both GELUs.
  for (const char* gelu : {"tanh", "erf"}) {
    ModelConfig c = small_gpt2();
    c.gelu = gelu;
    EXPECT_EQ(hf_gpt2_config(hf_gpt2_config_json(c), "c.json"), c) << gelu;
  }
  const auto j = nlohmann::json::parse(hf_gpt2_config_json(small_gpt2(), 299));
  EXPECT_EQ(j["activation_function"], "gelu_new");
  EXPECT_EQ(j["eos_token_id"], 299);
  EXPECT_TRUE(j["n_inner"].is_null());
}

TEST(HfGpt2, ConfigErrorsNameTheFileAndTheField) {
  const auto with = [](const std::string& key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(kGpt2Config);
    if (value.is_discarded())
      j.erase(key);
    else
      j[key] = value;
    return j.dump();
  };
  const nlohmann::json drop = nlohmann::json::value_t::discarded;
  EXPECT_ERROR(hf_gpt2_config(with("model_type", "llama"), "d/config.json"),
               "d/config.json: model_type is \"llama\"; only \"gpt2\" is read");
  EXPECT_ERROR(hf_gpt2_config(with("model_type", drop), "config.json"), "no model_type");
  EXPECT_ERROR(hf_gpt2_config(with("n_inner", 1000), "config.json"), "n_inner 1000 is not 4 x n_embd (3072)");
  EXPECT_NO_THROW(hf_gpt2_config(with("n_inner", 3072), "config.json"));
  EXPECT_ERROR(hf_gpt2_config(with("activation_function", "relu"), "config.json"),
               "activation_function \"relu\" is not supported");
  EXPECT_EQ(hf_gpt2_config(with("activation_function", "gelu"), "c").gelu, "erf");
  EXPECT_ERROR(hf_gpt2_config(with("layer_norm_epsilon", 1e-6), "config.json"), "layer_norm_epsilon 1e-06 is not 1e-5");
  EXPECT_ERROR(hf_gpt2_config(with("tie_word_embeddings", false), "config.json"), "tie_word_embeddings is false");
  EXPECT_ERROR(hf_gpt2_config(with("n_embd", drop), "config.json"), "config.json: no n_embd");
  EXPECT_ERROR(hf_gpt2_config(with("n_head", 7), "config.json"), "d_model 768 is not divisible by n_heads 7");
  EXPECT_ERROR(hf_gpt2_config(with("vocab_size", 100000), "config.json"),
               "config.json: vocab_size must be an integer from 1 to 65536, got 100000");
  const std::string text = kGpt2Config;
  EXPECT_ERROR(hf_gpt2_config(text.substr(0, text.size() / 2), "d/config.json"), "d/config.json: not valid JSON");
  // A number beyond a double is a JSON error too (nlohmann's out_of_range, found by fuzz_hf_config).
  EXPECT_ERROR(hf_gpt2_config(R"({"model_type": "gpt2", "n_embd": 1E1111})", "d/config.json"),
               "d/config.json: not valid JSON: number overflow parsing '1E1111'");
}

TEST(HfGpt2, WeightLayoutIsConv1DWithFusedQkv) {
  const ModelConfig mc = small_gpt2();
  const SafeTensors spec = random_weights(mc);
  const SafeTensors hf = hf_gpt2_from_spec(spec, mc);
  const int64_t d = mc.d_model, F = 4 * d;
  EXPECT_EQ(hf.metadata.at("format"), "pt");
  // c_attn [d, 3d]: y = x W + b, output columns q | k | v; the spec's Linear rows are [out, in].
  const float* c_attn = tensor(hf, "transformer.h.1.attn.c_attn.weight").f32();
  const float* k = tensor(spec, "blocks.1.attn.k_proj.weight").f32();
  const float* v_bias = tensor(spec, "blocks.1.attn.v_proj.bias").f32();
  for (int64_t i : {0, 5, 31})
    for (int64_t o : {0, 7, 31}) EXPECT_EQ(c_attn[i * 3 * d + d + o], k[o * d + i]) << i << "," << o;
  EXPECT_EQ(tensor(hf, "transformer.h.1.attn.c_attn.bias").f32()[2 * d + 3], v_bias[3]);
  const float* c_fc = tensor(hf, "transformer.h.0.mlp.c_fc.weight").f32();  // [d, 4d]
  const float* fc_in = tensor(spec, "blocks.0.mlp.fc_in.weight").f32();     // [4d, d]
  EXPECT_EQ(c_fc[3 * F + 100], fc_in[100 * d + 3]);
  const float* proj = tensor(hf, "transformer.h.0.mlp.c_proj.weight").f32();  // [4d, d]
  const float* fc_out = tensor(spec, "blocks.0.mlp.fc_out.weight").f32();     // [d, 4d]
  EXPECT_EQ(proj[100 * d + 3], fc_out[3 * F + 100]);
  EXPECT_EQ(tensor(hf, "transformer.wte.weight").data, tensor(spec, "tok_emb.weight").data);
  EXPECT_EQ(tensor(hf, "transformer.h.1.ln_2.bias").data, tensor(spec, "blocks.1.ln2.bias").data);
  EXPECT_EQ(hf.find("lm_head.weight"), nullptr);  // tied: GPT2LMHeadModel saves none
  // And back, bitwise.
  std::map<std::string, StoredTensor> by_name;
  for (auto& t : hf_tensors(mc, spec)) by_name[t.name] = t;
  const SafeTensors back = spec_from_hf_gpt2(by_name, mc);
  ASSERT_EQ(back.tensors.size(), spec.tensors.size());
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, spec.tensors[i].name);
    EXPECT_EQ(back.tensors[i].data, spec.tensors[i].data) << spec.tensors[i].name;
  }
}

TEST(HfGpt2, FolderRoundTripWithTokenizer) {
  TempDir tmp;
  const ModelConfig mc = small_gpt2();
  const SafeTensors spec = random_weights(mc);
  // Random lower-case words: more pairs to merge than a 300-token vocabulary needs.
  std::string text;
  Rng rng(9);
  while (text.size() < 20000) {
    for (uint64_t k = 0, n = 2 + rng.below(6); k < n; ++k) text += char('a' + rng.below(26));
    text += ' ';
  }
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  const Tokenizer tok = train_bpe(text, opt);
  ASSERT_EQ(tok.vocab_size(), 300);
  const std::string dir = (tmp.path / "gpt2").string();
  write_hf_gpt2(dir, mc, spec, &tok);
  const HfGpt2Folder back = read_hf_gpt2(dir);
  EXPECT_EQ(back.config, mc);
  EXPECT_EQ(back.weights_from, "model.safetensors, F32");
  ASSERT_TRUE(back.tokenizer.has_value());
  EXPECT_EQ(back.tokenizer_from, "tokenizer.json");
  EXPECT_EQ(back.tokenizer->to_json(), tok.to_json());
  ASSERT_EQ(back.weights.tensors.size(), spec.tensors.size());
  for (size_t i = 0; i < spec.tensors.size(); ++i) EXPECT_EQ(back.weights.tensors[i].data, spec.tensors[i].data);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/config.json"))["eos_token_id"], tok.special_id(kEndOfText));

  // A tokenizer with more ids than the model's vocabulary is refused.
  ModelConfig narrow = mc;
  narrow.vocab_size = 290;
  write_hf_gpt2(dir + "-narrow", narrow, random_weights(narrow), &tok);
  EXPECT_ERROR(read_hf_gpt2(dir + "-narrow"),
               "gpt2-narrow/tokenizer.json: the tokenizer has ids up to 299 but config.json's vocab_size is 290");
  // A broken tokenizer file is named in the message.
  write_text(fs::path(dir) / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 1E400}}})");
  EXPECT_ERROR(read_hf_gpt2(dir), "gpt2/tokenizer.json: not valid JSON: number overflow parsing '1E400'");
}

TEST(HfGpt2, ShardedBf16WithPrefixesBuffersAndTiedHead) {
  // What older and larger checkpoints look like: BF16, two shards, names with the "transformer."
  // prefix, the causal-mask buffers (BOOL and F32), and lm_head.weight equal to wte.weight.
  TempDir tmp;
  const ModelConfig mc = small_gpt2();
  const SafeTensors spec = random_weights(mc);
  const auto tensors = hf_tensors(mc, spec);
  const fs::path dir = tmp.path / "sharded";
  fs::create_directories(dir);
  write_text(dir / "config.json", hf_gpt2_config_json(mc));
  SafeTensors shard[2];
  nlohmann::json map;
  for (size_t i = 0; i < tensors.size(); ++i) {
    StoredTensor t = tensors[i];
    t.name = "transformer." + t.name;
    t.encoding = Encoding::bf16;
    const int s = i < tensors.size() / 2 ? 0 : 1;
    map[t.name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
    shard[s].tensors.push_back(std::move(t));
  }
  StoredTensor head = shard[0].tensors[0];  // wte
  ASSERT_EQ(head.name, "transformer.wte.weight");
  head.name = "lm_head.weight";
  shard[1].tensors.push_back(head);
  map["lm_head.weight"] = "model-00002-of-00002.safetensors";
  // Shard 0 written by hand, with the buffers, which encode_safetensors cannot write (BOOL).
  std::vector<Raw> raw;
  for (const auto& t : shard[0].tensors) {
    std::vector<uint8_t> b(size_t(t.numel()) * 2);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint16_t h = f32_to_bf16(t.f32()[i]);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    raw.push_back({t.name, "BF16", t.shape, b});
  }
  raw.push_back({"transformer.h.0.attn.bias", "BOOL", {1, 1, 64, 64}, std::vector<uint8_t>(64 * 64, 1)});
  raw.push_back({"transformer.h.0.attn.masked_bias", "F32", {}, std::vector<uint8_t>(4, 0)});
  map["transformer.h.0.attn.bias"] = "model-00001-of-00002.safetensors";
  map["transformer.h.0.attn.masked_bias"] = "model-00001-of-00002.safetensors";
  write_bytes(dir / "model-00001-of-00002.safetensors", raw_safetensors(raw));
  write_bytes(dir / "model-00002-of-00002.safetensors", encode_safetensors(shard[1]));
  const nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", map}};
  write_text(dir / "model.safetensors.index.json", index.dump());

  const HfGpt2Folder back = read_hf_gpt2(dir.string());
  EXPECT_EQ(back.weights_from, "2 shards, BF16");
  EXPECT_FALSE(back.tokenizer.has_value());
  for (const auto& t : spec.tensors) {
    const float* got = tensor(back.weights, t.name).f32();
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(t.f32()[i]))) << t.name << "[" << i << "]";
  }

  // The index must say where each tensor is, and name only this folder's files.
  auto bad_index = [&](nlohmann::json m) {
    write_text(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", m}}.dump());
    return read_hf_gpt2(dir.string());
  };
  nlohmann::json m = map;
  m["transformer.wte.weight"] = "model-00002-of-00002.safetensors";
  EXPECT_ERROR(bad_index(m), "model-00001-of-00002.safetensors: holds tensor 'transformer.wte.weight', which");
  m = map;
  m["transformer.h.9.ln_1.weight"] = "model-00002-of-00002.safetensors";
  EXPECT_ERROR(bad_index(m),
               "model.safetensors.index.json: lists tensor 'transformer.h.9.ln_1.weight' in "
               "model-00002-of-00002.safetensors, which does not hold it");
  m = map;
  m["transformer.wpe.weight"] = "../model-00001-of-00002.safetensors";
  EXPECT_ERROR(bad_index(m), "which is not a file name in this folder");
  m = map;
  m["transformer.wpe.weight"] = "model-00003-of-00003.safetensors";
  EXPECT_ERROR(bad_index(m), "names shard model-00003-of-00003.safetensors, which is not in the folder");
}

TEST(HfGpt2, BadFoldersGiveOneLineNamingFileAndProblem) {
  TempDir tmp;
  const ModelConfig mc = small_gpt2();
  const auto good = hf_tensors(mc, random_weights(mc));
  const auto edited = [&](const std::function<void(std::vector<StoredTensor>&)>& edit) {
    auto t = good;
    edit(t);
    return t;
  };
  const auto find = [](std::vector<StoredTensor>& ts, const std::string& name) -> StoredTensor& {
    for (auto& t : ts)
      if (t.name == name) return t;
    throw std::runtime_error("no " + name);
  };
  int n = 0;
  const auto read = [&](const std::vector<StoredTensor>& ts) {
    return read_hf_gpt2(folder_with(tmp, "case" + std::to_string(n++), mc, ts).string());
  };
  EXPECT_NO_THROW(read(good));
  // Missing, mis-named, extra, mis-shaped, wrong dtype, an untied head.
  EXPECT_ERROR(
      read(edited([&](auto& ts) { std::erase_if(ts, [](auto& t) { return t.name == "h.1.mlp.c_fc.bias"; }); })),
      "/model.safetensors: missing tensor 'h.1.mlp.c_fc.bias' (GPT-2 with n_layer 2 has it");
  EXPECT_ERROR(read(edited([&](auto& ts) { find(ts, "h.0.attn.c_attn.weight").name = "h.0.attn.c_atn.weight"; })),
               "/model.safetensors: unexpected tensor 'h.0.attn.c_atn.weight' (not a GPT-2 weight");
  EXPECT_ERROR(read(edited([&](auto& ts) {
                 ts.push_back(find(ts, "h.1.ln_1.bias"));
                 ts.back().name = "h.2.ln_1.bias";
               })),
               "unexpected tensor 'h.2.ln_1.bias' (config.json has n_layer 2: layers 0 to 1)");
  EXPECT_ERROR(read(edited([&](auto& ts) {
                 auto& t = find(ts, "h.0.mlp.c_fc.weight");
                 t.shape = {t.shape[1], t.shape[0]};
               })),
               "tensor 'h.0.mlp.c_fc.weight' has shape [128, 32] but config.json needs [32, 128] (it looks transposed");
  EXPECT_ERROR(read(edited([&](auto& ts) {
                 find(ts, "wpe.weight").shape = {32, 64};
               })),
               "tensor 'wpe.weight' has shape [32, 64] but config.json needs [64, 32]");
  EXPECT_ERROR(read(edited([&](auto& ts) { find(ts, "ln_f.bias").dtype = DType::i32; })),
               "tensor 'ln_f.bias' has dtype I32; GPT-2's weights are F32, F16 or BF16");
  EXPECT_ERROR(read(edited([&](auto& ts) {
                 ts.push_back(find(ts, "wte.weight"));
                 ts.back().name = "lm_head.weight";
                 reinterpret_cast<float*>(ts.back().data.data())[7] += 1.0f;
               })),
               "lm_head.weight is not a copy of wte.weight");
  EXPECT_ERROR(read(edited([&](auto& ts) {
                 ts.push_back(find(ts, "wte.weight"));
                 ts.back().name = "transformer.wte.weight";
               })),
               "tensor 'wte.weight' appears twice (with and without the 'transformer.' prefix)");
  // A dtype outside F32, F16, BF16 for a weight (F64), and a truncated file.
  {
    const fs::path dir = folder_with(tmp, "f64", mc, good);
    std::vector<Raw> raw;
    for (const auto& t : good) raw.push_back(raw_of(t, t.name));
    raw[3].dtype = "F64";
    raw[3].shape.back() /= 2;
    write_bytes(dir / "model.safetensors", raw_safetensors(raw));
    EXPECT_ERROR(read_hf_gpt2(dir.string()), "f64/model.safetensors: tensor 'h.0.ln_1.bias' has dtype F64; only F32");
  }
  {
    const fs::path dir = folder_with(tmp, "cut", mc, good);
    auto bytes = read_file_bytes((dir / "model.safetensors").string());
    bytes.resize(bytes.size() - 100);
    write_bytes(dir / "model.safetensors", bytes);
    EXPECT_ERROR(read_hf_gpt2(dir.string()),
                 "cut/model.safetensors: tensor 'ln_f.bias' offsets lie outside the data "
                 "area");
  }
  // Folders without their files.
  {
    const fs::path dir = folder_with(tmp, "noconfig", mc, good);
    fs::remove(dir / "config.json");
    EXPECT_ERROR(read_hf_gpt2(dir.string()), "noconfig/config.json: no such file");
    write_text(dir / "config.json", hf_gpt2_config_json(mc).substr(0, 40));
    EXPECT_ERROR(read_hf_gpt2(dir.string()), "noconfig/config.json: not valid JSON");
    fs::remove(dir / "model.safetensors");
    write_text(dir / "config.json", hf_gpt2_config_json(mc));
    write_text(dir / "pytorch_model.bin", "pickle");
    EXPECT_ERROR(read_hf_gpt2(dir.string()),
                 "noconfig: no model.safetensors or model.safetensors.index.json "
                 "(pytorch_model.bin, a pickle, is not read");
    EXPECT_ERROR(read_hf_gpt2((dir / "config.json").string()), "config.json is not a folder");
    EXPECT_ERROR(read_hf_gpt2((tmp.path / "nothing").string()), "no such folder");
  }
}

TEST(HfGpt2, ExportReplacesOnlyAnEarlierExport) {
  TempDir tmp;
  const ModelConfig mc = small_gpt2();
  const std::string dir = (tmp.path / "out").string();
  write_hf_gpt2(dir, mc, random_weights(mc, 1), nullptr);
  write_hf_gpt2(dir + "/", mc, random_weights(mc, 2), nullptr);  // an earlier export: replaced
  EXPECT_EQ(read_hf_gpt2(dir).weights.tensors[0].data, random_weights(mc, 2).tensors[0].data);
  write_text(fs::path(dir) / "notes.txt", "mine");
  EXPECT_ERROR(write_hf_gpt2(dir, mc, random_weights(mc, 3), nullptr),
               "cannot write " + dir + ": it holds notes.txt, which export-hf does not write");
  EXPECT_EQ(read_hf_gpt2(dir).weights.tensors[0].data, random_weights(mc, 2).tensors[0].data);  // untouched
  EXPECT_EQ(slurp(dir + "/notes.txt"), "mine");
  for (const auto& e : fs::directory_iterator(tmp.path))  // no temporary folder left behind
    EXPECT_EQ(e.path().filename().string(), "out");
  write_text(tmp.path / "file", "x");
  EXPECT_ERROR(write_hf_gpt2((tmp.path / "file").string(), mc, random_weights(mc), nullptr),
               "it exists and is not a folder");
}

TEST(HfGpt2, CliImportStoresTheFoldersTokenizerAndExportWritesItBack) {
  TempDir tmp;
  const ModelConfig mc = small_gpt2();  // vocabulary 300
  std::string text;
  Rng rng(9);
  while (text.size() < 20000) {
    for (uint64_t k = 0, n = 2 + rng.below(6); k < n; ++k) text += char('a' + rng.below(26));
    text += ' ';
  }
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  const Tokenizer tok = train_bpe(text, opt);
  write_hf_gpt2(tmp.file("hf"), mc, random_weights(mc), &tok);
  CliRun r = ptl_cli("import-hf hf --out a.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer tokenizer.json, 300 ids, byte-level BPE, stored"), std::string::npos) << r.out;
  // The checkpoint holds the tokenizer: its ids decode with it.
  auto t = Trainer::from_checkpoint(read_file_bytes(tmp.file("a.tinygpt")), "a");
  EXPECT_EQ(t->tokenizer().json(), ModelTokenizer::of(tok).json());
  EXPECT_EQ(t->encode("abc def"), tok.encode("abc def"));
  // export-hf writes it back, and import again gives the same checkpoint.
  r = ptl_cli("export-hf a.tinygpt --out hf2", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer.json (byte-level BPE)"), std::string::npos) << r.out;
  const HfGpt2Folder back = read_hf_gpt2(tmp.file("hf2"));
  ASSERT_TRUE(back.tokenizer.has_value());
  EXPECT_EQ(back.tokenizer->to_json(), tok.to_json());
  r = ptl_cli("import-hf hf2 --out b.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(tmp.file("a.tinygpt")), slurp(tmp.file("b.tinygpt")));
  // A tokenizer with fewer ids than the model (a padded vocabulary) is checked, not stored.
  ModelConfig wide = mc;
  wide.vocab_size = 320;
  write_hf_gpt2(tmp.file("hf-wide"), wide, random_weights(wide), &tok);
  r = ptl_cli("import-hf hf-wide --out w.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("checked but not stored (fewer ids than the model's vocabulary)"), std::string::npos) << r.out;
  EXPECT_FALSE(Trainer::from_checkpoint(read_file_bytes(tmp.file("w.tinygpt")), "w")->tokenizer().reads_text());
}

TEST(HfGpt2, CliImportExportImportIsBitwise) {
  TempDir tmp;
  const ModelConfig mc = small_gpt2();
  write_hf_gpt2(tmp.file("hf"), mc, random_weights(mc), nullptr);
  CliRun r = ptl_cli("import-hf hf --out a.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote a.tinygpt: GPT-2 with 2 layers, d 32, 4 heads, ctx 64, vocab 300, gelu tanh"),
            std::string::npos)
      << r.out;
  r = ptl_cli("export-hf a.tinygpt --out hf2", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(tmp.file("hf2/model.safetensors")), slurp(tmp.file("hf/model.safetensors")));
  EXPECT_EQ(slurp(tmp.file("hf2/config.json")), slurp(tmp.file("hf/config.json")));
  r = ptl_cli("import-hf hf2 --out b.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(tmp.file("a.tinygpt")), slurp(tmp.file("b.tinygpt")));
  // The checkpoint records the GELU, and the model runs with it.
  const auto ckpt = read_file_bytes(tmp.file("a.tinygpt"));
  auto t = Trainer::from_checkpoint(ckpt, "a");
  EXPECT_EQ(t->model_config(), mc);

  // A byte-level model of ours exports with the exact GELU and its tokenizer.
  r = ptl_cli("init --preset tiny --out tiny.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  r = ptl_cli("export-hf tiny.tinygpt --out tiny-hf", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(tmp.file("tiny-hf/config.json")))["activation_function"], "gelu");
  EXPECT_TRUE(fs::exists(tmp.file("tiny-hf/tokenizer.json")));
  r = ptl_cli("import-hf tiny-hf --out tiny2.tinygpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(tmp.file("tiny.tinygpt")), slurp(tmp.file("tiny2.tinygpt")));

  // Errors: one line naming the file.
  fs::remove(tmp.file("hf/model.safetensors"));
  expect_error(ptl_cli("import-hf hf --out c.tinygpt", tmp), "hf: no model.safetensors");
  EXPECT_FALSE(fs::exists(tmp.file("c.tinygpt")));
  expect_error(ptl_cli("export-hf a.tinygpt --out a.tinygpt", tmp), "it exists and is not a folder");
}

namespace {
// A folder's files read into memory, by name.
std::map<std::string, std::vector<uint8_t>> files_of(const std::string& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& e : fs::directory_iterator(dir))
    out[e.path().filename().string()] = read_file_bytes(e.path().string());
  return out;
}
}  // namespace

// The WebAssembly API hands a browser's picked files to the same reader: the same model, the
// same checkpoint and the same messages as the folder on disk.
TEST(HfGpt2, FilesInMemoryReadAsTheFolderOnDisk) {
  TempDir tmp;
  const ModelConfig mc = small_gpt2();
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "the quick brown fox " + std::to_string(i % 37) + " ";
  const Tokenizer tok = train_bpe(text, opt);
  ASSERT_EQ(tok.vocab_size(), 300);
  const std::string dir = (tmp.path / "gpt2").string();
  write_hf_gpt2(dir, mc, random_weights(mc), &tok);

  HfGpt2Import disk = import_hf_gpt2(read_hf_gpt2(dir), dir);
  HfGpt2Import memory = import_hf_gpt2(read_hf_gpt2(FolderFiles::in_memory(files_of(dir), dir)), dir);
  EXPECT_EQ(memory.summary, disk.summary);
  EXPECT_TRUE(memory.tokenizer_stored);
  EXPECT_EQ(memory.checkpoint, disk.checkpoint);
  // The trainer's base is that checkpoint: adapters trained on it load on `ptl import-hf`'s file.
  EXPECT_EQ(memory.trainer->base_sha256(), sha256_hex(disk.checkpoint));
  EXPECT_EQ(memory.trainer->save_checkpoint(false), disk.checkpoint);

  // Messages: the label stands for the folder, or the files are named alone without one.
  auto files = files_of(dir);
  files.erase("config.json");
  EXPECT_ERROR(read_hf_gpt2(FolderFiles::in_memory(files, dir)),
               dir + "/config.json: no such file (a Hugging Face model folder has config.json)");
  EXPECT_ERROR(read_hf_gpt2(FolderFiles::in_memory(files, "")),
               "config.json: no such file (a Hugging Face model folder has config.json)");
  fs::remove(fs::path(dir) / "config.json");
  EXPECT_ERROR(read_hf_gpt2(dir), dir + "/config.json: no such file (a Hugging Face model folder has config.json)");
  files = files_of(dir);
  files["config.json"] = {(uint8_t)(0x5b), (uint8_t)(0x5d)};  // [], not an object
  EXPECT_ERROR(read_hf_gpt2(FolderFiles::in_memory(files, "picked")), "picked/config.json: not a JSON object");
  // Names are a folder's file names, and each file is handed over once.
  EXPECT_ERROR(FolderFiles::in_memory({{"sub/config.json", {}}}, "x"), "'sub/config.json' is not a file name");
  const FolderFiles once = FolderFiles::in_memory({{"a.txt", {1, 2}}}, "x");
  EXPECT_TRUE(once.has("a.txt"));
  EXPECT_EQ(once.read("a.txt"), (std::vector<uint8_t>{1, 2}));
  EXPECT_ERROR(once.read("a.txt"), "x/a.txt: read twice");
  EXPECT_ERROR(once.read("b.txt"), "x/b.txt: no such file");
}
