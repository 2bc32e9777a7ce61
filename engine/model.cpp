// The model, written once. Read build_forward() top to bottom: it is the whole GPT.
#include "engine/model.h"

#include <cmath>

#include "engine/autodiff.h"
#include "engine/dropout.h"
#include "engine/error.h"
#include "engine/rng.h"

namespace ptl {

namespace {

const char* kProjections[] = {"q", "k", "v", "o", "fc_in", "fc_out", "qkv"};

// Short LoRA target name ("q", "fc_in") of a projection's parameter prefix.
std::string projection_of(const std::string& prefix) {
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
    if (prefix.ends_with(std::string(".") + p)) return std::string(1, p[0]);
  if (prefix.ends_with(".fc_in")) return "fc_in";
  if (prefix.ends_with(".fc_out")) return "fc_out";
  return "";
}

struct Builder {
  Program& p;
  const ModelConfig& cfg;
  const BuildOptions& opt;
  bool decode = false;  // generation: one token, attention through the KV cache
  int pos0 = kNoTensor;
  // Dropout rates in effect (0 outside train programs) and the seed input, made on first use.
  double drop = 0.0, lora_drop = 0.0;
  int seed = kNoTensor;

  int dropout_seed() {
    if (seed == kNoTensor) seed = input("dropout.seed", {2}, DType::i32);
    return seed;
  }
  // y = x * scale where kept, 0 elsewhere; the stream name is also the output's name.
  int dropout(int x, double rate, const std::string& stream) {
    if (rate <= 0.0) return x;
    int y = act(stream, p.tensor(x).shape);
    p.add_op(OpKind::dropout, {x, dropout_seed()}, {y}, dropout::attrs(rate, stream));
    return y;
  }

  int param(const std::string& name) { return p.id(name); }
  int act(const std::string& name, std::vector<int64_t> shape) {
    return p.add_tensor({name, TensorKind::activation, DType::f32, std::move(shape)});
  }
  int input(const std::string& name, std::vector<int64_t> shape, DType dtype) {
    return p.add_tensor({name, TensorKind::input, dtype, std::move(shape)});
  }

  // y = x W^T + b, plus the LoRA path (alpha / r) (x A^T) B^T when this projection is a target.
  int linear(int x, const std::string& prefix, int64_t out_features, bool bias = true) {
    auto shape = p.tensor(x).shape;
    shape.back() = out_features;
    int y = act(prefix + ".out", shape);
    p.add_op(OpKind::linear, {x, param(prefix + ".weight"), bias ? param(prefix + ".bias") : kNoTensor}, {y});
    if (!opt.lora.enabled() || !opt.lora.targets.count(projection_of(prefix))) return y;
    return lora_add(y, lora_hidden(x, prefix), prefix + ".lora_B", prefix);
  }

  // h = dropout(x) A^T [.., r], the adapter's first product (the base path sees x undropped).
  int lora_hidden(int x, const std::string& prefix) {
    auto h_shape = p.tensor(x).shape;
    h_shape.back() = opt.lora.rank;
    int h = act(prefix + ".lora_h", h_shape);
    const int xa = dropout(x, lora_drop, prefix + ".lora_drop");
    p.add_op(OpKind::linear, {xa, param(prefix + ".lora_A"), kNoTensor}, {h});
    return h;
  }

  // y + (alpha / r) h B^T.
  int lora_add(int y, int h, const std::string& b_name, const std::string& prefix) {
    const std::vector<int64_t> shape = p.tensor(y).shape;  // a copy: act() may move the tensors
    int z = act(prefix + ".lora_z", shape);
    p.add_op(OpKind::linear, {h, param(b_name), kNoTensor}, {z});
    int sum = act(prefix + ".lora_out", shape);
    p.add_op(OpKind::add, {y, z}, {sum}, {{"alpha", opt.lora.alpha / opt.lora.rank}});
    return sum;
  }

  int layernorm(int x, const std::string& prefix) {
    const auto& shape = p.tensor(x).shape;
    std::vector<int64_t> rows(shape.begin(), shape.end() - 1);
    int y = act(prefix + ".out", shape);
    int mean = act(prefix + ".mean", rows), rstd = act(prefix + ".rstd", rows);
    p.add_op(OpKind::layernorm, {x, param(prefix + ".weight"), param(prefix + ".bias")}, {y, mean, rstd},
             {{"eps", 1e-5}});
    return y;
  }

  int add(int a, int b, const std::string& name) {
    int y = act(name, p.tensor(a).shape);
    p.add_op(OpKind::add, {a, b}, {y}, {{"alpha", 1.0}});
    return y;
  }

