#pragma once
// What a .tinygpt checkpoint means (docs/checkpoint-format.md): the spec's parameter names in
// PyTorch layouts, optional AdamW moments, and metadata for resuming exactly.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/model.h"
#include "engine/model_tokenizer.h"
#include "engine/rng.h"
#include "engine/safetensors.h"

namespace ptl {

constexpr int kCheckpointVersion = 1;
constexpr const char* kVersionString = "ptl 0.1.0";

// Where a run stands: enough to continue it as if it had never stopped.
struct TrainState {
  int64_t step = 0;  // optimizer steps completed
  Rng data_rng;      // the training-window generator, positioned after the last batch drawn
  int64_t tokens_seen = 0;
  double elapsed_seconds = 0;
};

struct LossPoint {
  int64_t step = 0;
  double train_loss = 0;
  std::optional<double> val_loss;
};

struct CheckpointContents {
  ModelConfig model;
  ModelTokenizer tokenizer;          // metadata "tokenizer" (and "tokenizer_json"), validated against the model
  std::optional<TrainConfig> train;  // absent in a bare weights export from elsewhere
  TrainState state;
  std::vector<LossPoint> history;
  bool has_optimizer = false;
  std::string created_by;
};

// Reads and validates metadata and tensors: format and version, a valid config, the tokenizer
// (one this ptl reads, with as many tokens as the model's vocabulary), every parameter
// present with the exact shape and dtype, optimizer moments all or none, nothing unknown.
// Throws ptl::Error naming the problem; `what` names the source (a path) in messages.
CheckpointContents inspect_checkpoint(const SafeTensors& file, const std::string& what);

// For a bare safetensors file with the spec's parameters and no ptl metadata (saved by another
// tool, e.g. `safetensors.torch.save_file(model.state_dict())`): the model config read off the
// tensor shapes, vocab and width from tok_emb, context from pos_emb, layers from the blocks.{i}
// names. No shape holds the number of heads: `heads`, or 0 for the heads of the preset with these
// shapes (an error naming the choice when no preset has them).
ModelConfig infer_model_config(const SafeTensors& file, int heads, const std::string& what);
// The same file with the metadata of a ptl checkpoint (format, version, that config, the
// tokenizer: `tokenizer`, or bytes for a vocabulary of 256 and none otherwise), ready for
// inspect_checkpoint / Trainer::from_checkpoint.
SafeTensors with_checkpoint_metadata(SafeTensors file, const ModelConfig& config,
                                     const ModelTokenizer* tokenizer = nullptr);

std::string history_to_json(const std::vector<LossPoint>&);
std::string sha256_hex(const std::vector<uint8_t>& bytes);
std::string sha256_hex(const uint8_t* bytes, size_t size);

}  // namespace ptl
