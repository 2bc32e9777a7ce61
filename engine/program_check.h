#pragma once
// What every op of a program needs of its tensors, checked before any kernel runs.
//
// The CPU kernels take raw pointers and element counts that the executor derives from the
// tensors' shapes (linear's K from x, its N from W, attention's B, T and C from q), so a
// program whose shapes disagree would make them read or write past a buffer. Programs built by
// the engine agree by construction; a program read from a file (`ptl_program_run`, the
// WebAssembly API's ptl_run_program) is data from anywhere, so Program::from_json runs this
// check and a bad program is a ptl::Error naming the op, the tensor and the shapes.
// What only the values can tell (token ids, positions) the executor checks at run time.
#include "engine/program.h"

namespace ptl {

// Throws ptl::Error for the first op whose inputs, outputs, dtypes, shapes or attributes
// are not what its kernel reads and writes.
void check_program(const Program& program);

}  // namespace ptl
