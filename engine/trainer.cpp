#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/dropout.h"
#include "engine/error.h"
#include "engine/memory.h"

namespace ptl {

double EvalResult::perplexity() const { return std::exp(loss); }
// loss * tokens nats over `bytes` bytes; a byte-level model's ratio is exactly 1.
double EvalResult::bits_per_byte() const {
  return bytes > 0 ? loss / std::log(2.0) * (double(tokens) / bytes) : loss / std::log(2.0);
}

Trainer::Trainer(const ModelConfig& model, const TrainConfig& train)
    : model_(model), tokenizer_(ModelTokenizer::default_for(model.vocab_size)), train_(train) {
  model_.validate();
  train_.validate();
  state_.data_rng = rng_for(train_.seed, "data");
  for (const auto& t : parameter_list(model_)) init_parameter(model_, t, train_.seed, store_.get_or_create(t));
}

std::unique_ptr<Trainer> Trainer::from_checkpoint(const std::vector<uint8_t>& bytes, const std::string& what) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->load_checkpoint(bytes, what);
  return t;
}

void Trainer::load_checkpoint(const std::vector<uint8_t>& bytes, const std::string& what) {
  // Decode and validate everything into locals first; only then swap into this trainer.
  SafeTensors file = decode_safetensors(bytes.data(), bytes.size(), what);
  CheckpointContents c = inspect_checkpoint(file, what);
  cpu::TensorStore store;
  for (const auto& s : file.tensors) {
    TensorInfo info{s.name, s.name.starts_with("optim.") ? TensorKind::optim_state : TensorKind::parameter, DType::f32,
                    s.shape};
    std::memcpy(store.get_or_create(info), s.data.data(), s.data.size());
  }
  const bool same_tokens = c.tokenizer.id() == tokenizer_.id();
  model_ = c.model;
  tokenizer_ = std::move(c.tokenizer);
  train_ = c.train.value_or(TrainConfig{});
  state_ = c.state;
  if (!c.train) state_.data_rng = rng_for(train_.seed, "data");
  history_ = c.history;
  store_ = std::move(store);
  lora_ = LoraConfig{};
  base_sha256_ = sha256_hex(bytes);
  auto merged = file.metadata.find("lora_merged");
  lora_merged_ = merged == file.metadata.end() ? "" : merged->second;
  drop_programs();
  // Data encoded by another tokenizer, or windowed for another context, no longer fits.
  if (corpus_ && (corpus_->ctx() != model_.ctx || !same_tokens)) corpus_.reset();
  if (sft_ && (sft_->ctx() != model_.ctx || !same_tokens)) sft_.reset();
}

std::vector<uint8_t> Trainer::save_checkpoint(bool with_optimizer) const {
  SafeTensors f = with_checkpoint_metadata({}, model_, &tokenizer_);  // format, version, model, tokenizer, created_by
  f.metadata["train_config"] = train_.to_json().dump();
  f.metadata["train_state"] = nlohmann::json{
      {"step", state_.step},
      {"data_rng", state_.data_rng.to_hex()},
      {"tokens_seen", state_.tokens_seen},
      {"elapsed_seconds",
       state_.elapsed_seconds}}.dump();
  // The whole curve, thinned as it grows (training_loop.h).
  f.metadata["loss_history"] = history_to_json(history_);
  if (!lora_merged_.empty()) f.metadata["lora_merged"] = lora_merged_;
  const auto params = parameter_list(model_);
  for (const auto& t : params) f.add(t.name, DType::f32, t.shape, store_.find(t.name));
  if (with_optimizer && store_.find("optim.m." + params[0].name)) {
    for (const char* which : {"optim.m.", "optim.v."})
      for (const auto& t : params) f.add(which + t.name, DType::f32, t.shape, store_.find(which + t.name));
  }
  return encode_safetensors(f);
}

