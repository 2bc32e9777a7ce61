#include "engine/backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/simd.h"
#include "engine/error.h"
#include "engine/program_check.h"

namespace ptl::cpu {

int vector_bits() { return 32 * simd::kW; }

float* TensorStore::get_or_create(const TensorInfo& info, bool may_write) {
  if (may_write) changed();
  auto it = tensors_.find(info.name);
  if (it == tensors_.end()) it = tensors_.emplace(info.name, Buffer(size_t(info.bytes()))).first;
  check(it->second.bytes() == size_t(info.bytes()), "tensor '" + info.name + "' exists with a different size");
  return static_cast<float*>(it->second.data());
}
float* TensorStore::find(const std::string& name) {
  changed();
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : static_cast<float*>(it->second.data());
}
const float* TensorStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : static_cast<const float*>(it->second.data());
}
int64_t TensorStore::numel(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? 0 : int64_t(it->second.bytes() / 4);
}
void TensorStore::erase_prefix(const std::string& prefix) {
  changed();
  for (auto it = tensors_.begin(); it != tensors_.end();)
    it = it->first.starts_with(prefix) ? tensors_.erase(it) : std::next(it);
}
size_t TensorStore::bytes() const {
  size_t n = 0;
  for (const auto& [_, b] : tensors_) n += b.bytes();
  return n;
}
std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

namespace {

// Byte offsets of the program's non-persistent tensors in one arena, reusing memory by liveness
// (Program::live_ranges: two tensors may share bytes only if their live ranges do not overlap).
// With share = false every tensor lives for the whole run (no reuse at all). Placement is greedy,
// largest first, each at the lowest offset that is free for its whole live range (the usual
// offset assignment of inference runtimes); it is deterministic.
std::vector<size_t> plan_arena(const Program& p, bool share, size_t& total, size_t& live_peak) {
  const size_t n = p.tensors.size();
  const int end = int(p.ops.size());
  std::vector<LiveRange> live = p.live_ranges();
  std::vector<size_t> order;
  for (size_t i = 0; i < n; i++) {
    if (p.tensors[i].persistent()) continue;
    if (!share) live[i] = LiveRange{-1, end};
    order.push_back(i);
  }
  auto bytes = [&](size_t i) { return (size_t(p.tensors[i].bytes()) + 63) / 64 * 64; };
  // The lower bound of any layout: the most bytes live at one time.
  live_peak = 0;
  for (int t = -1; t <= end; t++) {
    size_t now = 0;
    for (size_t i : order)
      if (live[i].first <= t && t <= live[i].last) now += bytes(i);
    live_peak = std::max(live_peak, now);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes(a) > bytes(b); });
  std::vector<size_t> offsets(n, 0);
  std::vector<size_t> placed;
  total = 0;
  for (size_t i : order) {
    // The placed tensors live at the same time as this one, by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t j : placed)
      if (live[j].overlaps(live[i])) busy.push_back({offsets[j], offsets[j] + bytes(j)});
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& [b0, b1] : busy) {
      if (off + bytes(i) <= b0) break;
      off = std::max(off, b1);
    }
    offsets[i] = off;
    total = std::max(total, off + bytes(i));
    placed.push_back(i);
  }
  return offsets;
}

// Every target id in [0, V): the kernels index the logits (or W's rows) by it.
void check_targets(const int32_t* targets, int64_t M, int64_t V) {
  for (int64_t i = 0; i < M; ++i)
    if (targets[i] < 0 || targets[i] >= V)
      fail("target id " + std::to_string(targets[i]) + " is outside the vocabulary");
}

}  // namespace

size_t arena_bytes_of(const Program& program) {
  size_t total = 0, live_peak = 0;
  plan_arena(program, true, total, live_peak);
  return total;
}

