#pragma once
#include "engine/program.h"

namespace ptl {

// Appends the backward pass of `program`'s ops for d(loss)/d(every trainable parameter).
// Gradients are named "grad.<tensor>" (kind gradient). Frozen parameters get none.
void append_backward(Program& program, int loss_id);

}  // namespace ptl
