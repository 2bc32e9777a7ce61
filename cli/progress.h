#pragma once
// The live progress line of long jobs: a bar with ETA when stdout is a terminal, plain lines
// (one every `plain_every` steps) when it is a file or a pipe.
#include <cstdint>
#include <string>

namespace ptl::cli {

class Progress {
 public:
  Progress(int64_t first_step, int64_t total_steps, int64_t plain_every);
  // Redraw (terminal) or print a line (pipe) for a completed step.
  void update(int64_t step, double loss, double tokens_per_s, double lr, const std::string& extra = "");
  // Print a whole line (e.g. validation results) without breaking the bar.
  void message(const std::string& line);
  void finish();
  bool interactive() const { return tty_; }

 private:
  int64_t first_, total_, plain_every_;
  bool tty_;
  double start_;
  bool bar_visible_ = false;
};

std::string format_duration(double seconds);

}  // namespace ptl::cli
