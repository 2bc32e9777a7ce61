#pragma once
// The GPT of docs/model.md, built as programs (see program.h). model.cpp is the one
// place the architecture is written down; every backend runs what it produces.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/program.h"

namespace ptl {

// LoRA adapters (spec "LoRA"): y = W x + b + (alpha / r) B (A x) on the chosen projections.
// alpha and targets default to what `ptl lora train` uses (default_lora() in engine/lora.h).
struct LoraConfig {
  int rank = 0;  // 0 = no adapters
  double alpha = 8.0;
  // Any of q, k, v, o, fc_in, fc_out, or qkv: one adapter over q, k and v together (GPT-2's
  // fused c_attn, as PEFT adapts it), never with q, k or v.
  std::set<std::string> targets = {"q", "k", "v", "o", "fc_in", "fc_out"};
  double weight_decay = 0.0;
  // Dropout on the adapter's input (as PEFT): (alpha / r) B (A dropout(x)), training only.
  double dropout = 0.0;
  bool enabled() const { return rank > 0; }
};

struct BuildOptions {
  int batch = 1;
  int seq = 0;             // tokens per row; 0 = the model's ctx
  bool loss_mask = false;  // SFT: a per-position mask input weights the loss
  LoraConfig lora;         // when enabled the base is frozen and only adapters train
  // Inspection: next to each layer's attention, an attention_probs op over the same q and k
  // writes the probabilities it applies, "blocks.{i}.attn.probs" [B, H, T, T].
  bool attention_probs = false;
  // Generation over a prompt (batch 1): only the last position's logits, the next token's, are
  // needed; the positions before it go through the blocks for the KV cache and stop there (a
  // slice_rows op before the final LayerNorm). build_generate_program sets it.
  bool last_position_only = false;
  // Dropout rate of the model's sites (docs/model.md, "Dropout"). Train programs only (the
  // builder ignores it in every other program); build_train_program sets it from
  // TrainConfig::dropout. With it or the LoRA dropout above 0 a train program has the input
  // "dropout.seed" i32[2] = {key, step}.
  double dropout = 0.0;
};

// The parameters of a model (base plus adapters), in a fixed order, with their shapes.
std::vector<TensorInfo> parameter_list(const ModelConfig&, const LoraConfig& = {});

// Seeded initialisation of one parameter per the spec (N(0, 0.02), scaled residual
// projections, zero biases, unit LayerNorm gains; LoRA A Kaiming-uniform, B zero).
void init_parameter(const ModelConfig&, const TensorInfo&, uint64_t seed, float* out);

// The forward pass up to the final LayerNorm: tokens [B, T] -> "ln_f.out" [B, T, d] ([1, 1, d] with
// last_position_only); returns its id.
int build_features(Program&, const ModelConfig&, const BuildOptions&);
// The same, then the tied output projection: -> "logits" [B*T, V]; returns the logits' id.
int build_forward(Program&, const ModelConfig&, const BuildOptions&);

// The programs a backend runs. The loss programs (eval, train) hold no logits: their
// cross_entropy_tied op computes the tied projection and the loss over chunks of the vocabulary.
// Tensor names: inputs "tokens", "targets", "loss_mask"; outputs "logits" (forward), "loss".
Program build_forward_program(const ModelConfig&, const BuildOptions&);  // logits only
Program build_eval_program(const ModelConfig&, const BuildOptions&);     // loss (and loss.lse)
// Forward + loss + backward + gradient norm + AdamW. Inputs: "tokens", "targets", ["loss_mask"],
// "optim.hparams" f32[2] = {learning rate, 1-based step}, and with dropout (tc.dropout or the
// LoRA dropout above 0) "dropout.seed" i32[2] = {dropout::key_of(seed), 1-based step}.
// Outputs: "loss", "grad_norm".
Program build_train_program(const ModelConfig&, const BuildOptions&, const TrainConfig&);
// Generation with a KV cache ("cache.k.{i}", "cache.v.{i}" [ctx, d], kind state): `seq` tokens
// (one at a time, or a prompt's at once) at positions pos0 .. pos0 + seq - 1, their keys and
// values written to the cache. Inputs: "tokens" i32[1, seq], "pos0" i32[1] (the first token's
// position). Output: "logits" [1, V] for the last of them (BuildOptions::last_position_only),
// bitwise what the tokens one at a time give.
Program build_generate_program(const ModelConfig&, const LoraConfig& = {}, int seq = 1);
// "Watch the model think": the forward pass of one sequence of `seq` tokens (1..ctx) with every
// layer's attention probabilities ("blocks.{i}.attn.probs" [1, H, seq, seq], results no op
// reads) and the logits [seq, V]. The forward program's builder with attention_probs set.
Program build_inspect_program(const ModelConfig&, int seq, const LoraConfig& = {});

}  // namespace ptl
