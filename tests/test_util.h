#pragma once
// Helpers shared by the C++ tests.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/data.h"
#include "engine/dropout.h"
#include "engine/error.h"
#include "engine/trainer.h"

namespace ptl::test {

// The build folder (where `ptl` is) and the checkout, found from the running test binary
// (<build>/tests/ptl_tests) rather than compiled in: the test objects then do not depend on the
// folder the checkout is in, and the compiler cache serves any clone of it (CMakeLists.txt).
// PTL_SOURCE_FROM_BINARY is the checkout relative to the build folder ("..").
inline std::filesystem::path binary_dir() {
  return std::filesystem::canonical("/proc/self/exe").parent_path().parent_path();
}
inline std::filesystem::path source_dir() { return (binary_dir() / PTL_SOURCE_FROM_BINARY).lexically_normal(); }
// The `ptl` binary beside the tests, quoted for a shell command line.
inline std::string ptl_command() { return "'" + (binary_dir() / "ptl").string() + "'"; }

// A fresh empty folder under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("ptl-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // The names of the folder's entries (what a failed write must not leave behind).
  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path)) names.insert(e.path().filename().string());
    return names;
  }
};

// English-like text of n bytes, deterministic, so tests need no corpus file.
inline std::string synthetic_text(size_t n, unsigned seed = 7) {
  static const char* words[] = {"the ", "king ",  "and ", "queen ", "of ",   "a ",   "house ", "shall ", "speak ",
                                "to ",  "thee, ", "my ",  "lord. ", "what ", "say ", "you? ",  "\n"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) s += words[rng() % (sizeof(words) / sizeof(*words))];
  s.resize(n);
  return s;
}

// Words of one to three made-up syllables, deterministic: enough distinct pairs for a BPE
// tokenizer of a few hundred tokens (synthetic_text's 17 words run out of merges early).
inline std::string syllable_text(size_t n, unsigned seed = 7) {
  static const char* syl[] = {"ka", "to", "ri", "men", "sa", "lo", "ve", "dun", "pi", "ra", "tha", "mo", "el", "qui"};
  static const char* sep[] = {" ", " ", " ", " ", ", ", ". ", "\n"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) {
    for (int k = 1 + int(rng() % 3); k > 0; --k) s += syl[rng() % (sizeof syl / sizeof *syl)];
    s += sep[rng() % (sizeof sep / sizeof *sep)];
  }
  s.resize(n);
  return s;
}

// Running the `ptl` binary as a user would, in a folder, capturing what it prints.
struct CliRun {
  int code;  // exit status; 128 + signal if it crashed
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline CliRun ptl_cli(const std::string& args, const TempDir& dir) {
  const std::string cmd =
      "cd '" + dir.path.string() + "' && " + ptl_command() + " " + args + " > stdout.txt 2> stderr.txt";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(dir.file("stdout.txt"));
  r.err = slurp(dir.file("stderr.txt"));
  return r;
}

inline void write(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }

// The lines of a JSON-lines file (metrics.jsonl), parsed.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The message of the ptl::Error that f() throws ("(no error)" when it returns).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A clean failure: exit code 1, one line on stderr naming the problem, no crash.
inline void expect_error(const CliRun& r, const std::string& phrase) {
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

inline TrainConfig train_config(int batch, uint64_t seed = 42) {
  TrainConfig tc;
  tc.batch = batch;
  tc.seed = seed;
  tc.steps = 100;
  return tc;
}

// Random token ids and targets (no corpus needed).
inline Batch random_batch(int B, int T, uint64_t seed) {
  Rng rng(seed);
  Batch b{B, T, std::vector<int32_t>(size_t(B) * T), std::vector<int32_t>(size_t(B) * T)};
  for (auto& t : b.inputs) t = int32_t(rng.below(256));
  for (auto& t : b.targets) t = int32_t(rng.below(256));
  return b;
}

// The Tiny preset's model (2 layers, d 48, 3 heads, ctx 32): the tests' default shape.
inline ModelConfig tiny() { return find_preset("tiny").model; }

// Runs the training program with learning rate 0 at step `step`: the gradients are computed, the
// weights stay put. A program with dropout draws the masks of that step, as Trainer::train_step does.
inline void compute_gradients(Trainer& tr, const Batch& b, uint32_t step = 1) {
  cpu::Executor& ex = tr.train_executor();
  std::memcpy(ex.i32("tokens"), b.inputs.data(), b.inputs.size() * 4);
  std::memcpy(ex.i32("targets"), b.targets.data(), b.targets.size() * 4);
  ex.f32("optim.hparams")[0] = 0.0f;
  ex.f32("optim.hparams")[1] = float(step);
  if (ex.program().find("dropout.seed") >= 0) {
    ex.i32("dropout.seed")[0] = int32_t(dropout::key_of(tr.train_config().seed));
    ex.i32("dropout.seed")[1] = int32_t(step);
  }
  ex.run();
}

// The logits [B*T, V] of a batch, copied out of the trainer's buffer.
inline std::vector<float> logits_of(Trainer& tr, const Batch& b) {
  const float* l = tr.logits(b);
  return std::vector<float>(l, l + size_t(b.batch) * b.seq * tr.model_config().vocab_size);
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace ptl::test
