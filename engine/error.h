#pragma once
// One exception type for everything a user can get wrong (bad file, bad config, bad data).
// Its message is a single line that names the problem; the CLI prints it and exits non-zero,
// the WebAssembly API hands it to JavaScript as the exception's message.
#include <stdexcept>
#include <string>

namespace ptl {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& message) { throw Error(message); }

// The message is built before the call, whatever `ok` is: a literal costs nothing here (this
// overload), but a message with std::to_string() in it allocates every time. Inside a loop over
// data, test first and build the message only in the branch that fails (as the embedding and
// cross-entropy ops in backends/cpu/cpu_backend.cpp do): an allocation for every token that is
// fine is a visible part of a small model's step.
inline void check(bool ok, const char* message) {
  if (!ok) fail(message);
}
inline void check(bool ok, const std::string& message) {
  if (!ok) fail(message);
}

}  // namespace ptl
