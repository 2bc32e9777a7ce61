#pragma once
// The engine's front: one model with its weights, optimizer state, data and programs. The CLI,
// the WebAssembly API and the tests all drive a model through this class.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/checkpoint.h"
#include "engine/config.h"
#include "engine/data.h"
#include "engine/model.h"
#include "engine/sampler.h"

namespace ptl {

struct StepResult {
  int64_t step = 0;  // the step just completed (1-based)
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;
  double seconds = 0;
};

struct EvalResult {
  double loss = 0;  // mean cross-entropy in nats per byte
  int64_t tokens = 0;
  double perplexity() const;
  double bits_per_byte() const;
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

  // The corpus to train on; 90/10 split. Throws if a split is shorter than one window.
  void set_corpus(std::string bytes, const std::string& name = "corpus", double val_fraction = 0.1);
  bool has_corpus() const { return corpus_ != nullptr; }
  const Corpus& corpus() const;

  StepResult train_step();                    // draws the next batch from the corpus
  StepResult train_step(const Batch& batch);  // on a given batch (tests, parity)
  double batch_loss(const Batch& batch);      // evaluation program; logits() then holds its logits
  const float* logits();                      // [B*T, V] of the last batch_loss
  EvalResult validation_loss();               // the fixed validation windows
  EvalResult evaluate_text(const std::string& bytes);  // every byte of a text, window by window

  // Generation: streams each new token to `on_token` (return false to stop early).
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int max_tokens, const SamplingOptions& opt,
                                const std::function<bool(int32_t)>& on_token = {});

  const ModelConfig& model_config() const { return model_; }
  TrainConfig& train_config() { return train_; }
  const TrainConfig& train_config() const { return train_; }
  const TrainState& state() const { return state_; }
  std::vector<LossPoint>& history() { return history_; }
  cpu::TensorStore& store() { return store_; }
  void add_elapsed(double seconds) { state_.elapsed_seconds += seconds; }
  // Gradient of parameter `name` after the last train_step (before clipping).
  const float* gradient(const std::string& name);
  cpu::Executor& train_executor();

 private:
  Trainer() = default;
  cpu::Executor& eval_executor(int batch, int seq);
  void drop_programs();

  ModelConfig model_;
  TrainConfig train_;
  TrainState state_;
  std::vector<LossPoint> history_;
  cpu::TensorStore store_;
  std::unique_ptr<Corpus> corpus_;
  std::unique_ptr<cpu::Executor> train_exec_, generate_exec_;
  std::map<std::pair<int, int>, std::unique_ptr<cpu::Executor>> eval_execs_;
  cpu::Executor* last_eval_ = nullptr;
};

}  // namespace ptl
