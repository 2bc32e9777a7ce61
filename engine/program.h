#pragma once
// The model as data: a table of named tensors and an ordered list of ops over them.
//
// A backend never sees a "GPT": it sees a Program. The CPU backend runs each op with a C++
// kernel; the WebGPU executor (TypeScript) runs the same serialised Program with WGSL
// kernels of the same names. Adding an op means: a kind here, a kernel per backend, and
// (if it is differentiable) a rule in autodiff.cpp.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ptl {

enum class DType { f32, i32 };

// What a tensor is for. It decides where a backend keeps it and who writes it.
enum class TensorKind {
  parameter,    // model weights: persistent, shared by every program of a model
  gradient,     // d loss / d something: written by backward ops, lives with the program
  optim_state,  // AdamW moments: persistent
  activation,   // intermediate values of one run
  input,        // written by the host before each run (tokens, targets, mask, lr)
  state,        // persistent non-parameter state (KV cache)
};

const char* to_string(DType);
const char* to_string(TensorKind);

// A shape as messages show it: "[768, 2304]".
std::string shape_str(const std::vector<int64_t>& shape);

struct TensorInfo {
  std::string name;
  TensorKind kind = TensorKind::activation;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  bool trainable = false;  // parameters only: gets a gradient and optimizer moments

  int64_t numel() const {
    // A zero dimension first, so that an empty tensor's other dimensions never multiply past
    // int64 (Program::from_json bounds the rest).
    for (auto s : shape)
      if (s == 0) return 0;
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
  int64_t bytes() const { return numel() * 4; }  // f32 and i32 are both 4 bytes
  bool persistent() const {
    return kind == TensorKind::parameter || kind == TensorKind::optim_state || kind == TensorKind::state;
  }
};

// Op kinds. The string names are the serialised form and the kernel file names.
enum class OpKind {
  embedding,               // in: tokens, tok_emb, pos_emb [, pos0]  out: x
  embedding_backward,      // in: dx, tokens [, pos0]                 out: dtok_emb, dpos_emb
  layernorm,               // in: x, w, b                             out: y, mean, rstd
  layernorm_backward,      // in: dy, x, w, mean, rstd                out: dx, dw, db
  linear,                  // in: x[M,K], W[N,K] [, b[N]]             out: y[M,N] = x W^T + b
  linear_backward,         // in: dy, x, W                            out: dx, dW, db (any may be absent)
  attention,               // in: q, k, v [B,T,C] [, dropout.seed]    out: y, lse [B,H,T]   (causal)
  attention_backward,      // in: dy, q, k, v, y, lse [, dropout.seed] out: dq, dk, dv
  kv_cache_write,          // in: k, v [n,C], pos0                    out: k_cache, v_cache [ctx,C] (in place)
  attention_cached,        // in: q [n,C], k_cache, v_cache, pos0     out: y [n,C]
  attention_probs,         // in: q, k [B,T,C]                        out: probs [B,H,T,T] (causal softmax; inspection)
  slice_rows,              // in: x [..., C]                          out: y [..., C] = rows first .. first + n of x
  gelu,                    // in: x                                   out: y   (attr tanh = 1: GPT-2's form)
  gelu_backward,           // in: dy, x                               out: dx  (attr tanh as the forward's)
  add,                     // in: a, b                                out: y = a + alpha * b
  add_backward,            // in: dy                                  out: da = dy, db = alpha * dy
  dropout,                 // in: x, dropout.seed                     out: y (kept * scale, else 0)
  dropout_backward,        // in: dy, dropout.seed                    out: dx (the same mask)
  cross_entropy,           // in: logits[M,V], targets [, mask]       out: loss[1], lse[M]
  cross_entropy_backward,  // in: logits, targets, lse [, mask]       out: dlogits
  // The tied output projection and the cross-entropy in one op, over chunks of the vocabulary
  // (the logits x W^T are never stored whole; W is the token embedding [V, C]):
  //   cross_entropy_tied           in: x[M,C], W[V,C], targets [, mask]  out: loss[1], lse[M]
  //   cross_entropy_tied_backward  in: x, W, targets, lse [, mask]       out: dx, dW (logits recomputed)
  cross_entropy_tied,
  cross_entropy_tied_backward,
  grad_norm,  // in: every gradient                      out: norm[1]
  adamw,      // in: param, grad, m, v, norm, hparams    out: param, m, v (in place)
};

const char* to_string(OpKind);
OpKind op_kind_from_string(const std::string&);

constexpr int kNoTensor = -1;

struct Op {
  OpKind kind;
  std::vector<int> inputs;   // tensor ids; kNoTensor for an absent optional input
  std::vector<int> outputs;  // tensor ids; kNoTensor for an output nobody needs
  // Attributes: numbers only, so every backend can read them the same way.
  // Gradient outputs carry "acc<i>" = 1 when output i accumulates (+=) instead of overwriting:
  // a tensor used twice in the forward pass (the tied embedding, the residual stream) receives
  // its gradient from two backward ops, and the first one to run writes, the rest add.
  std::map<std::string, double> attrs;

  double attr(const std::string& key, double fallback = 0.0) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? fallback : it->second;
  }
  bool accumulates(size_t output) const { return attr("acc" + std::to_string(output)) != 0.0; }
};

// The ops during which a non-persistent tensor must keep its value, as op indices [first, last]:
// from the first op that touches it to the last. A tensor the host writes before a run (inputs)
// or reads after it (loss, gradient norm, logits, the parameters' gradients, and any tensor that
// no op reads: a program's results, such as the inspect program's attention maps) lives for the
// whole run, [-1, ops.size()]. Two tensors whose ranges do not overlap may share memory: the CPU
// executor's arena and the WebGPU executor's buffers (web/webgpu/src/memory.ts, which reads the
// ranges from the program's JSON) are both planned from these.
struct LiveRange {
  int first = -1, last = -1;
  bool overlaps(const LiveRange& o) const { return first <= o.last && o.first <= last; }
};

struct Program {
  std::string name;  // train | eval | forward | generate | inspect
  std::vector<TensorInfo> tensors;
  std::vector<Op> ops;

  int add_tensor(TensorInfo info);          // throws if the name exists with a different shape/kind
  int find(const std::string& name) const;  // -1 when absent
  int id(const std::string& name) const;    // throws when absent
  const TensorInfo& tensor(int id) const { return tensors.at(id); }
  void add_op(OpKind kind, std::vector<int> inputs, std::vector<int> outputs, std::map<std::string, double> attrs = {});

  // Per tensor (persistent ones too, which no plan places: [-1, ops.size()]).
  std::vector<LiveRange> live_ranges() const;

  // The JSON form; each non-persistent tensor carries its live range ("live": [first, last]).
  // from_json ignores those: the ranges follow from the ops.
  nlohmann::json to_json() const;
  static Program from_json(const nlohmann::json&);
};

}  // namespace ptl