void Trainer::drop_programs() {
  train_exec_.reset();
  generate_exec_.reset();
  inspect_exec_.reset();
  prefill_exec_.reset();
  gen_.reset();  // its KV cache and program are gone
  eval_execs_.clear();
  forward_execs_.clear();
}

void Trainer::set_tokenizer(ModelTokenizer tokenizer) {
  check(tokenizer.vocab_size() == model_.vocab_size, "the tokenizer has " + std::to_string(tokenizer.vocab_size()) +
                                                         " tokens but the model's vocab_size is " +
                                                         std::to_string(model_.vocab_size) + " (they must be equal)");
  if (!(tokenizer.id() == tokenizer_.id())) {
    corpus_.reset();
    sft_.reset();
    gen_.reset();
  }
  tokenizer_ = std::move(tokenizer);
}

std::vector<int32_t> Trainer::encode(std::string_view text) const { return tokenizer_.text().encode(text); }

std::string Trainer::decode(std::span<const int32_t> ids) const { return tokenizer_.text().decode(ids); }

void Trainer::set_corpus(std::string bytes, const std::string& name, double val_fraction) {
  corpus_ = std::make_unique<Corpus>(std::move(bytes), model_.ctx, val_fraction, name, &tokenizer_.text());
}

double Trainer::target_bytes(const Batch& b) const {
  if (!tokenizer_.reads_text()) return 0;
  const Tokenizer& t = tokenizer_.text();
  double n = 0;
  for (size_t i = 0; i < b.targets.size(); ++i) {
    const double w = b.mask.empty() ? 1.0 : double(b.mask[i]);
    if (w == 0) continue;
    // A byte model's token is one byte. (An id outside the vocabulary already failed in the loss.)
    const int32_t id = b.targets[i];
    n += w * (t.is_bytes() ? 1.0 : t.has_token(id) ? double(t.token_bytes(id).size()) : 0.0);
  }
  return n;
}

const Corpus& Trainer::corpus() const {
  check(corpus_ != nullptr, "no corpus set");
  return *corpus_;
}

cpu::Executor& Trainer::train_executor(int seq) {
  if (seq != 0 && seq != (train_seq_ ? train_seq_ : model_.ctx)) {
    train_exec_.reset();
    train_seq_ = seq == model_.ctx ? 0 : seq;
  }
  if (!train_exec_) {
    BuildOptions opt;
    opt.batch = train_.batch;
    opt.seq = train_seq_;
    opt.loss_mask = train_masked_;
    opt.lora = lora_;
    // Refused before the arena is allocated, naming the bytes needed and the limit (the weights,
    // and the moments of a resumed run, are already held).
    check_training_fits(model_, opt, train_, int64_t(store_.bytes()));
    train_exec_ = std::make_unique<cpu::Executor>(build_train_program(model_, opt, train_), store_);
  }
  return *train_exec_;
}

cpu::Executor& Trainer::eval_executor(int batch, int seq, bool masked) {
  auto& e = eval_execs_[{batch, seq, masked}];
  if (!e) {
    BuildOptions opt;
    opt.batch = batch;
    opt.seq = seq;
    opt.loss_mask = masked;
    opt.lora = lora_;
    e = std::make_unique<cpu::Executor>(build_eval_program(model_, opt), store_);
  }
  return *e;
}

Batch Trainer::next_train_batch() {
  if (sft_) return sft_->sample_train(state_.data_rng, train_.batch);
  check(corpus_ != nullptr, "no corpus set: call set_corpus before training");
  return corpus_->sample_train(state_.data_rng, train_.batch);
}

StepResult Trainer::train_step() { return train_step(next_train_batch()); }

// A batch this run can train: its rows, 1 to ctx tokens each, and tokens that fill that shape.
void Trainer::check_batch(const Batch& batch) const {
  check(batch.batch == train_.batch && batch.seq >= 1 && batch.seq <= model_.ctx,
        "batch shape [" + std::to_string(batch.batch) + ", " + std::to_string(batch.seq) +
            "]: the run trains batches of " + std::to_string(train_.batch) + " rows of 1 to " +
            std::to_string(model_.ctx) + " tokens");
  check(batch.inputs.size() == size_t(batch.batch) * batch.seq && batch.targets.size() == batch.inputs.size(),
        "batch tokens do not match its shape");
}

