#pragma once
// Helpers shared by the C++ tests.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

namespace ptl::test {

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
};

// English-like text of n bytes, deterministic, so tests need no corpus file.
inline std::string synthetic_text(size_t n, unsigned seed = 7) {
  static const char* words[] = {"the ", "king ", "and ", "queen ", "of ", "a ", "house ", "shall ", "speak ", "to ",
                                "thee, ", "my ", "lord. ", "what ", "say ", "you? ", "\n"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) s += words[rng() % (sizeof(words) / sizeof(*words))];
  s.resize(n);
  return s;
}

}  // namespace ptl::test
