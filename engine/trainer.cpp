#include "engine/trainer.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/error.h"

namespace ptl {

double EvalResult::perplexity() const { return std::exp(loss); }
double EvalResult::bits_per_byte() const { return loss / std::log(2.0); }

Trainer::Trainer(const ModelConfig& model, const TrainConfig& train) : model_(model), train_(train) {
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
  model_ = c.model;
  train_ = c.train.value_or(TrainConfig{});
  state_ = c.state;
  if (!c.train) state_.data_rng = rng_for(train_.seed, "data");
  history_ = c.history;
  store_ = std::move(store);
  drop_programs();
  if (corpus_ && corpus_->ctx() != model_.ctx) corpus_.reset();
}

std::vector<uint8_t> Trainer::save_checkpoint(bool with_optimizer) const {
  SafeTensors f;
  f.metadata["format"] = "tinygpt";
  f.metadata["format_version"] = std::to_string(kCheckpointVersion);
  f.metadata["model_config"] = model_.to_json().dump();
  f.metadata["tokenizer"] = R"({"type":"byte","vocab_size":256})";
  f.metadata["train_config"] = train_.to_json().dump();
  f.metadata["train_state"] = nlohmann::json{{"step", state_.step},
                                             {"data_rng", state_.data_rng.to_hex()},
                                             {"tokens_seen", state_.tokens_seen},
                                             {"elapsed_seconds", state_.elapsed_seconds}}.dump();
  // A short history: the last 200 points.
  std::vector<LossPoint> tail(history_.end() - std::min<size_t>(history_.size(), 200), history_.end());
  f.metadata["loss_history"] = history_to_json(tail);
  f.metadata["created_by"] = kVersionString;
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
  eval_execs_.clear();
  last_eval_ = nullptr;
}

void Trainer::set_corpus(std::string bytes, const std::string& name, double val_fraction) {
  corpus_ = std::make_unique<Corpus>(std::move(bytes), model_.ctx, val_fraction, name);
}

const Corpus& Trainer::corpus() const {
  check(corpus_ != nullptr, "no corpus set");
  return *corpus_;
}

cpu::Executor& Trainer::train_executor() {
  if (!train_exec_) {
    BuildOptions opt;
    opt.batch = train_.batch;
    train_exec_ = std::make_unique<cpu::Executor>(build_train_program(model_, opt, train_), store_);
  }
  return *train_exec_;
}

cpu::Executor& Trainer::eval_executor(int batch, int seq) {
  auto& e = eval_execs_[{batch, seq}];
  if (!e) {
    BuildOptions opt;
    opt.batch = batch;
    opt.seq = seq;
    e = std::make_unique<cpu::Executor>(build_eval_program(model_, opt), store_);
  }
  return *e;
}

StepResult Trainer::train_step() {
  check(corpus_ != nullptr, "no corpus set: call set_corpus before training");
  Batch b = corpus_->sample_train(state_.data_rng, train_.batch);
  return train_step(b);
}

StepResult Trainer::train_step(const Batch& batch) {
  check(batch.batch == train_.batch && batch.seq == model_.ctx,
        "batch shape [" + std::to_string(batch.batch) + ", " + std::to_string(batch.seq) + "] does not match the training program");
  auto t0 = std::chrono::steady_clock::now();
  cpu::Executor& ex = train_executor();
  std::memcpy(ex.i32("tokens"), batch.inputs.data(), batch.inputs.size() * 4);
  std::memcpy(ex.i32("targets"), batch.targets.data(), batch.targets.size() * 4);
  const double lr = train_.lr_at(state_.step);
  float* hp = ex.f32("optim.hparams");
  hp[0] = float(lr);
  hp[1] = float(state_.step + 1);
  ex.run();
  StepResult r;
  r.loss = ex.f32("loss")[0];
  r.grad_norm = ex.f32("grad_norm")[0];
  r.lr = lr;
  r.tokens = int64_t(batch.batch) * batch.seq;
  r.step = ++state_.step;
  state_.tokens_seen += r.tokens;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

const float* Trainer::gradient(const std::string& name) { return train_executor().f32("grad." + name); }

double Trainer::batch_loss(const Batch& batch) {
  cpu::Executor& ex = eval_executor(batch.batch, batch.seq);
  std::memcpy(ex.i32("tokens"), batch.inputs.data(), batch.inputs.size() * 4);
  std::memcpy(ex.i32("targets"), batch.targets.data(), batch.targets.size() * 4);
  ex.run();
  last_eval_ = &ex;
  return ex.f32("loss")[0];
}

const float* Trainer::logits() {
  check(last_eval_ != nullptr, "no logits yet: evaluate a batch first");
  return last_eval_->f32("logits");
}

EvalResult Trainer::validation_loss() {
  check(corpus_ != nullptr && corpus_->has_val(), "no validation split to evaluate");
  const auto batches = corpus_->val_batches(train_.batch, train_.eval_batches);
  EvalResult r;
  double sum = 0;
  for (const auto& b : batches) sum += batch_loss(b);
  r.loss = sum / double(batches.size());
  r.tokens = int64_t(batches.size()) * train_.batch * model_.ctx;
  return r;
}

EvalResult Trainer::evaluate_text(const std::string& bytes) {
  EvalResult r;
  double sum = 0;  // loss summed over tokens
  for (const auto& b : text_windows(bytes, model_.ctx)) {
    sum += batch_loss(b) * b.seq;
    r.tokens += b.seq;
  }
  r.loss = sum / double(r.tokens);
  return r;
}

std::vector<int32_t> Trainer::generate(const std::vector<int32_t>& prompt, int max_tokens, const SamplingOptions& opt,
                                       const std::function<bool(int32_t)>& on_token) {
  check(max_tokens >= 0, "max tokens must not be negative");
  for (int32_t t : prompt) check(t >= 0 && t < model_.vocab_size, "prompt token outside the vocabulary");
  if (!generate_exec_) generate_exec_ = std::make_unique<cpu::Executor>(build_generate_program(model_), store_);
  cpu::Executor& dec = *generate_exec_;
  Sampler sampler(opt);
  const int V = model_.vocab_size, ctx = model_.ctx;
  // An empty prompt starts from a newline, as if a new paragraph began.
  std::vector<int32_t> seq = prompt.empty() ? std::vector<int32_t>{'\n'} : prompt;
  std::vector<int32_t> out;
  int cached = 0;  // tokens of seq whose keys and values are in the KV cache
  std::vector<float> window_logits(V);
  for (int i = 0; i < max_tokens; ++i) {
    const float* logits;
    const int L = int(seq.size());
    if (L <= ctx) {
      // Within the context, the KV cache is exact: feed only the tokens it has not seen.
      for (; cached < L; ++cached) {
        dec.i32("tokens")[0] = seq[cached];
        dec.i32("pos0")[0] = cached;
        dec.run();
      }
      logits = dec.f32("logits");
    } else {
      // Past the context the model sees the last ctx tokens at positions 0..ctx-1 (nanoGPT's
      // crop), so every position shifts and the window is recomputed.
      Batch b{1, ctx, std::vector<int32_t>(seq.end() - ctx, seq.end()), std::vector<int32_t>(ctx, 0)};
      batch_loss(b);
      std::memcpy(window_logits.data(), this->logits() + size_t(ctx - 1) * V, V * sizeof(float));
      logits = window_logits.data();
    }
    const int32_t next = sampler.sample(logits, V);
    seq.push_back(next);
    out.push_back(next);
    if (on_token && !on_token(next)) break;
  }
  return out;
}

}  // namespace ptl