  // Causal self-attention: the softmax of q k^T / sqrt(head_dim) over earlier positions, times v.
  int attention(int x, const std::string& pre, int layer) {
    const int64_t C = cfg.d_model;
    int q = linear(x, pre + "q_proj", C), k = linear(x, pre + "k_proj", C), v = linear(x, pre + "v_proj", C);
    if (opt.lora.enabled() && opt.lora.targets.count("qkv")) {
      // GPT-2's fused c_attn adapter: one A over the shared input, one B [3C, r] whose row blocks
      // (stored as three tensors, q then k then v) update the three projections. Its product
      // with h is the [.., 3C] update, split.
      const std::string f = pre + "qkv";
      const int h = lora_hidden(x, f);
      q = lora_add(q, h, f + ".q.lora_B", f + ".q");
      k = lora_add(k, h, f + ".k.lora_B", f + ".k");
      v = lora_add(v, h, f + ".v.lora_B", f + ".v");
    }
    // [B, T, C], copied: adding a tensor may move the program's tensors (a reference would dangle).
    const std::vector<int64_t> shape = p.tensor(q).shape;
    int y = act(pre + "y", shape);
    if (decode) {
      // Generation: append this token's k, v to the cache, attend over everything so far.
      auto cache = [&](const char* which) {
        return p.add_tensor(
            {std::string("cache.") + which + "." + std::to_string(layer), TensorKind::state, DType::f32, {cfg.ctx, C}});
      };
      int kc = cache("k"), vc = cache("v");
      p.add_op(OpKind::kv_cache_write, {k, v, pos0}, {kc, vc});
      p.add_op(OpKind::attention_cached, {q, kc, vc, pos0}, {y}, {{"heads", cfg.n_heads}});
    } else {
      int lse = act(pre + "lse", {shape[0], cfg.n_heads, shape[1]});
      if (drop > 0.0) {
        // Dropout on the probabilities, inside the fused op (its backward regenerates the mask).
        auto attrs = dropout::attrs(drop, pre + "probs.drop");
        attrs["heads"] = cfg.n_heads;
        p.add_op(OpKind::attention, {q, k, v, dropout_seed()}, {y, lse}, attrs);
      } else {
        p.add_op(OpKind::attention, {q, k, v}, {y, lse}, {{"heads", cfg.n_heads}});
      }
      if (opt.attention_probs) {
        // The same q and k (LoRA included) as the attention op: the maps are what it applied.
        int probs = act(pre + "probs", {shape[0], cfg.n_heads, shape[1], shape[1]});
        p.add_op(OpKind::attention_probs, {q, k}, {probs}, {{"heads", cfg.n_heads}});
      }
    }
    return dropout(linear(y, pre + "o_proj", C), drop, pre + "drop");
  }

  int mlp(int x, const std::string& pre) {
    int u = linear(x, pre + "fc_in", 4 * int64_t(cfg.d_model));
    int g = act(pre + "gelu", p.tensor(u).shape);
    // GPT-2's models use the tanh approximation; the attribute is absent for the exact form, so
    // the programs of models without the setting stay what they were.
    std::map<std::string, double> attrs;
    if (cfg.gelu == "tanh") attrs["tanh"] = 1.0;
    p.add_op(OpKind::gelu, {u}, {g}, attrs);
    return dropout(linear(g, pre + "fc_out", cfg.d_model), drop, pre + "drop");
  }

