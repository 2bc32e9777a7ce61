#include "engine/program_check.h"

#include <cmath>
#include <sstream>
#include <string>

#include "engine/error.h"

namespace ptl {

namespace {

// A number as a message shows it: 5, 0.5, 1e+300.
std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// One op's check: its tensors by position, each named in messages by its role in the op
// ("W") and its name in the program ("blocks.0.attn.q.weight").
class OpCheck {
 public:
  OpCheck(const Program& p, const Op& op, size_t index) : p_(p), op_(op) {
    where_ = "program: op " + std::to_string(index) + " (" + to_string(op.kind) + ")";
  }

  [[noreturn]] void bad(const std::string& why) const { fail(where_ + ": " + why); }

  // Input k: null when absent (kNoTensor or past the list); an error when absent and required.
  const TensorInfo* in(size_t k, const char* role, DType dtype, bool required = true) const {
    return tensor(op_.inputs, k, "input", role, dtype, required);
  }
  const TensorInfo* out(size_t k, const char* role, bool required = true) const {
    return tensor(op_.outputs, k, "output", role, DType::f32, required);
  }

  // A tensor's element count (when the tensor is there).
  void numel(const TensorInfo* t, const char* role, int64_t n, const std::string& because) const {
    if (t && t->numel() != n)
      bad(std::string(role) + " '" + t->name + "' " + shape_str(t->shape) + " holds " + std::to_string(t->numel()) +
          " elements; " + because + " it must hold " + std::to_string(n));
  }
  void rank(const TensorInfo& t, const char* role, size_t r) const {
    if (t.shape.size() != r)
      bad(std::string(role) + " '" + t.name + "' " + shape_str(t.shape) + " must have " + std::to_string(r) +
          " dimensions");
  }
  // The last dimension, which the kernels divide the element count by: at least 1.
  int64_t last(const TensorInfo& t, const char* role) const {
    if (t.shape.empty() || t.shape.back() < 1)
      bad(std::string(role) + " '" + t.name + "' " + shape_str(t.shape) + " needs a last dimension of at least 1");
    return t.shape.back();
  }
  void same_shape(const TensorInfo* t, const char* role, const TensorInfo& ref, const char* ref_role) const {
    if (t && t->shape != ref.shape)
      bad(std::string(role) + " '" + t->name + "' " + shape_str(t->shape) + " must have the shape of " + ref_role +
          " '" + ref.name + "' " + shape_str(ref.shape));
  }

  // An attribute the kernels convert to an integer or a float: finite and within [lo, hi].
  double attr(const char* key, double fallback, double lo, double hi) const {
    const double v = op_.attr(key, fallback);
    if (!std::isfinite(v) || v < lo || v > hi)
      bad(std::string("attribute '") + key + "' is " + num(v) + " (between " + num(lo) + " and " + num(hi) + ")");
    return v;
  }
  // Attention's heads: a whole number that divides the model width C.
  int64_t heads(int64_t C) const {
    const double h = attr("heads", 0.0, 1.0, double(C));
    if (h != std::floor(h) || C % int64_t(h) != 0)
      bad("attribute 'heads' is " + num(h) + ", which does not divide the width " + std::to_string(C));
    return int64_t(h);
  }
  // The dropout mask's attributes (engine/dropout.h): a 24-bit threshold, a 32-bit stream.
  void dropout_attrs() const {
    const double t = attr("threshold", 0.0, 0.0, 16777216.0);
    if (t != std::floor(t)) bad("attribute 'threshold' is not a whole number");
    const double s = attr("stream", 0.0, 0.0, 4294967295.0);
    if (s != std::floor(s)) bad("attribute 'stream' is not a whole number");
    attr("scale", 1.0, -3.4e38, 3.4e38);
  }
  // The optional dropout seed {key, step}.
  void seed(size_t k) const {
    const TensorInfo* s = in(k, "dropout seed", DType::i32, false);
    if (s && s->numel() < 2) bad("the dropout seed '" + s->name + "' must hold 2 integers (key, step)");
  }
  // The optional start position of a generation step (one integer).
  void pos0(size_t k) const {
    const TensorInfo* s = in(k, "pos0", DType::i32, false);
    if (s && s->numel() < 1) bad("pos0 '" + s->name + "' must hold the start position");
  }

