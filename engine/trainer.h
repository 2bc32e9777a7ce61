#pragma once
// The engine's front: one model with its weights, optimizer state, data and programs. The CLI,
// the WebAssembly API and the tests all drive a model through this class. Its parts, by concern:
// - model state, checkpoints, data, the training step and evaluation: trainer.cpp;
// - fine-tuning (a fresh run on the current weights, LoRA adapters, SFT data): trainer_finetune.cpp;
// - generation and inspection: trainer_generate.cpp;
// - the training loop around the step (events, history, divergence): training_loop.h.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/data.h"
#include "engine/lora.h"
#include "engine/model.h"
#include "engine/model_tokenizer.h"
#include "engine/sampler.h"
#include "engine/sft.h"

namespace ptl {

struct StepResult {
  int64_t step = 0;  // the step just completed (1-based)
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;
  double seconds = 0;
};

struct EvalResult {
  double loss = 0;  // mean cross-entropy in nats per token (per byte for a byte-level model)
  int64_t tokens = 0;
  double bytes = 0;  // the bytes of the tokens predicted (mask-weighted); 0 when the model reads no text
  double perplexity() const;
  // Total nats / (bytes * ln 2): comparable across tokenizers. A byte-level model's is loss / ln 2.
  double bits_per_byte() const;
};

// What the model computes on a prompt (Trainer::inspect): its next-token distribution and where
// each head of each layer looks.
struct InspectResult {
  std::vector<int32_t> tokens;                  // the window inspected: the prompt's last ctx tokens
  std::vector<std::pair<int32_t, double>> top;  // the most likely next tokens (id, probability), most likely first
  int layers = 0, heads = 0, T = 0;             // T = tokens.size()
  std::vector<float> attention;                 // [layers, heads, T, T]: row i = query position i's weights over keys
};

class Trainer {
 public:
  // A fresh model, initialised from train.seed.
  Trainer(const ModelConfig& model, const TrainConfig& train);
  // A model from checkpoint bytes (validated; throws ptl::Error naming the problem).
  static std::unique_ptr<Trainer> from_checkpoint(const std::vector<uint8_t>& bytes, const std::string& what);
  // Replace this model's whole state with a checkpoint's. Validated before anything changes:
  // a failed load leaves the trainer as it was.
  void load_checkpoint(const std::vector<uint8_t>& bytes, const std::string& what);
  std::vector<uint8_t> save_checkpoint(bool with_optimizer = true) const;

  // --- The tokenizer (engine/model_tokenizer.h): bytes for a fresh model of vocabulary 256 ---
  // Its vocabulary must be the model's (throws otherwise, changing nothing). A corpus or SFT
  // data set before, encoded by the previous tokenizer, is dropped.
  void set_tokenizer(ModelTokenizer tokenizer);
  const ModelTokenizer& tokenizer() const { return tokenizer_; }
  // Text to ids and back with the model's tokenizer (throws for a model that reads no text).
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids) const;

  // The corpus to train on; 90/10 split by bytes, each side encoded by the model's tokenizer.
  // Throws if a split is shorter than one window.
  void set_corpus(std::string bytes, const std::string& name = "corpus", double val_fraction = 0.1);
  bool has_corpus() const { return corpus_ != nullptr; }
  const Corpus& corpus() const;

  StepResult train_step();  // train_step(next_train_batch())
  // On a given batch (tests, parity, benchmarks): the run's batch size, rows of at most the context
  // (the training program is built for the batch's row length); batch.mask = SFT loss mask.
  StepResult train_step(const Batch& batch);
  double batch_loss(const Batch& batch);  // the evaluation program's mean loss (no logits kept)
  // The logits [B*T, V] of the batch's inputs (the forward program; its targets are not read),
  // valid until the next call or change of weights.
  const float* logits(const Batch& batch);
  EvalResult validation_loss();                        // the fixed validation windows (or the SFT validation examples)
  EvalResult evaluate_text(const std::string& bytes);  // every token of a text, window by window
  // Mean loss over batches, each position weighted by its mask (1 where a batch has no mask).
  EvalResult evaluate_batches(const std::vector<Batch>& batches);

  // --- Another executor running the training program (the WebGPU backend) ---
  // The batch the next train_step() would train on, from the SFT data or the corpus, drawn from
  // the same data RNG that train_step() uses (it is what train_step() calls): N calls leave the
  // data RNG, and so a checkpoint, where N training steps would.
  Batch next_train_batch();
  // The learning rate of 0-based step `step` under the current schedule (what train_step passes
  // to AdamW for its step state().step).
  double lr_at(int64_t step) const { return train_.lr_at(step); }
  // Counts one step that another executor ran on a batch of next_train_batch(): step and
  // tokens_seen advance as train_step() would advance them (weights are not touched; bring them
  // back with load_checkpoint). Returns the 1-based number of the step counted.
  int64_t count_external_step(const Batch& batch);

  // --- The model's state tensor by tensor (for an executor keeping its own copy of the weights) ---
  // Every tensor of the state: the parameters (LoRA adapters included) and the AdamW moments
  // ("optim.m.<name>", "optim.v.<name>") of the trainable ones, whether present yet or not.
  std::vector<TensorInfo> state_tensors() const;
  // A state tensor's f32 data (numel of its shape). Throws for a name outside the state or a
  // tensor not present yet (moments before the first step here).
  const float* read_tensor(const std::string& name) const;
  // Overwrites a state tensor (creating it if absent, as moments may be) with `bytes` bytes,
  // which must be its size; a generation in progress continues under the new weights.
  void write_tensor(const std::string& name, const void* data, size_t bytes);
  // Sets the number of steps done (those another executor ran): the schedule and checkpoints
  // follow it; the data order does not move (next_train_batch moves it).
  void set_step(int64_t step);