  // Pre-LayerNorm transformer block: x + attn(ln1(x)), then + mlp(ln2(x)).
  int block(int x, int i) {
    const std::string pre = "blocks." + std::to_string(i) + ".";
    x = add(x, attention(layernorm(x, pre + "ln1"), pre + "attn.", i), pre + "resid_attn");
    x = add(x, mlp(layernorm(x, pre + "ln2"), pre + "mlp."), pre + "resid_mlp");
    return x;
  }
};

void declare_parameters(Program& p, const ModelConfig& cfg, const LoraConfig& lora) {
  for (auto& t : parameter_list(cfg, lora)) p.add_tensor(t);
}

}  // namespace

std::vector<TensorInfo> parameter_list(const ModelConfig& cfg, const LoraConfig& lora) {
  const int64_t V = cfg.vocab_size, C = cfg.d_model, T = cfg.ctx, F = 4 * int64_t(cfg.d_model);
  std::vector<TensorInfo> list;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    list.push_back({std::move(name), TensorKind::parameter, DType::f32, std::move(shape), !lora.enabled()});
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    add(prefix + ".weight", {out, in});
    add(prefix + ".bias", {out});
    if (lora.enabled() && lora.targets.count(projection_of(prefix))) {
      check(lora.rank <= std::min(in, out), "LoRA rank " + std::to_string(lora.rank) + " is larger than the layer " +
                                                prefix + " [" + std::to_string(out) + ", " + std::to_string(in) + "]");
      list.push_back({prefix + ".lora_A", TensorKind::parameter, DType::f32, {lora.rank, in}, true});
      list.push_back({prefix + ".lora_B", TensorKind::parameter, DType::f32, {out, lora.rank}, true});
    }
  };
  add("tok_emb.weight", {V, C});
  add("pos_emb.weight", {T, C});
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string pre = "blocks." + std::to_string(i) + ".";
    add(pre + "ln1.weight", {C});
    add(pre + "ln1.bias", {C});
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) linear(pre + "attn." + proj, C, C);
    if (lora.enabled() && lora.targets.count("qkv")) {
      // One adapter over q, k and v together (GPT-2's c_attn [C, 3C]): A [r, C], and B [3C, r]
      // as its three row blocks, q's, k's, v's [C, r] (model.cpp's Builder::attention).
      const std::string f = pre + "attn.qkv";
      check(lora.rank <= C, "LoRA rank " + std::to_string(lora.rank) + " is larger than the layer " + f + " [" +
                                std::to_string(3 * C) + ", " + std::to_string(C) + "]");
      list.push_back({f + ".lora_A", TensorKind::parameter, DType::f32, {lora.rank, C}, true});
      for (const char* n : {".q", ".k", ".v"})
        list.push_back({f + n + ".lora_B", TensorKind::parameter, DType::f32, {C, lora.rank}, true});
    }
    linear(pre + "attn.o_proj", C, C);
    add(pre + "ln2.weight", {C});
    add(pre + "ln2.bias", {C});
    linear(pre + "mlp.fc_in", F, C);
    linear(pre + "mlp.fc_out", C, F);
  }
  add("ln_f.weight", {C});
  add("ln_f.bias", {C});
  for (const auto& t : lora.targets) {
    bool known = false;
    for (const char* p : kProjections) known |= (t == p);
    check(known, "unknown LoRA target '" + t + "' (choose from q, k, v, o, fc_in, fc_out, qkv)");
  }
  return list;
}

void init_parameter(const ModelConfig& cfg, const TensorInfo& t, uint64_t seed, float* out) {
  const int64_t n = t.numel();
  const std::string& name = t.name;
  auto fill = [&](float value) { std::fill(out, out + n, value); };
  if (name.ends_with(".lora_B") || name.ends_with(".bias")) return fill(0.0f);
  if (name.ends_with("ln1.weight") || name.ends_with("ln2.weight") || name == "ln_f.weight") return fill(1.0f);
  Rng rng = rng_for(seed, name);
  if (name.ends_with(".lora_A")) {
    // Kaiming-uniform with a = sqrt(5), as nn.Linear: bound = 1 / sqrt(fan_in).
    const double bound = 1.0 / std::sqrt(double(t.shape[1]));
    for (int64_t i = 0; i < n; ++i) out[i] = float((2.0 * rng.uniform() - 1.0) * bound);
    return;
  }
  // Residual projections are scaled down so the residual stream's variance stays O(1) with depth.
  double std = 0.02;
  if (name.ends_with("o_proj.weight") || name.ends_with("fc_out.weight")) std /= std::sqrt(2.0 * cfg.n_layers);
  for (int64_t i = 0; i < n; ++i) out[i] = float(std * rng.normal());
}

int build_features(Program& p, const ModelConfig& cfg, const BuildOptions& opt) {
  Builder b{p, cfg, opt};
  if (p.name == "train") {  // dropout regularises training; every other program is deterministic
    b.drop = opt.dropout;
    b.lora_drop = opt.lora.enabled() ? opt.lora.dropout : 0.0;
  }
  const int64_t B = opt.batch, T = opt.seq ? opt.seq : cfg.ctx, C = cfg.d_model;
  check(B >= 1, "batch must be at least 1");
  check(T >= 1 && T <= cfg.ctx,
        "sequence length " + std::to_string(T) + " exceeds the context " + std::to_string(cfg.ctx));
  declare_parameters(p, cfg, opt.lora);

  int tokens = b.input("tokens", {B, T}, DType::i32);
  if (p.name == "generate") {
    b.decode = true;
    b.pos0 = b.input("pos0", {1}, DType::i32);
  }
  const int tok_emb = b.param("tok_emb.weight");
  int x = b.act("emb.out", {B, T, C});
  p.add_op(OpKind::embedding, {tokens, tok_emb, b.param("pos_emb.weight"), b.pos0}, {x});
  x = b.dropout(x, b.drop, "emb.drop");
  for (int i = 0; i < cfg.n_layers; ++i) x = b.block(x, i);
  if (opt.last_position_only && T > 1) {
    check(B == 1, "only the last position: a batch of one sequence");
    const int last = b.act("last.out", {1, 1, C});
    p.add_op(OpKind::slice_rows, {x}, {last}, {{"first", double(T - 1)}});
    x = last;
  }
  return b.layernorm(x, "ln_f");
}

