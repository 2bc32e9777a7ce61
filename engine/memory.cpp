#include "engine/memory.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/error.h"
#include "engine/program.h"

#if defined(__EMSCRIPTEN__)
#include <emscripten/heap.h>
#include <malloc.h>
#elif defined(__linux__)
#include <sys/resource.h>
#endif

namespace ptl {

TrainingMemory training_memory(const ModelConfig& model, const BuildOptions& options, const TrainConfig& train) {
  const Program p = build_train_program(model, options, train);  // shapes only: nothing allocated
  TrainingMemory m;
  for (const auto& t : p.tensors) {
    if (t.kind == TensorKind::parameter)
      m.weights += t.bytes();
    else if (t.persistent())
      m.optimizer += t.bytes();
    else if (t.name.starts_with("grad.") && p.find(t.name.substr(5)) >= 0 &&
             p.tensor(p.find(t.name.substr(5))).kind == TensorKind::parameter)
      m.gradients += t.bytes();
    else
      m.activations += t.bytes();
  }
  m.arena = int64_t(cpu::arena_bytes_of(p));
  return m;
}

int64_t allocatable_bytes() {
#if defined(__EMSCRIPTEN__)
  // The heap can grow to its maximum; what malloc already hands out is taken.
  const int64_t max = int64_t(emscripten_get_heap_max());
  const int64_t used = int64_t(mallinfo().uordblks);
  return max > used ? max - used : 0;
#elif defined(__linux__)
  int64_t avail = -1;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.starts_with("MemAvailable:")) {
      std::istringstream in(line.substr(13));
      int64_t kib = 0;
      if (in >> kib) avail = kib * 1024;
      break;
    }
  }
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const int64_t limit = int64_t(as.rlim_cur);
    avail = avail < 0 ? limit : std::min(avail, limit);
  }
  return avail;
#else
  return -1;
#endif
}

std::string format_bytes(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(int64_t(1) << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

void check_training_fits(const ModelConfig& model, const BuildOptions& options, const TrainConfig& train,
                         int64_t already_held_bytes) {
  const int64_t avail = allocatable_bytes();
  if (avail < 0) return;
  const TrainingMemory m = training_memory(model, options, train);
  const int64_t need = m.total() - already_held_bytes;
  if (need <= avail) return;
#if defined(__EMSCRIPTEN__)
  const std::string where = "this WebAssembly memory can grow by " + format_bytes(avail) +
                            (sizeof(void*) == 4 ? " (wasm32 addresses 4 GiB at most; the Memory64 build more)" : "");
#else
  const std::string where = "this machine has " + format_bytes(avail) + " available";
#endif
  throw Error("training this model at batch " + std::to_string(options.batch) + " needs " + format_bytes(m.total()) +
              " (weights " + format_bytes(m.weights) + ", AdamW moments " + format_bytes(m.optimizer) +
              ", activations and gradients " + format_bytes(m.arena) + "); " + where +
              ": use a smaller batch, context or preset");
}

}  // namespace ptl
