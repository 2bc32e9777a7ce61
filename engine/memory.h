#pragma once
// Memory limits stated before they bite: how many bytes a training program needs, how many this
// process can still get (the machine's available memory natively; the heap's maximum in
// WebAssembly: 4 GiB in wasm32), and a refusal, before anything is allocated, that names both.
#include <cstdint>
#include <string>

#include "engine/config.h"
#include "engine/model.h"

namespace ptl {

struct TrainingMemory {
  int64_t weights = 0, optimizer = 0;  // bytes held for the whole run (with other state)
  int64_t gradients = 0;               // the parameters' gradients (inside the arena)
  int64_t arena = 0;                   // the rest, activations and gradients, memory shared by liveness
  int64_t activations = 0;             // the activations' own sum, as if nothing shared memory
  int64_t total() const { return weights + optimizer + arena; }
};

// The bytes of the training program as the CPU backend lays it out: the persistent tensors
// (weights, AdamW moments) and the arena of everything else.
TrainingMemory training_memory(const ModelConfig& model, const BuildOptions& options, const TrainConfig& train);

// Bytes this process can still allocate: natively the smaller of the machine's available memory
// (/proc/meminfo's MemAvailable) and the address-space limit (RLIMIT_AS); in WebAssembly the
// heap's maximum less what is in use. -1 where it cannot be known.
int64_t allocatable_bytes();

// Throws ptl::Error when `need` bytes (more than `already` of which are held) will not fit:
// "<what> needs X GiB (...); this machine has Y GiB available" with what to change.
void check_training_fits(const ModelConfig& model, const BuildOptions& options, const TrainConfig& train,
                         int64_t already_held_bytes = 0);

std::string format_bytes(int64_t bytes);  // "1.7 GiB", "850.0 MiB"

}  // namespace ptl
