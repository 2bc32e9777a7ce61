// A memory-bandwidth load for a benchmark's other core (see bench/under_memory_load): copies
// between two buffers far larger than the caches, back and forth, until it gets SIGTERM, then
// prints the bandwidth it moved on stderr.
//
// On a shared machine the host's other tenants can take memory and L3 bandwidth
// at times, with little to show for it inside the VM (a few % of steal time, the cores' FMA
// throughput unchanged), and the products that move more bytes per multiply-add then slow down
// more than their peers. Running this on the second core while a 1-thread benchmark runs on the
// first approximates that state on demand: on a 2-core Zen 5 it brought the 2048^3 products from
// 0.85-0.91 to 0.74-0.76 of OpenBLAS in one of three tries.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
std::atomic<bool> g_stop{false};
void on_term(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 128;
  if (mib == 0) {
    std::fprintf(stderr, "memory_load: usage: memory_load [MiB per buffer, default 128]\n");
    return 2;
  }
  const size_t n = mib << 20;
  std::vector<char> a(n, 1), b(n, 2);
  std::signal(SIGTERM, on_term);
  std::signal(SIGINT, on_term);
  const auto t0 = std::chrono::steady_clock::now();
  size_t copies = 0;
  while (!g_stop) {
    std::memcpy(b.data(), a.data(), n);
    std::memcpy(a.data(), b.data(), n);
    copies += 2;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A copy reads n bytes and writes n bytes.
  std::fprintf(stderr, "memory_load: %.1f GB/s copied (read + write) over %.1f s\n", 2.0 * double(copies * n) / s / 1e9,
               s);
  return 0;
}