Executor::Executor(Program program, TensorStore& store, bool share_memory)
    : program_(std::move(program)), store_(store) {
  // Shapes that disagree would send the kernels past a buffer (program_check.h): every program,
  // built here or read from a file, is checked once before anything is allocated.
  check_program(program_);
  for (const Op& op : program_.ops)
    for (int id : op.outputs)
      if (id >= 0 && program_.tensor(id).kind == TensorKind::parameter) writes_parameters_ = true;
  // A program that will change the weights (training) drops the packed weights now, before its
  // arena is allocated, and again at every run (run()).
  if (writes_parameters_) store_.changed();
  // Every non-persistent tensor in one arena, 64-byte aligned, memory shared by liveness.
  size_t total = 0;
  const std::vector<size_t> offsets = plan_arena(program_, share_memory, total, live_peak_);
  arena_ = Buffer(total);
  ptrs_.resize(program_.tensors.size());
  for (size_t i = 0; i < program_.tensors.size(); ++i) {
    const auto& t = program_.tensors[i];
    ptrs_[i] = t.persistent() ? static_cast<void*>(store.get_or_create(t, false))
                              : static_cast<char*>(arena_.data()) + offsets[i];
  }
}

void Executor::run() {
  if (writes_parameters_) store_.changed();
  const auto& ops = program_.ops;
  for (size_t i = 0; i < ops.size();) {
    // A run of adamw ops (one per parameter tensor, at the end of a training program) goes to
    // the pool as one pass (adamw_update_many), as long as no op reads what an earlier one of
    // the run writes.
    size_t end = i + 1;
    if (ops[i].kind == OpKind::adamw) {
      std::set<int> written(ops[i].outputs.begin(), ops[i].outputs.end());
      for (; end < ops.size() && ops[end].kind == OpKind::adamw; end++) {
        const Op& next = ops[end];
        if (std::any_of(next.inputs.begin(), next.inputs.end(), [&](int t) { return written.count(t) > 0; })) break;
        written.insert(next.outputs.begin(), next.outputs.end());
      }
    }
    // A training program's loss and its backward, back to back: one call, which computes the
    // logits once where one chunk holds them all (cross_entropy_tied_forward_backward).
    const bool loss_pair = is_loss_pair(i);
    if (loss_pair) end = i + 2;
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (loss_pair) {
      run_loss_pair(ops[i], ops[i + 1]);
    } else if (end - i > 1) {
      std::vector<AdamWTensor> batch;
      for (size_t k = i; k < end; k++) batch.push_back(adamw_args(ops[k]));
      adamw_update_many(batch.data(), int64_t(batch.size()));
    } else {
      run_op(ops[i]);
    }
    if (profile)
      op_seconds[to_string(ops[i].kind)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    i = end;
  }
}

// ops[i] is a cross_entropy_tied and ops[i + 1] its backward on the same tensors (what autodiff
// emits for a training program's loss).
bool Executor::is_loss_pair(size_t i) const {
  const auto& ops = program_.ops;
  if (ops[i].kind != OpKind::cross_entropy_tied || i + 1 >= ops.size()) return false;
  const Op &f = ops[i], &b = ops[i + 1];
  auto in = [](const Op& op, size_t k) { return k < op.inputs.size() ? op.inputs[k] : kNoTensor; };
  auto out = [](const Op& op, size_t k) { return k < op.outputs.size() ? op.outputs[k] : kNoTensor; };
  return b.kind == OpKind::cross_entropy_tied_backward && in(b, 0) == in(f, 0) && in(b, 1) == in(f, 1) &&
         in(b, 2) == in(f, 2) && in(b, 3) == out(f, 1) && in(b, 3) != kNoTensor && in(b, 4) == in(f, 3);
}

void Executor::run_loss_pair(const Op& f, const Op& b) {
  auto ptr = [&](const std::vector<int>& ids, size_t k) -> void* {
    return k < ids.size() && ids[k] >= 0 ? ptrs_[size_t(ids[k])] : nullptr;
  };
  const auto& xs = program_.tensors.at(f.inputs[0]);
  const int64_t C = xs.shape.back(), M = xs.numel() / C, V = program_.tensors.at(f.inputs[1]).shape[0];
  const auto* targets = static_cast<const int32_t*>(ptr(f.inputs, 2));
  check_targets(targets, M, V);
  cross_entropy_tied_forward_backward(
      static_cast<float*>(ptr(f.outputs, 0)), static_cast<float*>(ptr(f.outputs, 1)),
      static_cast<float*>(ptr(b.outputs, 0)), b.accumulates(0), static_cast<float*>(ptr(b.outputs, 1)),
      b.accumulates(1), static_cast<const float*>(ptr(f.inputs, 0)), static_cast<const float*>(ptr(f.inputs, 1)),
      targets, static_cast<const float*>(ptr(f.inputs, 3)), M, V, C);
}

AdamWTensor Executor::adamw_args(const Op& op) {
  auto f = [&](int id) { return static_cast<float*>(ptrs_.at(id)); };
  // Clipping is folded into the update: the gradient is scaled by min(1, max_norm / norm),
  // the coefficient torch.nn.utils.clip_grad_norm_ uses.
  const float norm = f(op.inputs[4])[0];
  const float* hp = f(op.inputs[5]);
  // The step count arrives as a float the host wrote: a whole number before it becomes one.
  if (!(hp[1] >= 0.0f && hp[1] <= 16777216.0f))
    fail("AdamW's step count " + std::to_string(hp[1]) + " is not between 0 and 2^24");
  const double max_norm = op.attr("max_norm", 1.0);
  const float scale = float(std::min(1.0, max_norm / (double(norm) + 1e-6)));
  return AdamWTensor{f(op.outputs[0]),
                     f(op.inputs[1]),
                     f(op.outputs[1]),
                     f(op.outputs[2]),
                     program_.tensors.at(op.inputs[0]).numel(),
                     hp[0],
                     float(op.attr("beta1")),
                     float(op.attr("beta2")),
                     float(op.attr("eps")),
                     float(op.attr("weight_decay")),
                     int64_t(hp[1]),
                     scale};
}

void Executor::run_op(const Op& op) {
  auto in_f = [&](size_t k) -> const float* {
    return k < op.inputs.size() && op.inputs[k] >= 0 ? static_cast<const float*>(ptrs_[op.inputs[k]]) : nullptr;
  };
  auto in_i = [&](size_t k) -> const int32_t* {
    return k < op.inputs.size() && op.inputs[k] >= 0 ? static_cast<const int32_t*>(ptrs_[op.inputs[k]]) : nullptr;
  };
  auto out_f = [&](size_t k) -> float* {
    return k < op.outputs.size() && op.outputs[k] >= 0 ? static_cast<float*>(ptrs_[op.outputs[k]]) : nullptr;
  };
  auto shape = [&](int id) -> const std::vector<int64_t>& { return program_.tensors.at(id).shape; };
  auto numel = [&](int id) { return program_.tensors.at(id).numel(); };
  auto acc = [&](size_t k) { return op.accumulates(k); };
  // The start position of a generation step (0 for whole sequences).
  auto pos0_at = [&](size_t k) -> int64_t { return in_i(k) ? in_i(k)[0] : 0; };
  // The dropout mask of this op and step, from its attributes and its "dropout.seed" input
  // {key, step} at input k; off without that input or with a zero threshold.
  auto mask_at = [&](size_t k) {
    dropout::Mask m;
    const int32_t* seed = in_i(k);
    if (!seed || op.attr("threshold") == 0.0) return m;
    m.threshold = uint32_t(op.attr("threshold"));
    m.scale = float(op.attr("scale", 1.0));
    m.base = dropout::base_of(uint32_t(op.attr("stream")), uint32_t(seed[0]), uint32_t(seed[1]));
    return m;
  };

  switch (op.kind) {
    case OpKind::embedding: {
      const auto& ts = shape(op.inputs[0]);
      const int64_t B = ts[0], T = ts[1], C = shape(op.inputs[1])[1], V = shape(op.inputs[1])[0];
      const int64_t ctx = shape(op.inputs[2])[0], pos0 = pos0_at(3);
      check(pos0 >= 0 && pos0 + T <= ctx,
            "position " + std::to_string(pos0 + T - 1) + " is past the context " + std::to_string(ctx));
      const int32_t* tokens = in_i(0);
      for (int64_t i = 0; i < B * T; ++i)
        if (tokens[i] < 0 || tokens[i] >= V)
          fail("token id " + std::to_string(tokens[i]) + " is outside the vocabulary");
      embedding_forward(out_f(0), tokens, in_f(1), in_f(2), B, T, C, pos0);
      break;
    }
    case OpKind::embedding_backward: {
      const auto& ts = shape(op.inputs[1]);
      const int64_t C = shape(op.inputs[0]).back();
      const int g_tok = op.outputs[0], g_pos = op.outputs[1];
      const int64_t V = g_tok >= 0 ? shape(g_tok)[0] : 0, ctx = g_pos >= 0 ? shape(g_pos)[0] : 0;
      // The forward checked these in a training program; a program of this op alone did not.
      const int64_t pos0 = pos0_at(2);
      check(g_pos < 0 || (pos0 >= 0 && pos0 + ts[1] <= ctx),
            "position " + std::to_string(pos0 + ts[1] - 1) + " is past the context " + std::to_string(ctx));
      if (g_tok >= 0)
        for (int64_t i = 0; i < ts[0] * ts[1]; ++i)
          if (in_i(1)[i] < 0 || in_i(1)[i] >= V)
            fail("token id " + std::to_string(in_i(1)[i]) + " is outside the vocabulary");
      embedding_backward(out_f(0), acc(0), out_f(1), acc(1), in_f(0), in_i(1), ts[0], ts[1], C, V, ctx, pos0);
      break;
    }
    case OpKind::layernorm: {
      const int64_t C = shape(op.inputs[0]).back(), N = numel(op.inputs[0]) / C;
      layernorm_forward(out_f(0), out_f(1), out_f(2), in_f(0), in_f(1), in_f(2), N, C, float(op.attr("eps", 1e-5)));
      break;
    }
    case OpKind::layernorm_backward: {
      const int64_t C = shape(op.inputs[1]).back(), N = numel(op.inputs[1]) / C;
      layernorm_backward(out_f(0), acc(0), out_f(1), acc(1), out_f(2), acc(2), in_f(0), in_f(1), in_f(2), in_f(3),
                         in_f(4), N, C);
      break;
    }
    case OpKind::linear: {
      const int64_t K = shape(op.inputs[0]).back(), M = numel(op.inputs[0]) / K, N = shape(op.inputs[1])[0];
      const bool packable = pack_weights && program_.tensor(op.inputs[1]).kind == TensorKind::parameter;
      if (const float* packed = packable ? store_.packed_linear_weight(in_f(1), N, K) : nullptr)
        linear_forward_packed(out_f(0), in_f(0), packed, in_f(2), M, N, K);
      else
        linear_forward(out_f(0), in_f(0), in_f(1), in_f(2), M, N, K);
      break;
    }
    case OpKind::linear_backward: {
      const int64_t K = shape(op.inputs[1]).back(), M = numel(op.inputs[1]) / K, N = shape(op.inputs[2])[0];
      linear_backward(out_f(0), acc(0), out_f(1), acc(1), out_f(2), acc(2), in_f(0), in_f(1), in_f(2), M, N, K);
      break;
    }
    case OpKind::attention: {
      const auto& s = shape(op.inputs[0]);
      attention_forward(out_f(0), out_f(1), in_f(0), in_f(1), in_f(2), s[0], s[1], s[2], int64_t(op.attr("heads")),
                        mask_at(3));
      break;
    }
    case OpKind::attention_backward: {
      const auto& s = shape(op.inputs[1]);
      attention_backward(out_f(0), acc(0), out_f(1), acc(1), out_f(2), acc(2), in_f(0), in_f(1), in_f(2), in_f(3),
                         in_f(4), in_f(5), s[0], s[1], s[2], int64_t(op.attr("heads")), mask_at(6));
      break;
    }
    case OpKind::kv_cache_write: {
      const int64_t C = shape(op.inputs[0]).back(), n = numel(op.inputs[0]) / C, pos0 = pos0_at(2);
      check(pos0 >= 0 && pos0 + n <= shape(op.outputs[0])[0], "KV cache is full");
      kv_cache_write(out_f(0), out_f(1), in_f(0), in_f(1), n, C, pos0);
      break;
    }
    case OpKind::attention_cached: {
      const int64_t C = shape(op.inputs[0]).back(), n = numel(op.inputs[0]) / C, pos0 = pos0_at(3);
      check(pos0 >= 0 && pos0 + n <= shape(op.inputs[1])[0], "attention reads past the KV cache");
      attention_cached(out_f(0), in_f(0), in_f(1), in_f(2), n, C, int64_t(op.attr("heads")), pos0);
      break;
    }
    case OpKind::attention_probs: {
      const auto& s = shape(op.inputs[0]);
      attention_probs_forward(out_f(0), in_f(0), in_f(1), s[0], s[1], s[2], int64_t(op.attr("heads")));
      break;
    }
    case OpKind::slice_rows: {
      const int64_t C = shape(op.inputs[0]).back(), n = numel(op.outputs[0]) / C, first = int64_t(op.attr("first"));
      check(first >= 0 && (first + n) * C <= numel(op.inputs[0]), "slice_rows reads past its input");
      slice_rows(out_f(0), in_f(0), first, n, C);
      break;
    }
    case OpKind::gelu:
      gelu_forward(out_f(0), in_f(0), numel(op.inputs[0]), op.attr("tanh") != 0.0 ? Gelu::tanh : Gelu::erf);
      break;
    case OpKind::gelu_backward:
      gelu_backward(out_f(0), acc(0), in_f(0), in_f(1), numel(op.inputs[0]),
                    op.attr("tanh") != 0.0 ? Gelu::tanh : Gelu::erf);
      break;
    case OpKind::add:
      add_forward(out_f(0), in_f(0), in_f(1), float(op.attr("alpha", 1.0)), numel(op.inputs[0]));
      break;
    case OpKind::add_backward:
      add_backward(out_f(0), acc(0), out_f(1), acc(1), in_f(0), float(op.attr("alpha", 1.0)), numel(op.inputs[0]));
      break;
    case OpKind::dropout:
      dropout_forward(out_f(0), in_f(0), numel(op.inputs[0]), mask_at(1));
      break;
    case OpKind::dropout_backward:
      dropout_backward(out_f(0), acc(0), in_f(0), numel(op.inputs[0]), mask_at(1));
      break;
    case OpKind::cross_entropy: {
      const auto& s = shape(op.inputs[0]);
      const int32_t* targets = in_i(1);
      check_targets(targets, s[0], s[1]);
      cross_entropy_forward(out_f(0), out_f(1), in_f(0), targets, in_f(2), s[0], s[1]);
      break;
    }
    case OpKind::cross_entropy_backward: {
      const auto& s = shape(op.inputs[0]);
      check_targets(in_i(1), s[0], s[1]);
      cross_entropy_backward(out_f(0), acc(0), in_f(0), in_i(1), in_f(2), in_f(3), s[0], s[1]);
      break;
    }
    case OpKind::cross_entropy_tied: {
      const int64_t C = shape(op.inputs[0]).back(), M = numel(op.inputs[0]) / C, V = shape(op.inputs[1])[0];
      const int32_t* targets = in_i(2);
      check_targets(targets, M, V);
      cross_entropy_tied_forward(out_f(0), out_f(1), in_f(0), in_f(1), targets, in_f(3), M, V, C);
      break;
    }
    case OpKind::cross_entropy_tied_backward: {
      const int64_t C = shape(op.inputs[0]).back(), M = numel(op.inputs[0]) / C, V = shape(op.inputs[1])[0];
      check_targets(in_i(2), M, V);
      cross_entropy_tied_backward(out_f(0), acc(0), out_f(1), acc(1), in_f(0), in_f(1), in_i(2), in_f(3), in_f(4), M, V,
                                  C);
      break;
    }
    case OpKind::grad_norm: {
      std::vector<const float*> xs;
      std::vector<int64_t> ns;
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        xs.push_back(in_f(k));
        ns.push_back(numel(op.inputs[k]));
      }
      out_f(0)[0] = float(std::sqrt(sum_squares_many(xs.data(), ns.data(), int64_t(xs.size()))));
      break;
    }
    case OpKind::adamw: {
      const AdamWTensor a = adamw_args(op);
      adamw_update_many(&a, 1);
      break;
    }
  }
}

}  // namespace ptl::cpu
