// Trainer: post-training (docs/post-training.md): a fresh fine-tuning run on the current weights,
// LoRA adapters (enable, save, load, merge) and SFT data.
#include <cstring>

#include "engine/error.h"
#include "engine/trainer.h"

namespace ptl {

void Trainer::start_finetune(const TrainConfig& train) {
  train.validate();
  train_ = train;
  // A fresh run: the base run's resumed-schedule point (config.h) is not this run's.
  train_.decay_from_step = -1;
  train_.decay_from_lr = 0;
  state_ = TrainState();  // () not {}: clang rejects {} (Rng's default constructor is explicit)
  state_.data_rng = rng_for(train_.seed, "data");
  history_.clear();
  store_.erase_prefix("optim.");
  drop_programs();
}

void Trainer::erase_adapters() {
  // Exact names as prefixes: "blocks.1.attn.q_proj.lora_A" is a prefix of no other tensor.
  for (const auto& t : adapter_tensors(model_, lora_)) {
    store_.erase_prefix(t.name);
    store_.erase_prefix("optim.m." + t.name);
    store_.erase_prefix("optim.v." + t.name);
  }
}

void Trainer::enable_lora(const LoraConfig& lora, uint64_t seed) {
  validate_lora(lora);
  const auto tensors = adapter_tensors(model_, lora);  // throws when the rank is larger than a layer
  drop_programs();
  if (lora_.enabled()) erase_adapters();
  // The base is frozen from now on: its AdamW moments are of no use.
  store_.erase_prefix("optim.");
  for (const auto& t : tensors) init_parameter(model_, t, seed, store_.get_or_create(t));
  lora_ = lora;
}

void Trainer::disable_lora() {
  if (!lora_.enabled()) return;
  drop_programs();
  erase_adapters();
  lora_ = LoraConfig{};
}

std::vector<uint8_t> Trainer::save_adapter() const {
  check(lora_.enabled(), "no LoRA adapters to save");
  SafeTensors f;
  f.metadata["format"] = kAdapterFormat;
  f.metadata["format_version"] = std::to_string(kAdapterVersion);
  // The base by its weights (matched on load), and by its file when it came from one (for
  // readers that know only that).
  f.metadata["base_weights_sha256"] = weights_sha256(store_, model_);
  if (!base_sha256_.empty()) f.metadata["base_sha256"] = base_sha256_;
  f.metadata["model_config"] = model_.to_json().dump();
  // The base's tokenizer identity (not the tokenizer itself: the base checkpoint holds it).
  f.metadata["tokenizer"] = tokenizer_.id().to_json().dump();
  f.metadata["lora_config"] = lora_to_json(lora_).dump();
  f.metadata["train_config"] = train_.to_json().dump();
  f.metadata["train_state"] = nlohmann::json{
      {"step", state_.step},
      {"tokens_seen", state_.tokens_seen},
      {"elapsed_seconds",
       state_.elapsed_seconds}}.dump();
  f.metadata["loss_history"] = history_to_json(history_);
  f.metadata["created_by"] = kVersionString;
  for (const auto& t : adapter_tensors(model_, lora_)) f.add(t.name, DType::f32, t.shape, store_.find(t.name));
  return encode_safetensors(f);
}

void Trainer::load_adapter(const std::vector<uint8_t>& bytes, const std::string& what) {
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), what);
  AdapterContents c = inspect_adapter(f, what);
  check(c.tokenizer == tokenizer_.id(), what + ": the adapter was trained on a base that reads " +
                                            c.tokenizer.describe() + ", but this base reads " +
                                            tokenizer_.id().describe() + " (its token ids mean other text)");
  check(c.base_model == model_, what + ": the adapter was trained on a base model with config " +
                                    c.base_model.to_json().dump() + ", but this base is " + model_.to_json().dump());
  if (!c.base_weights_sha256.empty()) {
    // Matched by the weights: the same base whether its file holds optimizer state or not.
    const std::string mine = weights_sha256(store_, model_);
    check(c.base_weights_sha256 == mine, what +
                                             ": the adapter was trained on a base with other weights (its base's "
                                             "weights have sha256 " +
                                             c.base_weights_sha256.substr(0, 16) + "..., this base's " +
                                             mine.substr(0, 16) + "...)");
  } else {
    // An adapter that records only its base's file.
    check(!base_sha256_.empty(), what +
                                     ": cannot check the adapter against this base: it records only its base "
                                     "checkpoint file's sha256 and this base was not loaded from a file");
    check(c.base_sha256 == base_sha256_, what +
                                             ": the adapter was trained on a different base checkpoint (its base has "
                                             "sha256 " +
                                             c.base_sha256.substr(0, 16) + "..., this base " +
                                             base_sha256_.substr(0, 16) + "...)");
  }
  drop_programs();
  if (lora_.enabled()) erase_adapters();
  store_.erase_prefix("optim.");
  for (const auto& t : adapter_tensors(model_, c.lora)) {
    const StoredTensor* s = f.find(t.name);
    std::memcpy(store_.get_or_create(t), s->data.data(), s->data.size());
  }
  lora_ = c.lora;
}

void Trainer::merge_lora() {
  check(lora_.enabled(), "no LoRA adapters to merge");
  const double scale = lora_.alpha / lora_.rank;
  const int64_t r = lora_.rank;
  for (const auto& u : lora_updates(model_, lora_)) {
    const float* A = store_.find(u.a);            // [r, in]
    const float* B = store_.find(u.b);            // [out, r]
    float* W = store_.find(u.layer + ".weight");  // [out, in]
    const int64_t out = store_.numel(u.layer + ".bias"), in = store_.numel(u.layer + ".weight") / out;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k) s += double(B[o * r + k]) * double(A[k * in + i]);
        W[o * in + i] = float(double(W[o * in + i]) + scale * s);
      }
  }
  lora_merged_ = nlohmann::json{{"lora_config", lora_to_json(lora_)}, {"base_sha256", base_sha256_}}.dump();
  disable_lora();
  base_sha256_.clear();  // the weights are no longer those of the base file
}

void Trainer::set_sft_data(std::unique_ptr<SftData> data) {
  check(data == nullptr || data->ctx() == model_.ctx, "SFT data was packed for a different context length");
  check(data == nullptr || data->tokenizer() == tokenizer_.id(),
        "SFT data was prepared for " + (data ? data->tokenizer().describe() : std::string()) +
            ", but the model reads " + tokenizer_.id().describe());
  sft_ = std::move(data);
}

SftData& Trainer::sft_data() {
  check(sft_ != nullptr, "no SFT data set");
  return *sft_;
}

}  // namespace ptl
