#include "engine/program_run.h"

#include <cstring>

#include "engine/error.h"

namespace ptl {

int load_tensors(cpu::Executor& ex, const SafeTensors& file, bool require_all) {
  const Program& p = ex.program();
  int n = 0;
  for (const auto& t : file.tensors) {
    const int id = p.find(t.name);
    if (id < 0) {
      check(!require_all, "tensor '" + t.name + "' is not in the program");
      continue;
    }
    check(p.tensor(id).numel() == t.numel(), "tensor '" + t.name + "' has " + std::to_string(t.numel()) +
                                                 " elements but the program's has " +
                                                 std::to_string(p.tensor(id).numel()));
    std::memcpy(ex.data(id), t.data.data(), t.data.size());
    ++n;
  }
  return n;
}

SafeTensors collect_tensors(cpu::Executor& ex, bool persistent_only) {
  SafeTensors out;
  const Program& p = ex.program();
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const auto& t = p.tensors[i];
    if (persistent_only && !t.persistent()) continue;
    out.add(t.name, t.dtype, t.shape, ex.data(int(i)));
  }
  return out;
}

SafeTensors run_program_once(const Program& program, const SafeTensors& inputs) {
  cpu::TensorStore store;
  cpu::Executor ex(program, store, /*share_memory=*/false);
  load_tensors(ex, inputs, true);
  ex.run();
  return collect_tensors(ex, false);
}

}  // namespace ptl
