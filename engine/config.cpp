#include "engine/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/dropout.h"
#include "engine/error.h"

namespace ptl {

int64_t json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  auto bad = [&]() -> int64_t {
    fail(what + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
         v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  };
  int64_t i = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return bad();
    i = int64_t(u);
  } else if (v.is_number_integer()) {
    i = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // [-2^63, 2^63): the doubles that convert to int64 without undefined behaviour.
    if (!(d == std::floor(d) && d >= -0x1p63 && d < 0x1p63)) return bad();
    i = int64_t(d);
  } else {
    return bad();
  }
  return i < lo || i > hi ? bad() : i;
}

uint64_t json_u64(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    check(d == std::floor(d) && d >= 0 && d < 0x1p64, what + " must be an integer from 0 to 2^64 - 1, got " + v.dump());
    return uint64_t(d);
  }
  return uint64_t(json_int(v, 0, std::numeric_limits<int64_t>::max(), what));
}

int64_t ModelConfig::param_count() const {
  const int64_t V = vocab_size, d = d_model, T = ctx, L = n_layers;
  return V * d + T * d + 2 * d + L * (12 * d * d + 13 * d);
}

void ModelConfig::validate() const {
  check(vocab_size >= 1 && vocab_size <= kMaxVocab,
        "model config: vocab_size must be 1.." + std::to_string(kMaxVocab) + ", got " + std::to_string(vocab_size));
  check(n_layers >= 1 && n_layers <= 256, "model config: n_layers must be 1..256, got " + std::to_string(n_layers));
  check(d_model >= 1 && d_model <= 16384, "model config: d_model must be 1..16384, got " + std::to_string(d_model));
  check(n_heads >= 1, "model config: n_heads must be at least 1, got " + std::to_string(n_heads));
  check(d_model % n_heads == 0,
        "model config: d_model " + std::to_string(d_model) + " is not divisible by n_heads " + std::to_string(n_heads));
  check(ctx >= 1 && ctx <= 65536, "model config: ctx must be 1..65536, got " + std::to_string(ctx));
  check(gelu == "erf" || gelu == "tanh", "model config: gelu must be \"erf\" or \"tanh\", got \"" + gelu + "\"");
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = {
      {"vocab_size", vocab_size}, {"n_layers", n_layers}, {"d_model", d_model}, {"n_heads", n_heads}, {"ctx", ctx}};
  if (gelu != "erf") j["gelu"] = gelu;  // absent means erf: older files keep their bytes
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
  check(j.is_object(), "model config: expected a JSON object");
  ModelConfig c;
  auto get = [&](const char* key, int& out) {
    check(j.contains(key) && j[key].is_number_integer(),
          std::string("model config: missing or non-integer '") + key + "'");
    out = int(json_int(j[key], std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                       std::string("model config: '") + key + "'"));
  };
  get("vocab_size", c.vocab_size);
  get("n_layers", c.n_layers);
  get("d_model", c.d_model);
  get("n_heads", c.n_heads);
  get("ctx", c.ctx);
  if (j.contains("gelu")) {
    check(j["gelu"].is_string(), "model config: 'gelu' must be a string (\"erf\" or \"tanh\")");
    c.gelu = j["gelu"].get<std::string>();
  }
  c.validate();
  return c;
}

const std::vector<Preset>& presets() {
  // docs/model.md, "Presets": layers, d, heads, ctx, batch, default learning rate.
  static const std::vector<Preset> table = {
      {"tiny", {256, 2, 48, 3, 32}, 16, 2e-3},         {"small", {256, 3, 96, 3, 64}, 16, 2e-3},
      {"medium", {256, 4, 128, 4, 96}, 16, 2e-3},      {"large", {256, 6, 192, 6, 128}, 12, 1.5e-3},
      {"xl", {256, 8, 256, 8, 128}, 8, 1e-3},          {"huge", {256, 12, 256, 8, 256}, 8, 1e-3},
      {"massive", {256, 14, 384, 12, 256}, 4, 1e-3},   {"mega", {256, 14, 384, 12, 512}, 2, 1e-3},
      {"behemoth", {256, 24, 1280, 20, 512}, 1, 3e-4},
  };
  return table;
}

