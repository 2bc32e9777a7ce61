// Reverse-mode differentiation of a program: walk the forward ops backwards and emit, for each,
// the op that turns the gradient of its output into gradients of its inputs. The rules are the
// hand-derived backward kernels; this file only wires them up.
#include "engine/autodiff.h"

#include "engine/error.h"

namespace ptl {

namespace {

// Which inputs of a forward op can carry a gradient (token ids, positions and targets cannot).
std::vector<int> differentiable_inputs(OpKind kind) {
  switch (kind) {
    case OpKind::embedding:
      return {1, 2};
    case OpKind::layernorm:
    case OpKind::linear:
    case OpKind::attention:
      return {0, 1, 2};
    case OpKind::gelu:
    case OpKind::dropout:
    case OpKind::cross_entropy:
      return {0};
    case OpKind::add:
    case OpKind::cross_entropy_tied:
      return {0, 1};
    default:
      return {};
  }
}

}  // namespace

void append_backward(Program& p, int loss_id) {
  const size_t n_forward = p.ops.size();

  // Forward sweep: which tensors depend on a trainable parameter (and so need a gradient).
  std::vector<bool> needs(p.tensors.size(), false);
  for (size_t i = 0; i < p.tensors.size(); ++i)
    needs[i] = p.tensors[i].kind == TensorKind::parameter && p.tensors[i].trainable;
  for (size_t i = 0; i < n_forward; ++i) {
    const Op& op = p.ops[i];
    bool any = false;
    for (int k : differentiable_inputs(op.kind))
      if (k < (int)op.inputs.size() && op.inputs[k] >= 0) any |= needs[op.inputs[k]];
    if (any) needs[op.outputs[0]] = true;
  }
  check(needs[loss_id], "the loss does not depend on any trainable parameter");

  std::vector<int> grad(p.tensors.size(), kNoTensor);
  std::vector<bool> written(p.tensors.size(), false);
  // Gradient tensor of forward tensor t, or kNoTensor when t needs none.
  auto grad_of = [&](int t) -> int {
    if (t < 0 || !needs[t]) return kNoTensor;
    if (grad[t] == kNoTensor) {
      TensorInfo g = p.tensors[t];
      g.name = "grad." + g.name;
      g.kind = TensorKind::gradient;
      g.trainable = false;
      grad[t] = p.add_tensor(g);
      needs.push_back(false);
      written.push_back(false);
    }
    return grad[t];
  };
  // Emit a backward op writing gradients of `targets`. The first op to write a gradient
  // overwrites it; later ones (a tensor used twice in the forward pass) accumulate.
  auto emit = [&](OpKind kind, std::vector<int> inputs, const std::vector<int>& targets,
                  std::map<std::string, double> attrs = {}) {
    std::vector<int> outputs;
    for (size_t k = 0; k < targets.size(); ++k) {
      int g = grad_of(targets[k]);
      outputs.push_back(g);
      if (g == kNoTensor) continue;
      attrs["acc" + std::to_string(k)] = written[g] ? 1.0 : 0.0;
      written[g] = true;
    }
    p.add_op(kind, std::move(inputs), std::move(outputs), std::move(attrs));
  };
  auto in = [](const Op& op, size_t k) { return k < op.inputs.size() ? op.inputs[k] : kNoTensor; };

  for (size_t i = n_forward; i-- > 0;) {
    const Op op = p.ops[i];  // copy: emit() appends to p.ops
    const int out = op.outputs[0];
    if (op.kind == OpKind::cross_entropy) {
      if (out != loss_id) continue;
      // The root: d loss / d logits, fused with the softmax.
      emit(OpKind::cross_entropy_backward, {in(op, 0), in(op, 1), op.outputs[1], in(op, 2)}, {in(op, 0)});
      continue;
    }
    if (op.kind == OpKind::cross_entropy_tied) {
      if (out != loss_id) continue;
      // The root with the tied output projection: d loss / d x and d loss / d W, the chunks'
      // logits recomputed from x and W (never stored).
      emit(OpKind::cross_entropy_tied_backward, {in(op, 0), in(op, 1), in(op, 2), op.outputs[1], in(op, 3)},
           {in(op, 0), in(op, 1)});
      continue;
    }
    if (!needs[out] || grad[out] == kNoTensor || !written[grad[out]]) continue;
    const int dy = grad[out];
    switch (op.kind) {
      case OpKind::embedding:
        emit(OpKind::embedding_backward, {dy, in(op, 0), in(op, 3)}, {in(op, 1), in(op, 2)});
        break;
      case OpKind::layernorm:
        emit(OpKind::layernorm_backward, {dy, in(op, 0), in(op, 1), op.outputs[1], op.outputs[2]},
             {in(op, 0), in(op, 1), in(op, 2)});
        break;
      case OpKind::linear:
        emit(OpKind::linear_backward, {dy, in(op, 0), in(op, 1)}, {in(op, 0), in(op, 1), in(op, 2)});
        break;
      case OpKind::attention: {
        // With dropout (input 3, the seed) the backward regenerates the forward's mask: same
        // seed input, same attributes.
        std::vector<int> inputs = {dy, in(op, 0), in(op, 1), in(op, 2), out, op.outputs[1]};
        std::map<std::string, double> attrs = op.attrs;
        if (in(op, 3) != kNoTensor) inputs.push_back(in(op, 3));
        emit(OpKind::attention_backward, inputs, {in(op, 0), in(op, 1), in(op, 2)}, attrs);
        break;
      }
      case OpKind::dropout:
        emit(OpKind::dropout_backward, {dy, in(op, 1)}, {in(op, 0)}, op.attrs);
        break;
      case OpKind::gelu:
        emit(OpKind::gelu_backward, {dy, in(op, 0)}, {in(op, 0)}, op.attrs);  // the same variant ("tanh")
        break;
      case OpKind::add:
        emit(OpKind::add_backward, {dy}, {in(op, 0), in(op, 1)}, {{"alpha", op.attr("alpha", 1.0)}});
        break;
      default:
        fail(std::string("autodiff: no backward rule for op '") + to_string(op.kind) + "'");
    }
  }
}

}  // namespace ptl
