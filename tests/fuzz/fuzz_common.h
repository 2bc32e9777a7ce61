#pragma once
// What the fuzz targets share: the smallest valid model (its checkpoint is the base the adapter
// seeds were trained on, so the fuzzer can reach Trainer::load_adapter past the sha256 check), and
// the rule that a rejected input is a ptl::Error and nothing else.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/backends/cpu/thread_pool.h"
#include "engine/checkpoint.h"
#include "engine/trainer.h"

namespace ptl::fuzz {

// Smallest model the validation accepts: vocab 256 (the byte tokenizer), one layer, d 4, ctx 4.
inline ModelConfig tiny_model() { return ModelConfig{256, 1, 4, 1, 4}; }

inline TrainConfig tiny_train() {
  TrainConfig tc;
  tc.batch = 2;
  tc.steps = 10;
  tc.seed = 7;
  return tc;
}

// The base checkpoint: the tiny model after one training step (so with AdamW moments), weights
// and metadata deterministic (elapsed time zeroed), so its sha256 is the same in every process.
inline std::vector<uint8_t> base_checkpoint(bool with_optimizer = true) {
  cpu::set_num_threads(1);
  Trainer t(tiny_model(), tiny_train());
  t.set_corpus("First Citizen: Before we proceed any further, hear me speak.\n", "seed", 0.5);
  t.train_step();
  t.add_elapsed(-t.state().elapsed_seconds);
  return t.save_checkpoint(with_optimizer);
}

// A finding the sanitizers cannot see (a wrong round trip): print it and abort, so libFuzzer
// keeps the input.
[[noreturn]] inline void fail_property(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace ptl::fuzz
