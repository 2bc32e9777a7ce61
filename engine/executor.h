#pragma once
// What the engine needs from a backend that runs its programs: run the program, and move a
// tensor's bytes in and out by name. The CPU backend (cpu::Executor) implements it; the
// training step (Trainer::train_step) drives its executor only through it. An executor outside
// this process (WebGPU, run from JavaScript) attaches through the same operations, exposed by
// the WebAssembly API: the engine supplies the inputs (the batch, the learning rate), reads the
// results (loss, gradient norm) and syncs the state tensor by tensor (Trainer::read_tensor,
// write_tensor).
#include <cstddef>
#include <string>

#include "engine/error.h"
#include "engine/program.h"

namespace ptl {

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const Program& program() const = 0;
  // Runs every op of the program once, in order.
  virtual void run() = 0;
  // Copies `bytes` bytes into / out of the program's tensor `name` (bytes <= the tensor's size).
  virtual void write(const std::string& name, const void* src, size_t bytes) = 0;
  virtual void read(const std::string& name, void* dst, size_t bytes) = 0;

  // A scalar result ("loss", "grad_norm").
  float read_f32(const std::string& name) {
    float v = 0;
    read(name, &v, sizeof v);
    return v;
  }

 protected:
  // Throws unless `bytes` fits tensor `name` of the program; returns its id.
  int checked_id(const std::string& name, size_t bytes) const {
    const int id = program().id(name);
    check(bytes <= size_t(program().tensor(id).bytes()), "tensor '" + name + "' holds " +
                                                             std::to_string(program().tensor(id).bytes()) +
                                                             " bytes, not " + std::to_string(bytes));
    return id;
  }
};

}  // namespace ptl
