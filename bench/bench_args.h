// Command-line options of the C++ bench programs: "--name value" pairs from a known set. A name
// that is not known, a name without its value, or a count that is not a positive whole number
// stops the program with a message (exit 2) before anything is measured, so that a typo never
// turns into a silent run with the defaults.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

inline std::map<std::string, std::string> bench_options(int argc, char** argv, const std::set<std::string>& known,
                                                        const char* usage) {
  std::map<std::string, std::string> out;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      std::printf("%s\n", usage);
      std::exit(0);
    }
    if (!known.count(k) || i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s %s\nusage: %s\n", argv[0], k.c_str(),
                   known.count(k) ? "needs a value" : "is not an option", usage);
      std::exit(2);
    }
    out[k] = argv[i + 1];
  }
  return out;
}

// A positive whole number from an option, or exit 2 naming it.
inline int bench_count(const std::map<std::string, std::string>& o, const std::string& name, int fallback) {
  auto it = o.find(name);
  if (it == o.end()) return fallback;
  char* end = nullptr;
  const long v = std::strtol(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || *end != '\0' || v < 1) {
    std::fprintf(stderr, "%s must be a whole number of at least 1, got '%s'\n", name.c_str(), it->second.c_str());
    std::exit(2);
  }
  return int(v);
}