const Preset& find_preset(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string names;
  for (const auto& p : presets()) {
    if (p.name == lower) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("unknown preset '" + name + "' (choose one of: " + names + ")");
}

int64_t TrainConfig::warmup_steps() const {
  if (warmup >= 0) return warmup;
  return std::min<int64_t>(100, steps / 10);
}

double TrainConfig::lr_at(int64_t step) const {
  if (schedule == "constant") return lr;
  // Linear warm-up from lr/W to lr, then cosine decay to min_lr_frac * lr at the last step.
  const int64_t W = warmup_steps();
  const double lr_min = min_lr_frac * lr;
  if (decay_from_step >= 0 && step >= decay_from_step) {
    const double progress =
        std::min(1.0, double(step - decay_from_step) / double(std::max<int64_t>(1, steps - decay_from_step)));
    return lr_min + 0.5 * (decay_from_lr - lr_min) * (1.0 + std::cos(M_PI * progress));
  }
  if (step < W) return lr * double(step + 1) / double(W);
  const double progress = std::min(1.0, double(step - W) / double(std::max<int64_t>(1, steps - W)));
  return lr_min + 0.5 * (lr - lr_min) * (1.0 + std::cos(M_PI * progress));
}

TrainConfig continue_schedule(const TrainConfig& before, TrainConfig after, int64_t step) {
  const bool same_curve = after.schedule == "cosine" && before.schedule == "cosine" && after.lr == before.lr &&
                          after.min_lr_frac == before.min_lr_frac &&
                          (after.warmup == before.warmup || after.warmup < 0);
  if (!same_curve) {
    // A new rate or schedule was asked for: it applies as given.
    after.decay_from_step = -1;
    after.decay_from_lr = 0;
    return after;
  }
  if (after.steps == before.steps) {
    after.warmup = before.warmup;
    after.decay_from_step = before.decay_from_step;
    after.decay_from_lr = before.decay_from_lr;
    return after;
  }
  // The automatic warm-up depends on `steps`: the run keeps the one it had.
  after.warmup = before.warmup_steps();
  if (step < after.warmup) {
    // Still warming up: the warm-up ends at the peak as before, the cosine then spans the new length.
    after.decay_from_step = -1;
    after.decay_from_lr = 0;
    return after;
  }
  after.decay_from_step = step;
  after.decay_from_lr = before.lr_at(step);
  return after;
}

void TrainConfig::validate() const {
  check(batch >= 1, "batch must be at least 1, got " + std::to_string(batch));
  check(steps >= 1, "steps must be at least 1, got " + std::to_string(steps));
  check(std::isfinite(lr) && lr > 0, "learning rate must be a positive number");
  check(schedule == "cosine" || schedule == "constant", "unknown schedule '" + schedule + "' (cosine or constant)");
  check(grad_clip > 0, "grad_clip must be positive");
  check(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "AdamW's beta1 and beta2 must be in [0, 1)");
  check(std::isfinite(eps) && eps > 0, "AdamW's eps must be a positive number");
  dropout::check_rate(dropout, "dropout");
  check(eval_every >= 0 && sample_every >= 0, "eval_every and sample_every must not be negative");
  check(eval_batches >= 1, "eval_batches must be at least 1");
  check(decay_from_step < 0 || (std::isfinite(decay_from_lr) && decay_from_lr > 0),
        "decay_from_lr must be a positive number when decay_from_step is set");
}

nlohmann::json TrainConfig::to_json() const {
  return {{"batch", batch},
          {"steps", steps},
          {"lr", lr},
          {"schedule", schedule},
          {"warmup", warmup},
          {"min_lr_frac", min_lr_frac},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"grad_clip", grad_clip},
          {"dropout", dropout},
          {"seed", seed},
          {"eval_every", eval_every},
          {"eval_batches", eval_batches},
          {"sample_every", sample_every},
          {"data_path", data_path},
          {"decay_from_step", decay_from_step},
          {"decay_from_lr", decay_from_lr}};
}

TrainConfig TrainConfig::from_json(const nlohmann::json& j) {
  check(j.is_object(), "train config: expected a JSON object");
  TrainConfig c;
  // Missing keys keep their defaults so that older files stay loadable.
  auto opt = [&](const char* key, auto& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    using T = std::decay_t<decltype(out)>;
    const std::string what = std::string("train config: '") + key + "'";
    if constexpr (std::is_same_v<T, uint64_t>)
      out = json_u64(j[key], what);
    else if constexpr (std::is_integral_v<T>)
      out = T(json_int(j[key], std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), what));
    else
      out = j[key].get<T>();
  };
  try {
    opt("batch", c.batch);
    opt("steps", c.steps);
    opt("lr", c.lr);
    opt("schedule", c.schedule);
    opt("warmup", c.warmup);
    opt("min_lr_frac", c.min_lr_frac);
    opt("beta1", c.beta1);
    opt("beta2", c.beta2);
    opt("eps", c.eps);
    opt("weight_decay", c.weight_decay);
    opt("grad_clip", c.grad_clip);
    opt("dropout", c.dropout);  // absent in older files: no dropout
    opt("seed", c.seed);
    opt("eval_every", c.eval_every);
    opt("eval_batches", c.eval_batches);
    opt("sample_every", c.sample_every);
    opt("data_path", c.data_path);
    opt("decay_from_step", c.decay_from_step);
    opt("decay_from_lr", c.decay_from_lr);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("train config: ") + e.what());
  }
  c.validate();
  return c;
}

}  // namespace ptl