int64_t Trainer::count_external_step(const Batch& batch) {
  check_batch(batch);
  state_.tokens_seen += int64_t(batch.batch) * batch.seq;
  return ++state_.step;
}

std::vector<TensorInfo> Trainer::state_tensors() const {
  std::vector<TensorInfo> out = parameter_list(model_, lora_);
  const std::vector<TensorInfo> trainable = lora_.enabled() ? adapter_tensors(model_, lora_) : parameter_list(model_);
  for (const char* which : {"optim.m.", "optim.v."})
    for (const auto& t : trainable)
      out.push_back(TensorInfo{which + t.name, TensorKind::optim_state, DType::f32, t.shape});
  return out;
}

namespace {
const TensorInfo& state_tensor(const std::vector<TensorInfo>& all, const std::string& name) {
  for (const auto& t : all)
    if (t.name == name) return t;
  fail("'" + name + "' is not a tensor of this model's state (its parameters, adapters and their AdamW moments)");
}
}  // namespace

const float* Trainer::read_tensor(const std::string& name) const {
  state_tensor(state_tensors(), name);
  const float* p = store_.find(name);
  check(p != nullptr, "tensor '" + name + "' is not present yet (AdamW moments appear with the first training step)");
  return p;
}

void Trainer::write_tensor(const std::string& name, const void* data, size_t bytes) {
  const auto all = state_tensors();
  const TensorInfo& t = state_tensor(all, name);
  check(bytes == size_t(t.bytes()),
        "tensor '" + name + "' holds " + std::to_string(t.bytes()) + " bytes, not " + std::to_string(bytes));
  check(data != nullptr || bytes == 0, "null data pointer");
  std::memcpy(store_.get_or_create(t), data, bytes);
  weights_changed();
}

void Trainer::weights_changed() {
  // The KV cache of a generation in progress holds keys and values of the old weights: the next
  // token reads the whole sequence again (Trainer::next_token), so it continues under the new ones.
  if (gen_) gen_->cached = 0;
}

void Trainer::set_step(int64_t step) {
  check(step >= 0, "step must not be negative");
  state_.step = step;
}

