#include "engine/backends/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PTL_CPU_RELAX() _mm_pause()
#else
#define PTL_CPU_RELAX() ((void)0)
#endif

// WebAssembly without -pthread has no threads at all: the pool is then always one thread.
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
#define PTL_NO_THREADS 1
#endif

namespace ptl::cpu {

namespace {

thread_local bool t_in_task = false;

// How long an idle worker spins before it parks. Ops follow each other within microseconds
// during a training step, so a short spin keeps the workers hot without a futex wake-up per op;
// between steps (data loading, logging) they go to sleep.
constexpr auto kSpin = std::chrono::microseconds(300);

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads), slots_(new Slot[size_t(threads)]) {
    for (int i = 1; i < threads_; i++) workers_.emplace_back([this, i] { worker_loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      generation_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  void run(int64_t n, void (*fn)(void*, int64_t), void* ctx) {
    // Publish the job: its fields first, then open it, then wake the workers with a new
    // generation. A worker may join whenever the job is open: the fields are complete by then,
    // and run() waits for every worker that joined before it returns.
    fn_ = fn;
    ctx_ = ctx;
    // Thread k owns the k-th contiguous share of the tasks. Kernels number their tasks along
    // rows, so the rows a thread writes in one op are the rows it reads in the next, and stay
    // in its own L1/L2 instead of crossing to another core's cache (for a memory-bound op, a
    // crossing costs more than the op's arithmetic). A thread that finishes its share takes
    // tasks from the others' (a late or descheduled worker does not stall the op).
    for (int k = 0; k < threads_; k++) {
      slots_[k].next.store(n * k / threads_, std::memory_order_relaxed);
      slots_[k].end = n * (k + 1) / threads_;
    }
    open_.store(true, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      // A worker that went to sleep either saw the new generation before waiting or is
      // inside cv_.wait: taking the lock orders us after its check, so this wakes it.
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
    work(0);
    // Every task has been claimed. Close the job, so a worker that is only now waking up (or
    // was descheduled by another process on a busy machine) does not join it, and wait only
    // for the workers inside it to finish their last task. The job's fields stay valid until
    // then, and the next job cannot be confused with this one.
    open_.store(false, std::memory_order_seq_cst);
    for (int spins = 0; active_.load(std::memory_order_seq_cst) != 0; spins++) {
      if (spins < 4096)
        PTL_CPU_RELAX();
      else
        std::this_thread::yield();
    }
  }

 private:
  // Thread `self` runs its own share first, then helps the others, each from its front.
  void work(int self) {
    t_in_task = true;
    for (int d = 0; d < threads_; d++) {
      Slot& s = slots_[(self + d) % threads_];
      for (int64_t i; (i = s.next.fetch_add(1, std::memory_order_relaxed)) < s.end;) fn_(ctx_, i);
    }
    t_in_task = false;
  }

  void worker_loop(int self) {
    // Generation 0 is the pool's state at construction: a job may already be posted by the time
    // this thread starts, and it must not mistake that job for the one it has seen.
    uint64_t seen = 0;
    for (;;) {
      // Spin for a while, then sleep until the generation changes.
      auto start = std::chrono::steady_clock::now();
      for (int spins = 0; generation_.load(std::memory_order_acquire) == seen; spins++) {
        // Pause-spin first; after a few microseconds yield instead, so that on a machine with
        // more runnable threads than cores (a shared build machine) the thread that does have
        // work, often our own caller, gets the core.
        if (spins < 2048)
          PTL_CPU_RELAX();
        else
          std::this_thread::yield();
        if ((spins & 255) == 255 && std::chrono::steady_clock::now() - start > kSpin) {
          std::unique_lock<std::mutex> lock(mu_);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          cv_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != seen; });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          break;
        }
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      // Join the job only while it is open (see run()): announce ourselves first, then check,
      // so that run() either sees us in active_ or we see the job closed.
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (open_.load(std::memory_order_seq_cst)) work(self);
      active_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  // One thread's share of the current job: tasks [next, end). On its own cache line, since
  // every claim writes it.
  struct alignas(64) Slot {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };

  const int threads_;
  std::unique_ptr<Slot[]> slots_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> open_{false};
  bool stop_ = false;
  void (*fn_)(void*, int64_t) = nullptr;
  void* ctx_ = nullptr;
};

std::mutex g_config_mu;
std::unique_ptr<Pool> g_pool;
std::atomic<int> g_threads{0};  // 0 = not decided yet

int clamp_threads(int n) {
#ifdef PTL_NO_THREADS
  (void)n;
  return 1;
#else
  return std::clamp(n, 1, 256);
#endif
}

Pool* pool() {
  if (g_threads.load(std::memory_order_acquire) == 0) set_num_threads(0);
  return g_pool.get();
}

}  // namespace

int default_num_threads() {
  if (const char* env = std::getenv("PTL_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0) return clamp_threads(int(n));
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return clamp_threads(hw ? int(hw) : 1);
}

void set_num_threads(int n) {
  std::lock_guard<std::mutex> lock(g_config_mu);
  n = n <= 0 ? default_num_threads() : clamp_threads(n);
  if (g_pool && g_pool->threads() == n) return;
  g_pool.reset();
  if (n > 1) g_pool = std::make_unique<Pool>(n);
  g_threads.store(n, std::memory_order_release);
}

int num_threads() {
  const int n = g_threads.load(std::memory_order_acquire);
  if (n) return n;
  set_num_threads(0);
  return g_threads.load(std::memory_order_acquire);
}

int64_t grain_for(int64_t n, int64_t cost) {
  const int64_t threads = num_threads();
  if (threads == 1 || n <= 1) return std::max<int64_t>(n, 1);
  const int64_t min_items = std::max<int64_t>(1, 16384 / std::max<int64_t>(cost, 1));
  // As many tasks as fit at about min_items each, at most 4 per thread, and when there are
  // fewer than that, a whole number per thread: 3 equal tasks on 2 threads keep one thread idle
  // for a third of the op (Tiny's residual adds, 24k floats: 3 tasks of 8k).
  int64_t tasks = std::min(4 * threads, (n + min_items / 2) / min_items);
  if (tasks > threads) tasks -= tasks % threads;
  tasks = std::max<int64_t>(tasks, 1);
  return (n + tasks - 1) / tasks;
}

namespace detail {

bool inside_pool_task() { return t_in_task; }

void run_tasks(int64_t n, void (*fn)(void*, int64_t), void* ctx) {
  // The pool runs one job at a time. A second thread calling in while a job runs (two models
  // trained from two threads of the host) runs its tasks itself instead of waiting.
  static std::mutex busy;
  Pool* p = pool();
  std::unique_lock<std::mutex> lock(busy, std::try_to_lock);
  if (!p || !lock.owns_lock()) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  p->run(n, fn, ctx);
}

}  // namespace detail

}  // namespace ptl::cpu