 private:
  const TensorInfo* tensor(const std::vector<int>& ids, size_t k, const char* side, const char* role, DType dtype,
                           bool required) const {
    const int id = k < ids.size() ? ids[k] : kNoTensor;
    if (id < 0 || size_t(id) >= p_.tensors.size()) {
      if (id >= 0 || required)
        bad(std::string(side) + " " + std::to_string(k) + " (" + role + ") is " +
            (id >= 0 ? "not a tensor of the program" : "missing"));
      return nullptr;
    }
    const TensorInfo& t = p_.tensors[size_t(id)];
    if (t.dtype != dtype)
      bad(std::string(role) + " '" + t.name + "' is " + to_string(t.dtype) + "; the op reads " + to_string(dtype));
    return &t;
  }

  const Program& p_;
  const Op& op_;
  std::string where_;
};

constexpr DType f32 = DType::f32, i32 = DType::i32;

void check_op(const Program& p, const Op& op, size_t index) {
  const OpCheck c(p, op, index);
  switch (op.kind) {
    case OpKind::embedding: {
      const auto& tokens = *c.in(0, "tokens", i32);
      const auto& wte = *c.in(1, "token embedding", f32);
      const auto& wpe = *c.in(2, "position embedding", f32);
      c.pos0(3);
      c.rank(tokens, "tokens", 2);
      c.rank(wte, "token embedding", 2);
      c.rank(wpe, "position embedding", 2);
      const int64_t C = c.last(wte, "token embedding");
      if (wpe.shape[1] != C)
        c.bad("the position embedding '" + wpe.name + "' " + shape_str(wpe.shape) +
              " is not as wide as the token embedding '" + wte.name + "' " + shape_str(wte.shape));
      c.numel(c.out(0, "x"), "x", tokens.numel() * C, "for [B, T, C]");
      break;
    }
    case OpKind::embedding_backward: {
      const auto& dx = *c.in(0, "dx", f32);
      const auto& tokens = *c.in(1, "tokens", i32);
      c.pos0(2);
      c.rank(tokens, "tokens", 2);
      const int64_t C = c.last(dx, "dx");
      c.numel(&dx, "dx", tokens.numel() * C, "for [B, T, C]");
      for (size_t k = 0; k < 2; k++) {
        const TensorInfo* g = c.out(k, k == 0 ? "token embedding gradient" : "position embedding gradient", false);
        if (!g) continue;
        c.rank(*g, k == 0 ? "token embedding gradient" : "position embedding gradient", 2);
        if (g->shape[1] != C)
          c.bad("the embedding gradient '" + g->name + "' is not C = " + std::to_string(C) + " wide");
      }
      break;
    }
    case OpKind::layernorm: {
      const auto& x = *c.in(0, "x", f32);
      const int64_t C = c.last(x, "x"), N = x.numel() / C;
      c.numel(c.in(1, "w", f32), "w", C, "as x's last dimension");
      c.numel(c.in(2, "b", f32), "b", C, "as x's last dimension");
      c.numel(c.out(0, "y"), "y", x.numel(), "as x");
      c.numel(c.out(1, "mean", false), "mean", N, "one per row:");
      c.numel(c.out(2, "rstd", false), "rstd", N, "one per row:");
      c.attr("eps", 1e-5, 0.0, 3.4e38);
      break;
    }
    case OpKind::layernorm_backward: {
      const auto& x = *c.in(1, "x", f32);
      const int64_t C = c.last(x, "x"), N = x.numel() / C;
      c.numel(c.in(0, "dy", f32), "dy", x.numel(), "as x");
      c.numel(c.in(2, "w", f32), "w", C, "as x's last dimension");
      c.numel(c.in(3, "mean", f32), "mean", N, "one per row:");
      c.numel(c.in(4, "rstd", f32), "rstd", N, "one per row:");
      c.numel(c.out(0, "dx", false), "dx", x.numel(), "as x");
      c.numel(c.out(1, "dw", false), "dw", C, "as w");
      c.numel(c.out(2, "db", false), "db", C, "as w");
      break;
    }
    case OpKind::linear:
    case OpKind::linear_backward: {
      // forward: x, W, b -> y; backward: dy, x, W -> dx, dW, db
      const bool fwd = op.kind == OpKind::linear;
      const auto& x = *c.in(fwd ? 0 : 1, "x", f32);
      const auto& W = *c.in(fwd ? 1 : 2, "W", f32);
      c.rank(W, "W", 2);
      const int64_t K = c.last(x, "x"), M = x.numel() / K, N = W.shape[0];
      if (W.shape[1] != K)
        c.bad("W '" + W.name + "' " + shape_str(W.shape) + " must be [N, " + std::to_string(K) + "] for x '" + x.name +
              "' " + shape_str(x.shape));
      if (fwd) {
        c.numel(c.in(2, "b", f32, false), "b", N, "as W's rows:");
        c.numel(c.out(0, "y"), "y", M * N, "for [M, N]");
      } else {
        c.numel(c.in(0, "dy", f32), "dy", M * N, "for [M, N]");
        c.numel(c.out(0, "dx", false), "dx", M * K, "as x");
        c.numel(c.out(1, "dW", false), "dW", N * K, "as W");
        c.numel(c.out(2, "db", false), "db", N, "as W's rows:");
      }
      break;
    }
    case OpKind::attention:
    case OpKind::attention_backward:
    case OpKind::attention_probs: {
      // forward: q, k, v [, seed] -> y, lse; backward: dy, q, k, v, y, lse [, seed] -> dq, dk, dv;
      // probs: q, k -> probs
      const size_t q_at = op.kind == OpKind::attention_backward ? 1 : 0;
      const auto& q = *c.in(q_at, "q", f32);
      c.rank(q, "q", 3);
      const int64_t B = q.shape[0], T = q.shape[1], C = c.last(q, "q"), H = c.heads(C);
      c.same_shape(c.in(q_at + 1, "k", f32), "k", q, "q");
      if (op.kind == OpKind::attention_probs) {
        c.numel(c.out(0, "probs"), "probs", B * H * T * T, "for [B, H, T, T]");
        break;
      }
      c.same_shape(c.in(q_at + 2, "v", f32), "v", q, "q");
      c.dropout_attrs();
      if (op.kind == OpKind::attention) {
        c.seed(3);
        c.numel(c.out(0, "y"), "y", q.numel(), "as q");
        c.numel(c.out(1, "lse", false), "lse", B * H * T, "for [B, H, T]");
      } else {
        c.numel(c.in(0, "dy", f32), "dy", q.numel(), "as q");
        c.numel(c.in(4, "y", f32), "y", q.numel(), "as q");
        c.numel(c.in(5, "lse", f32), "lse", B * H * T, "for [B, H, T]");
        c.seed(6);
        c.numel(c.out(0, "dq", false), "dq", q.numel(), "as q");
        c.numel(c.out(1, "dk", false), "dk", q.numel(), "as q");
        c.numel(c.out(2, "dv", false), "dv", q.numel(), "as q");
      }
      break;
    }
    case OpKind::kv_cache_write: {
      const auto& k = *c.in(0, "k", f32);
      const int64_t C = c.last(k, "k");
      c.numel(c.in(1, "v", f32), "v", k.numel(), "as k");
      c.pos0(2);
      const auto& kc = *c.out(0, "k cache");
      c.rank(kc, "k cache", 2);
      if (kc.shape[1] != C) c.bad("the k cache '" + kc.name + "' is not C = " + std::to_string(C) + " wide");
      c.same_shape(c.out(1, "v cache"), "v cache", kc, "the k cache");
      break;
    }
    case OpKind::attention_cached: {
      const auto& q = *c.in(0, "q", f32);
      const int64_t C = c.last(q, "q");
      c.heads(C);
      const auto& kc = *c.in(1, "k cache", f32);
      c.rank(kc, "k cache", 2);
      if (kc.shape[1] != C) c.bad("the k cache '" + kc.name + "' is not C = " + std::to_string(C) + " wide");
      c.same_shape(c.in(2, "v cache", f32), "v cache", kc, "the k cache");
      c.pos0(3);
      c.numel(c.out(0, "y"), "y", q.numel(), "as q");
      break;
    }
    case OpKind::slice_rows: {
      // x's rows (its elements over its last dimension C): y takes n of them from row 'first' on.
      const auto& x = *c.in(0, "x", f32);
      const int64_t C = c.last(x, "x"), rows = x.numel() / C;
      const auto& y = *c.out(0, "y");
      if (y.shape.empty() || y.shape.back() != C || y.numel() < C || y.numel() > x.numel())
        c.bad("y '" + y.name + "' " + shape_str(y.shape) + " must be 1 to " + std::to_string(rows) +
              " rows of x's width " + std::to_string(C));
      const double first = c.attr("first", 0.0, 0.0, double(rows - y.numel() / C));
      if (first != std::floor(first)) c.bad("attribute 'first' is not a whole number");
      break;
    }
    case OpKind::gelu:
    case OpKind::gelu_backward: {
      const bool fwd = op.kind == OpKind::gelu;
      const auto& x = *c.in(fwd ? 0 : 1, "x", f32);
      if (!fwd) c.numel(c.in(0, "dy", f32), "dy", x.numel(), "as x");
      c.numel(c.out(0, fwd ? "y" : "dx", fwd), fwd ? "y" : "dx", x.numel(), "as x");
      break;
    }
    case OpKind::add: {
      const auto& a = *c.in(0, "a", f32);
      c.numel(c.in(1, "b", f32), "b", a.numel(), "as a");
      c.numel(c.out(0, "y"), "y", a.numel(), "as a");
      c.attr("alpha", 1.0, -3.4e38, 3.4e38);
      break;
    }
    case OpKind::add_backward: {
      const auto& dy = *c.in(0, "dy", f32);
      c.numel(c.out(0, "da", false), "da", dy.numel(), "as dy");
      c.numel(c.out(1, "db", false), "db", dy.numel(), "as dy");
      c.attr("alpha", 1.0, -3.4e38, 3.4e38);
      break;
    }
    case OpKind::dropout:
    case OpKind::dropout_backward: {
      const bool fwd = op.kind == OpKind::dropout;
      const auto& x = *c.in(0, fwd ? "x" : "dy", f32);
      c.seed(1);
      c.dropout_attrs();
      c.numel(c.out(0, fwd ? "y" : "dx", fwd), fwd ? "y" : "dx", x.numel(), fwd ? "as x" : "as dy");
      break;
    }
    case OpKind::cross_entropy:
    case OpKind::cross_entropy_backward: {
      // forward: logits, targets [, mask] -> loss, lse; backward: logits, targets, lse [, mask] -> dlogits
      const bool fwd = op.kind == OpKind::cross_entropy;
      const auto& logits = *c.in(0, "logits", f32);
      c.rank(logits, "logits", 2);
      const int64_t M = logits.shape[0];
      c.last(logits, "logits");
      c.numel(c.in(1, "targets", i32), "targets", M, "one per row of the logits:");
      if (fwd) {
        c.numel(c.in(2, "mask", f32, false), "mask", M, "one per row of the logits:");
        const TensorInfo* loss = c.out(0, "loss");
        if (loss->numel() < 1) c.bad("the loss '" + loss->name + "' holds no element");
        c.numel(c.out(1, "lse", false), "lse", M, "one per row of the logits:");
      } else {
        c.numel(c.in(2, "lse", f32, false), "lse", M, "one per row of the logits:");
        c.numel(c.in(3, "mask", f32, false), "mask", M, "one per row of the logits:");
        c.numel(c.out(0, "dlogits", false), "dlogits", logits.numel(), "as the logits");
      }
      break;
    }
    case OpKind::cross_entropy_tied:
    case OpKind::cross_entropy_tied_backward: {
      // forward: x, W, targets [, mask] -> loss, lse; backward: x, W, targets, lse [, mask] -> dx, dW
      const bool fwd = op.kind == OpKind::cross_entropy_tied;
      const auto& x = *c.in(0, "x", f32);
      const auto& W = *c.in(1, "W", f32);
      c.rank(W, "W", 2);
      const int64_t C = c.last(x, "x"), M = x.numel() / C, V = W.shape[0];
      if (W.shape[1] != C)
        c.bad("W '" + W.name + "' " + shape_str(W.shape) + " must be [V, " + std::to_string(C) + "] for x '" + x.name +
              "' " + shape_str(x.shape));
      if (V < 1) c.bad("W '" + W.name + "' has no vocabulary rows");
      c.numel(c.in(2, "targets", i32), "targets", M, "one per row of x:");
      if (fwd) {
        c.numel(c.in(3, "mask", f32, false), "mask", M, "one per row of x:");
        const TensorInfo* loss = c.out(0, "loss");
        if (loss->numel() < 1) c.bad("the loss '" + loss->name + "' holds no element");
        c.numel(c.out(1, "lse"), "lse", M, "one per row of x:");
      } else {
        c.numel(c.in(3, "lse", f32), "lse", M, "one per row of x:");
        c.numel(c.in(4, "mask", f32, false), "mask", M, "one per row of x:");
        c.numel(c.out(0, "dx", false), "dx", x.numel(), "as x");
        c.numel(c.out(1, "dW", false), "dW", W.numel(), "as W");
      }
      break;
    }
    case OpKind::grad_norm: {
      for (size_t k = 0; k < op.inputs.size(); k++) c.in(k, "gradient", f32);
      const TensorInfo* norm = c.out(0, "norm");
      if (norm->numel() < 1) c.bad("the norm '" + norm->name + "' holds no element");
      break;
    }
    case OpKind::adamw: {
      // param, grad, m, v, norm, hparams {lr, step} -> param, m, v (in place)
      const auto& param = *c.in(0, "parameter", f32);
      const int64_t n = param.numel();
      c.numel(c.in(1, "gradient", f32), "gradient", n, "as the parameter");
      c.numel(c.in(2, "m", f32), "m", n, "as the parameter");
      c.numel(c.in(3, "v", f32), "v", n, "as the parameter");
      if (c.in(4, "norm", f32)->numel() < 1) c.bad("the gradient norm holds no element");
      if (c.in(5, "hparams", f32)->numel() < 2) c.bad("the hyperparameters must hold 2 numbers (lr, step)");
      c.numel(c.out(0, "parameter"), "parameter", n, "as the parameter");
      c.numel(c.out(1, "m"), "m", n, "as the parameter");
      c.numel(c.out(2, "v"), "v", n, "as the parameter");
      for (const char* key : {"beta1", "beta2", "eps", "weight_decay", "max_norm"}) c.attr(key, 1.0, -3.4e38, 3.4e38);
      break;
    }
  }
}

}  // namespace

void check_program(const Program& program) {
  for (size_t i = 0; i < program.ops.size(); i++) check_op(program, program.ops[i], i);
}

}  // namespace ptl