StepResult Trainer::train_step(const Batch& batch) {
  check_batch(batch);
  check(batch.mask.empty() || batch.mask.size() == batch.inputs.size(), "batch mask does not match its tokens");
  auto t0 = std::chrono::steady_clock::now();
  if (!batch.mask.empty() && !train_masked_) {
    // The first masked batch: rebuild the training program with a loss_mask input (it stays;
    // an unmasked batch then runs with a mask of ones, which gives bitwise the same numbers).
    train_masked_ = true;
    train_exec_.reset();
  }
  // Through the executor interface only: inputs in, run, scalars out.
  Executor& ex = train_executor(batch.seq);
  ex.write("tokens", batch.inputs.data(), batch.inputs.size() * 4);
  ex.write("targets", batch.targets.data(), batch.targets.size() * 4);
  if (train_masked_) {
    if (batch.mask.empty())
      ex.write("loss_mask", std::vector<float>(batch.inputs.size(), 1.0f).data(), batch.inputs.size() * 4);
    else
      ex.write("loss_mask", batch.mask.data(), batch.mask.size() * 4);
  }
  const double lr = train_.lr_at(state_.step);
  const float hp[2] = {float(lr), float(state_.step + 1)};
  ex.write("optim.hparams", hp, sizeof hp);
  if (ex.program().find("dropout.seed") >= 0) {
    // The masks of this step: a function of the run's seed and the step alone, so a resumed run
    // draws the ones the uninterrupted run would have.
    const uint32_t seed[2] = {dropout::key_of(train_.seed), uint32_t(state_.step + 1)};
    ex.write("dropout.seed", seed, sizeof seed);
  }
  ex.run();
  weights_changed();
  StepResult r;
  r.loss = ex.read_f32("loss");
  r.grad_norm = ex.read_f32("grad_norm");
  r.lr = lr;
  r.tokens = int64_t(batch.batch) * batch.seq;
  r.step = ++state_.step;
  state_.tokens_seen += r.tokens;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

const float* Trainer::gradient(const std::string& name) { return train_executor().f32("grad." + name); }

double Trainer::batch_loss(const Batch& batch) {
  check(batch.mask.empty() || batch.mask.size() == batch.inputs.size(), "batch mask does not match its tokens");
  cpu::Executor& ex = eval_executor(batch.batch, batch.seq, !batch.mask.empty());
  std::memcpy(ex.i32("tokens"), batch.inputs.data(), batch.inputs.size() * 4);
  std::memcpy(ex.i32("targets"), batch.targets.data(), batch.targets.size() * 4);
  if (!batch.mask.empty()) std::memcpy(ex.f32("loss_mask"), batch.mask.data(), batch.mask.size() * 4);
  ex.run();
  return ex.f32("loss")[0];
}

const float* Trainer::logits(const Batch& batch) {
  check(batch.inputs.size() == size_t(batch.batch) * size_t(batch.seq), "batch inputs do not match its shape");
  auto& e = forward_execs_[{batch.batch, batch.seq}];
  if (!e) {
    BuildOptions opt;
    opt.batch = batch.batch;
    opt.seq = batch.seq;
    opt.lora = lora_;
    e = std::make_unique<cpu::Executor>(build_forward_program(model_, opt), store_);
  }
  std::memcpy(e->i32("tokens"), batch.inputs.data(), batch.inputs.size() * 4);
  e->run();
  return e->f32("logits");
}

EvalResult Trainer::validation_loss() {
  if (sft_) {
    check(sft_->has_val(), "no validation examples to evaluate");
    return evaluate_batches(sft_->val_batches(train_.batch));
  }
  check(corpus_ != nullptr && corpus_->has_val(), "no validation split to evaluate");
  const auto batches = corpus_->val_batches(train_.batch, train_.eval_batches);
  EvalResult r;
  double sum = 0;
  for (const auto& b : batches) {
    sum += batch_loss(b);
    r.bytes += target_bytes(b);
  }
  r.loss = sum / double(batches.size());
  r.tokens = int64_t(batches.size()) * train_.batch * model_.ctx;
  return r;
}

EvalResult Trainer::evaluate_text(const std::string& bytes) {
  const Tokenizer& t = tokenizer_.text();
  EvalResult r;
  double sum = 0;  // loss summed over tokens
  for (const auto& b : t.is_bytes() ? text_windows(bytes, model_.ctx) : text_windows(t.encode(bytes), model_.ctx)) {
    sum += batch_loss(b) * b.seq;
    r.tokens += b.seq;
    r.bytes += target_bytes(b);
  }
  r.loss = sum / double(r.tokens);
  return r;
}

EvalResult Trainer::evaluate_batches(const std::vector<Batch>& batches) {
  check(!batches.empty(), "nothing to evaluate");
  double sum = 0, weight = 0, bytes = 0;
  for (const auto& b : batches) {
    double w = double(b.batch) * b.seq;
    if (!b.mask.empty()) {
      w = 0;
      for (float m : b.mask) w += m;
    }
    if (w == 0) continue;
    sum += batch_loss(b) * w;
    weight += w;
    bytes += target_bytes(b);
  }
  check(weight > 0, "nothing to evaluate: every position is masked out");
  EvalResult r;
  r.bytes = bytes;
  r.loss = sum / weight;
  r.tokens = int64_t(weight);
  return r;
}

}  // namespace ptl
