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

inline void check(bool ok, const std::string& message) {
  if (!ok) fail(message);
}

}  // namespace ptl
