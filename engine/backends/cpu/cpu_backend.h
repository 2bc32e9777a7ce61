#pragma once
// The CPU backend: runs a Program with the C++ kernels of kernels/.
//
// Memory: persistent tensors (parameters, optimizer moments, KV caches) live in a TensorStore
// shared by every program of one model, so the training, evaluation and generation programs
// see the same weights. Everything else a program needs (inputs, activations, gradients) is
// laid out in one arena allocated when the program is loaded; tensors whose live ranges (first
// to last op that uses them) do not overlap share its bytes, so the arena holds only what is
// live at the worst point of the program, not every activation at once.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/cpu/buffer.h"
#include "engine/backends/cpu/packed_weights.h"
#include "engine/executor.h"
#include "engine/program.h"

namespace ptl::cpu {

struct AdamWTensor;  // kernels.h

// The persistent tensors by name, and what is derived from them: linear weights packed for
// generation (packed_weights.h), which are copies, right only while the weights are unchanged.
// So every call that hands out a writable pointer (get_or_create, find, erase_prefix) counts as a
// change and drops them (changed()), as do the executors that write parameters (Executor).
class TensorStore {
 public:
  // The tensor's storage, created zero-filled on first use; throws if it exists with another size.
  // may_write = false: the caller does not write through the pointer (an Executor, which reports
  // its own writes), so the packed weights stay.
  float* get_or_create(const TensorInfo& info, bool may_write = true);
  float* find(const std::string& name);  // nullptr when absent
  const float* find(const std::string& name) const;
  int64_t numel(const std::string& name) const;
  void erase_prefix(const std::string& prefix);  // e.g. "cache." or "optim."
  size_t bytes() const;                          // the tensors' (not the packed weights')
  std::vector<std::string> names() const;

  // W [N, K], one of these tensors, packed for linear_forward_packed: made on first use, kept
  // until the next change; null where there is no memory for it.
  const float* packed_linear_weight(const float* W, int64_t N, int64_t K) { return packed_.get(W, N, K); }
  size_t packed_bytes() const { return packed_.bytes(); }
  // A tensor may have been written: the packed weights go. Code that keeps a pointer from this
  // store and writes through it later calls this after the write.
  void changed() { packed_.clear(); }

 private:
  std::map<std::string, Buffer> tensors_;
  PackedWeights packed_;
};

// The arena an Executor of `program` allocates (memory shared by liveness), without allocating it.
size_t arena_bytes_of(const Program& program);

class Executor : public ptl::Executor {
 public:
  // share_memory = false gives every tensor its own bytes, so after run() every tensor holds
  // the value its op wrote (for dumps and tests that look inside a run); it costs the sum of all
  // activations instead of the live peak.
  Executor(Program program, TensorStore& store, bool share_memory = true);
  void run() override;

  const Program& program() const override { return program_; }
  void write(const std::string& name, const void* src, size_t bytes) override {
    std::memcpy(data(checked_id(name, bytes)), src, bytes);
  }
  void read(const std::string& name, void* dst, size_t bytes) override {
    std::memcpy(dst, ptrs_.at(checked_id(name, bytes)), bytes);
  }
  // A writable pointer to the tensor; a parameter's counts as a change of the weights
  // (TensorStore::changed()).
  void* data(int tensor_id) {
    if (program_.tensor(tensor_id).kind == TensorKind::parameter) store_.changed();
    return ptrs_.at(tensor_id);
  }
  float* f32(const std::string& name) { return static_cast<float*>(data(program_.id(name))); }
  int32_t* i32(const std::string& name) { return static_cast<int32_t*>(data(program_.id(name))); }
  size_t arena_bytes() const { return arena_.bytes(); }
  // The most bytes of non-persistent tensors live at one point of the program: the smallest
  // arena any layout could have (arena_bytes() is at least this).
  size_t live_peak_bytes() const { return live_peak_; }

  // Per-op wall time, accumulated over runs when profiling is on (for `ptl bench --ops`).
  bool profile = false;
  std::map<std::string, double> op_seconds;
  // Linear ops read their weights as packed panels the store keeps (TensorStore::
  // packed_linear_weight), bitwise the same outputs: for a program run many times on unchanged
  // weights with few rows (generation), where packing W for every product costs more than the
  // product. The packs hold about the weights' bytes again.
  bool pack_weights = false;

 private:
  void run_op(const Op& op);
  AdamWTensor adamw_args(const Op& op);
  bool is_loss_pair(size_t i) const;
  void run_loss_pair(const Op& forward, const Op& backward);
  Program program_;
  TensorStore& store_;
  bool writes_parameters_ = false;  // an op of the program writes a parameter (AdamW)
  Buffer arena_;
  size_t live_peak_ = 0;
  std::vector<void*> ptrs_;
};

}  // namespace ptl::cpu
