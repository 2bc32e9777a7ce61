#pragma once
// Running a serialised program once on the CPU backend with given tensor values: the reference
// that another executor (the WebGPU kernels of web/webgpu) is compared against, natively
// (`ptl_program_run kernel`, tests/parity/program_run.cpp) and in the browser (the WebAssembly
// API's ptl_run_program). One implementation, so both references are the same code.
#include "engine/backends/cpu/cpu_backend.h"
#include "engine/program.h"
#include "engine/safetensors.h"

namespace ptl {

// Copies each tensor of `file` that the program has into the executor (it must have the same
// element count as the program's); returns how many. With require_all, a tensor the program
// lacks is an error (a typo would otherwise be silently ignored).
int load_tensors(cpu::Executor& ex, const SafeTensors& file, bool require_all);

// The current value of every tensor of the executor's program (or of its persistent ones).
SafeTensors collect_tensors(cpu::Executor& ex, bool persistent_only);

// Runs `program` once: every tensor named in `inputs` is copied in first, outputs included
// (their initial value matters for ops with acc<i> = 1), then the result holds every tensor of
// the program after the run. Tensors do not share memory here, so each one keeps the value its
// op wrote even in a program of several ops.
SafeTensors run_program_once(const Program& program, const SafeTensors& inputs);

}  // namespace ptl