  // --- Inspection ("watch the model think") ---
  // The last ctx tokens of the prompt (a newline if it is empty) through the inspect program
  // (build_inspect_program: the forward pass plus each layer's attention probabilities, with the
  // LoRA adapters when enabled): the top_k most likely next tokens after the last token (softmax
  // of its logits) and every layer's attention maps.
  InspectResult inspect(const std::vector<int32_t>& prompt, int top_k = 10);

  // --- Post-training (docs/post-training.md) ---
  // Begin a fine-tuning run on the current weights: `train` replaces the train config, and the
  // step count, history, data order and optimizer moments start afresh. Weights and adapters stay.
  void start_finetune(const TrainConfig& train);
  // Add LoRA adapters (A Kaiming-uniform from `seed`, B zero, so the outputs do not change) and
  // freeze the base: training updates only the adapters (the base gets no gradient buffers and no
  // AdamW moments); evaluation and generation include them. Throws on a bad config (unknown
  // target, rank larger than a layer) without changing anything.
  void enable_lora(const LoraConfig& lora, uint64_t seed);
  void disable_lora();  // drop the adapters and their moments: the base model again
  bool lora_enabled() const { return lora_.enabled(); }
  const LoraConfig& lora_config() const { return lora_; }
  // sha256 of the checkpoint file this model was loaded from (set by from_checkpoint and
  // load_checkpoint; empty for a model made in memory). Adapters record it and are checked against it.
  const std::string& base_sha256() const { return base_sha256_; }
  void set_base_sha256(const std::string& sha) { base_sha256_ = sha; }
  // The current adapters as a safetensors file of format "tinygpt-lora".
  std::vector<uint8_t> save_adapter() const;
  // Adapters trained on this base (same tokenizer, model config and base sha256; throws
  // otherwise, leaving the trainer as it was). Replaces any adapters present.
  void load_adapter(const std::vector<uint8_t>& bytes, const std::string& what);
  // Fold the adapters into the base weights, W += (alpha / r) B A, and drop them.
  void merge_lora();

  // SFT: train_step() and validation_loss() use these packed, masked examples instead of the
  // corpus. Data prepared for another tokenizer (SftData::tokenizer()) is refused.
  void set_sft_data(std::unique_ptr<SftData> data);
  bool has_sft_data() const { return sft_ != nullptr; }
  SftData& sft_data();

  // Generation: streams each new token to `on_token` (return false to stop early). An empty
  // prompt starts from a newline (its token).
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int max_tokens, const SamplingOptions& opt,
                                const std::function<bool(int32_t)>& on_token = {});
  // The same, one token per call (for callers that poll, like the WebAssembly API): start a
  // generation, then take tokens; a new start discards the old one. After a change of weights (a
  // training step, write_tensor) the next token reads the whole sequence again through the new
  // weights: what follows is what a generation started then from the same tokens would give.
  void begin_generation(const std::vector<int32_t>& prompt, const SamplingOptions& opt);
  int32_t next_token();

  const ModelConfig& model_config() const { return model_; }
  TrainConfig& train_config() { return train_; }
  const TrainConfig& train_config() const { return train_; }
  const TrainState& state() const { return state_; }
  std::vector<LossPoint>& history() { return history_; }
  cpu::TensorStore& store() { return store_; }
  void add_elapsed(double seconds) { state_.elapsed_seconds += seconds; }
  // Gradient of parameter `name` after the last train_step (before clipping).
  const float* gradient(const std::string& name);
  // The training program's executor for rows of `seq` tokens (0: those of the last step, at first
  // the context); another length builds the program again (`ptl bench --seq`: GPT-2 at T 64).
  cpu::Executor& train_executor(int seq = 0);

 private:
  void check_batch(const Batch& batch) const;  // throws unless the run can train this batch
  Trainer() = default;
  cpu::Executor& eval_executor(int batch, int seq, bool masked = false);
  void drop_programs();
  void weights_changed();  // after a write of weights: a generation in progress re-reads its tokens
  void erase_adapters();
  double target_bytes(const Batch& b) const;  // bytes of the batch's counted targets
  std::vector<int32_t> start_tokens() const;  // what an empty prompt stands for

  ModelConfig model_;
  ModelTokenizer tokenizer_;
  TrainConfig train_;
  TrainState state_;
  std::vector<LossPoint> history_;
  cpu::TensorStore store_;
  std::unique_ptr<Corpus> corpus_;
  std::unique_ptr<SftData> sft_;
  LoraConfig lora_;  // rank 0: no adapters
  std::string base_sha256_;
  std::string lora_merged_;    // metadata "lora_merged" of a model with adapters folded in
  bool train_masked_ = false;  // the training program has a loss_mask input
  int train_seq_ = 0;          // tokens per row of train_exec_'s program (0: the context)
  std::unique_ptr<cpu::Executor> train_exec_, generate_exec_;
  std::unique_ptr<cpu::Executor> inspect_exec_;  // for one prompt length (rebuilt when it changes)
  std::unique_ptr<cpu::Executor> prefill_exec_;  // the generate program over a prompt's tokens (as inspect_exec_)
  struct Generation {
    Sampler sampler;
    std::vector<int32_t> seq;  // prompt and generated tokens
    int cached = 0;            // tokens of seq whose keys and values are in the KV cache
    std::vector<float> window_logits;
  };
  std::unique_ptr<Generation> gen_;
  std::map<std::tuple<int, int, bool>, std::unique_ptr<cpu::Executor>> eval_execs_;
  std::map<std::pair<int, int>, std::unique_ptr<cpu::Executor>> forward_execs_;  // logits, by (batch, seq)
};

}  // namespace ptl
