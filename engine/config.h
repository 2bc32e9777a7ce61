#pragma once
// Model and training configuration, and the presets of docs/model.md.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ptl {

// A JSON number as an integer in [lo, hi]: an integer, or a float with an integral value (1e3)
// as some JSON writers give; throws ptl::Error naming `what` for anything else. (nlohmann's
// get<int>() turns 2^32 + 1 into 1, and a float beyond the type's range is undefined behaviour.)
int64_t json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what);
uint64_t json_u64(const nlohmann::json& v, const std::string& what);  // the same, for [0, 2^64)

struct ModelConfig {
  // Token ids are 0 .. vocab_size - 1: 256 for the byte-level tokenizer, a BPE tokenizer's size
  // otherwise. Any size up to kMaxVocab (the loss never holds [tokens, vocab] logits: chunked).
  static constexpr int kMaxVocab = 65536;
  int vocab_size = 256;
  int n_layers = 3;
  int d_model = 96;
  int n_heads = 3;
  int ctx = 64;  // context length (positions)
  // The MLP's GELU (docs/model.md, "Architecture"): "erf", the exact form and the default, or
  // "tanh", GPT-2's approximation (its gelu_new). Recorded in a checkpoint only when not "erf",
  // so that files of models without the setting stay byte for byte what they were.
  std::string gelu = "erf";

  int head_dim() const { return d_model / n_heads; }
  int64_t param_count() const;
  void validate() const;  // throws ptl::Error naming the bad field
  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j);
  bool operator==(const ModelConfig&) const = default;
};

struct Preset {
  std::string name;  // lower case: tiny, small, ...
  ModelConfig model;
  int batch;
  // The peak learning rate `ptl train` and the playground use for this preset when none is given:
  // measured for Medium (2e-3) and Large (1.5e-3) on TinyShakespeare, and 1e-3 for a 6-layer,
  // d 360 model on a GPU (docs/models.md); smaller presets take Medium's, larger ones the GPU
  // model's, Behemoth the conservative 3e-4.
  double lr;
};

const std::vector<Preset>& presets();
const Preset& find_preset(const std::string& name);  // case-insensitive; throws listing the valid names

struct TrainConfig {
  int batch = 16;
  int64_t steps = 1500;             // total planned steps (the schedule spans these)
  double lr = 3e-4;                 // peak learning rate
  std::string schedule = "cosine";  // cosine | constant
  int64_t warmup = -1;              // warm-up steps; -1 = automatic (min(100, steps/10))
  double min_lr_frac = 0.1;         // cosine decays to this fraction of the peak
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double grad_clip = 1.0;
  double dropout = 0.0;  // rate of the model's dropout sites in training (docs/model.md), [0, 1)
  uint64_t seed = 1337;
  int64_t eval_every = 100;    // validation every N steps (0 = only at the end)
  int eval_batches = 8;        // windows of the validation split: eval_batches * batch
  int64_t sample_every = 500;  // sample text every N steps (0 = never)
  std::string data_path;       // corpus the run was trained on (for `ptl eval` without --data)
  // Set when a cosine run was resumed with a different `steps` (continue_schedule): from 0-based
  // step decay_from_step on, the cosine runs from decay_from_lr down to the minimum at `steps`.
  int64_t decay_from_step = -1;  // -1: none, the plain warm-up + cosine
  double decay_from_lr = 0;

  int64_t warmup_steps() const;
  double lr_at(int64_t step) const;  // learning rate for 0-based step `step`
  void validate() const;
  nlohmann::json to_json() const;
  static TrainConfig from_json(const nlohmann::json& j);
};

// What a run from scratch trains when given no options (`ptl train`, the playground): chosen by
// measurement on a 2-core CPU to write recognisable words and verse within minutes (docs/models.md,
// "From scratch in minutes"). The training defaults above stay conservative for other uses.
struct DefaultRun {
  static constexpr const char* preset = "medium";
  static constexpr int64_t steps = 4000;  // the learning rate: the preset's (Preset::lr)
};

// The config to train with from 0-based step `step` on, when a run planned as `before` resumes
// as `after` (docs/model.md, "Learning rate"): a changed `steps` on an unchanged cosine keeps the
// warm-up length and continues from the rate `before` had reached, so the rate never jumps.
TrainConfig continue_schedule(const TrainConfig& before, TrainConfig after, int64_t step);

}  // namespace ptl