int build_forward(Program& p, const ModelConfig& cfg, const BuildOptions& opt) {
  const int x = build_features(p, cfg, opt);
  const int64_t rows = p.tensor(x).shape[0] * p.tensor(x).shape[1];  // x is [B, T, C]
  // Weight tying: the output projection is the token embedding, transposed.
  int logits = p.add_tensor({"logits", TensorKind::activation, DType::f32, {rows, cfg.vocab_size}});
  p.add_op(OpKind::linear, {x, p.id("tok_emb.weight"), kNoTensor}, {logits});
  return logits;
}

namespace {
// The loss of the features x (ln_f's output): the tied output projection and the cross-entropy
// in one op, over chunks of the vocabulary, so that no [B*T, V] logits tensor exists (docs/model.md,
// "Loss"); its backward recomputes the chunks' logits.
int add_loss(Program& p, const BuildOptions& opt, int x) {
  const int64_t B = opt.batch, T = p.tensor(p.id("tokens")).shape[1];
  int targets = p.add_tensor({"targets", TensorKind::input, DType::i32, {B, T}});
  int mask = opt.loss_mask ? p.add_tensor({"loss_mask", TensorKind::input, DType::f32, {B, T}}) : kNoTensor;
  int loss = p.add_tensor({"loss", TensorKind::activation, DType::f32, {1}});
  int lse = p.add_tensor({"loss.lse", TensorKind::activation, DType::f32, {B * T}});
  p.add_op(OpKind::cross_entropy_tied, {x, p.id("tok_emb.weight"), targets, mask}, {loss, lse});
  return loss;
}
}  // namespace

Program build_forward_program(const ModelConfig& cfg, const BuildOptions& opt) {
  Program p;
  p.name = "forward";
  build_forward(p, cfg, opt);
  return p;
}

Program build_eval_program(const ModelConfig& cfg, const BuildOptions& opt) {
  Program p;
  p.name = "eval";
  add_loss(p, opt, build_features(p, cfg, opt));
  return p;
}

Program build_train_program(const ModelConfig& cfg, const BuildOptions& opt, const TrainConfig& tc) {
  Program p;
  p.name = "train";
  BuildOptions with_dropout = opt;
  with_dropout.dropout = tc.dropout;
  int loss = add_loss(p, opt, build_features(p, cfg, with_dropout));
  append_backward(p, loss);

  // Global gradient-norm clipping and AdamW, one update op per trainable parameter.
  std::vector<int> params, grads;
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& t = p.tensors[i];
    if (t.kind == TensorKind::parameter && t.trainable) {
      params.push_back(int(i));
      grads.push_back(p.id("grad." + t.name));
    }
  }
  int norm = p.add_tensor({"grad_norm", TensorKind::activation, DType::f32, {1}});
  p.add_op(OpKind::grad_norm, grads, {norm});
  int hparams = p.add_tensor({"optim.hparams", TensorKind::input, DType::f32, {2}});
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorInfo t = p.tensors[params[i]];
    int m = p.add_tensor({"optim.m." + t.name, TensorKind::optim_state, DType::f32, t.shape});
    int v = p.add_tensor({"optim.v." + t.name, TensorKind::optim_state, DType::f32, t.shape});
    // Decay only matrices and embeddings, never biases or LayerNorm gains; adapters use their own.
    const bool is_lora = t.name.ends_with(".lora_A") || t.name.ends_with(".lora_B");
    const double wd = is_lora ? opt.lora.weight_decay : (t.shape.size() == 2 ? tc.weight_decay : 0.0);
    p.add_op(
        OpKind::adamw, {params[i], grads[i], m, v, norm, hparams}, {params[i], m, v},
        {{"beta1", tc.beta1}, {"beta2", tc.beta2}, {"eps", tc.eps}, {"weight_decay", wd}, {"max_norm", tc.grad_clip}});
  }
  return p;
}

Program build_generate_program(const ModelConfig& cfg, const LoraConfig& lora, int seq) {
  Program p;
  p.name = "generate";
  BuildOptions opt;
  opt.batch = 1;
  opt.seq = seq;
  check(seq >= 1, "generate: the program must take at least one token");
  opt.lora = lora;
  opt.last_position_only = true;
  build_forward(p, cfg, opt);
  return p;
}

Program build_inspect_program(const ModelConfig& cfg, int seq, const LoraConfig& lora) {
  Program p;
  p.name = "inspect";
  BuildOptions opt;
  opt.batch = 1;
  opt.seq = seq;
  opt.lora = lora;
  opt.attention_probs = true;
  check(seq >= 1, "inspect: the sequence must hold at least one token");
  build_forward(p, cfg, opt);
  return p;
}

}  // namespace ptl
