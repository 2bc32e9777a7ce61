#pragma once
// LoRA adapter files (docs/post-training.md): a safetensors file holding only the adapter
// tensors (blocks.{i}.attn.q_proj.lora_A [r, in], .lora_B [out, r], ...) and metadata that ties
// them to the exact base checkpoint they were trained on (its sha256, model config and
// tokenizer identity).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/model.h"
#include "engine/safetensors.h"

namespace ptl {
namespace cpu {
class TensorStore;
}

constexpr const char* kAdapterFormat = "tinygpt-lora";
constexpr int kAdapterVersion = 1;

// The adapters `ptl lora train`, the WebAssembly API and the playground's fine-tune panel train
// when none are given: rank 2, alpha 8 on every projection (attention and MLP), at peak learning
// rate kDefaultLoraLr for kDefaultLoraSteps steps. Chosen with bench/lora_defaults
// (docs/post-training.md, "The defaults"): on a Small TinyShakespeare base they lower the
// held-out perplexity of text in another style by 71% (rank 4 on q, v at 1e-3: 34.5%), and they
// stay under 3% of the parameters from the Small preset up.
LoraConfig default_lora();
constexpr double kDefaultLoraLr = 5e-3;
constexpr int64_t kDefaultLoraSteps = 500;
// Full fine-tuning (`ptl sft`, the WebAssembly API without adapters) moves every weight of a
// trained model: a gentler peak rate than a run from scratch or the adapters'.
constexpr double kDefaultFinetuneLr = 3e-4;

// "q,v" or "q, k, fc_in" -> {"q", "v"}; "all" = every projection (q, k, v, o, fc_in, fc_out);
// GPT-2's module names too: c_attn = qkv, attn.c_proj = o, c_fc = fc_in, mlp.c_proj = fc_out, and
// c_proj both (as PEFT matches it). Throws on an unknown name.
std::set<std::string> parse_lora_targets(const std::string& list);
std::string lora_targets_string(const std::set<std::string>& targets);  // "q,v" (canonical order)
// Throws naming the problem: rank < 1, alpha not finite, no targets, unknown target, qkv with
// q, k or v.
void validate_lora(const LoraConfig&);
nlohmann::json lora_to_json(const LoraConfig&);
LoraConfig lora_from_json(const nlohmann::json&);

// The adapter tensors of a LoRA config on a model, in file order (a subset of parameter_list).
std::vector<TensorInfo> adapter_tensors(const ModelConfig&, const LoraConfig&);

// One adapted projection: its weight gains (alpha / r) B A. The fused target qkv is three of
// these, one A shared, B's row blocks "blocks.{i}.attn.qkv.{q,k,v}.lora_B" on q_proj, k_proj and
// v_proj.
struct LoraUpdate {
  std::string a, b;   // tensor names: A [r, in], B [out, r]
  std::string layer;  // "blocks.0.attn.q_proj": its .weight [out, in] and .bias [out]
};
// Every adapted projection, by layer, in the order of the targets (q, k, v, qkv, o, fc_in, fc_out).
std::vector<LoraUpdate> lora_updates(const ModelConfig&, const LoraConfig&);

struct AdapterContents {
  ModelConfig base_model;   // the config of the base it was trained on
  TokenizerId tokenizer;    // the base's tokenizer (metadata "tokenizer")
  std::string base_sha256;  // sha256 of the base checkpoint file's bytes ("" when not recorded)
  // weights_sha256 of the base ("" in adapters written before it was recorded): the identity an
  // adapter is matched by, whatever else the base's file holds (optimizer state, metadata).
  std::string base_weights_sha256;
  LoraConfig lora;
  std::optional<TrainConfig> train;
  int64_t steps = 0;  // optimizer steps the adapter was trained for
  std::vector<LossPoint> history;
  std::string created_by;
};

bool is_adapter(const SafeTensors& file);  // metadata format "tinygpt-lora"

// The identity of a model's weights: sha256 of the lines "<name> <sha256 of its float32 values,
// little-endian>\n" of every base parameter (parameter_list(model), no adapters), in name order.
// The same weights give the same digest from any file that holds them (with or without optimizer
// state, any metadata); an F16 export, whose values differ, does not.
std::string weights_sha256(const cpu::TensorStore& store, const ModelConfig& model);
// Reads and validates an adapter: format and version, configs, every adapter tensor present
// with the exact shape, nothing else. Throws ptl::Error naming `what` and the problem.
AdapterContents inspect_adapter(const SafeTensors& file, const std::string& what);

}  // namespace ptl
