#include "cli/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace ptl::cli {

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_duration(double s) {
  char buf[32];
  if (s < 0 || s != s) return "?";
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

Progress::Progress(int64_t first_step, int64_t total_steps, int64_t plain_every)
    : first_(first_step),
      total_(total_steps),
      plain_every_(plain_every > 0 ? plain_every : 1),
      tty_(isatty(fileno(stdout))),
      start_(now_s()) {}

void Progress::update(int64_t step, double loss, double tokens_per_s, double lr, const std::string& extra) {
  const double elapsed = now_s() - start_;
  const int64_t done = step - first_;
  const double eta = done > 0 ? elapsed / double(done) * double(total_ - step) : -1;
  char line[256];
  if (tty_) {
    const int width = 24;
    const int filled = int(double(step) / double(total_) * width);
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::snprintf(line, sizeof line, "\r[%s] %lld/%lld | loss %.4f | %.0f tok/s | lr %.2e | ETA %s%s\033[K",
                  bar.c_str(), (long long)step, (long long)total_, loss, tokens_per_s, lr, format_duration(eta).c_str(),
                  extra.c_str());
    std::fputs(line, stdout);
    std::fflush(stdout);
    bar_visible_ = true;
  } else if (step % plain_every_ == 0 || step == total_ || step == first_ + 1) {
    std::snprintf(line, sizeof line, "step %lld/%lld | loss %.4f | %.0f tok/s | lr %.2e | elapsed %s | ETA %s%s\n",
                  (long long)step, (long long)total_, loss, tokens_per_s, lr, format_duration(elapsed).c_str(),
                  format_duration(eta).c_str(), extra.c_str());
    std::fputs(line, stdout);
    std::fflush(stdout);
  }
}

void Progress::message(const std::string& text) {
  if (tty_ && bar_visible_) std::fputs("\r\033[K", stdout);
  std::fwrite(text.data(), 1, text.size(), stdout);  // all of it, even past a NUL byte
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  bar_visible_ = false;
}

void Progress::finish() {
  if (tty_ && bar_visible_) std::fputc('\n', stdout);
  std::fflush(stdout);
  bar_visible_ = false;
}

}  // namespace ptl::cli
