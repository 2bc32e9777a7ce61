// ptl bench: training-step speed of the presets on this machine.
//
// For each preset: a fresh model at the preset's batch size, `--warmup` untimed steps, then
// `--steps` timed steps on one fixed random batch; ms/step is the median. Each preset runs in
// a child process (this same executable, `bench --child`), so the peak resident memory of one
// preset is not mixed with another's.
//
// The presets' shape can be overridden (--layers, --d-model, --heads, --ctx, --vocab, --gelu,
// --batch), a step can train rows shorter than the context (--seq: GPT-2 124M at B 4 x T 64 keeps
// its 1024 positions), and LoRA adapters can be trained on the frozen base (--lora-rank). With
// --generate N the measurement is KV-cache generation instead: a random prompt of --prompt tokens
// run through the generate program (its time is reported apart, as prefill_ms), then N greedy
// tokens one by one, timed each; tokens_per_s = N / their total time.
//
// FLOPs are counted exactly per op of the training program (matrix products only, 2 per
// multiply-add): linear 2MNK forward, 2MNK for each of dx and dW backward; causal attention
// 4 * hs * T(T+1)/2 per (batch, head) forward (q k^T and p v) and 8 * ... backward (dv, dp, dq,
// dk; the backward's recomputation of q k^T is not counted, as in "model FLOPs"); the tied output
// projection inside cross_entropy_tied 2 * tokens * V * d forward and twice that backward (dx, dW;
// its recomputation of the logits is not counted either). Element-wise
// ops (LayerNorm, GELU, softmax, AdamW) are not counted. MFU = achieved / peak, with the peak
// measured as this engine's own best matmul (linear_forward) at 2048^3 with the same threads,
// or given with --peak-gflops.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/error.h"
#include "engine/lora.h"
#include "engine/model.h"
#include "engine/trainer.h"

extern char** environ;

namespace ptl::cli {

namespace {

struct BenchArgs {
  std::string presets = "tiny,small,medium,large,xl,huge,massive";
  int steps = 10, warmup = 3, threads = 0, vocab = 0;
  // Overrides of the presets' shape (0 / empty: the preset's).
  int batch = 0, seq = 0, layers = 0, d_model = 0, heads = 0, ctx = 0;
  std::string gelu;
  int lora_rank = 0;  // 0: train every parameter
  double lora_alpha = 8;
  std::string lora_targets = "all";
  int generate = 0, prompt = 64;  // generate > 0: time KV-cache generation instead of training
  bool ops = false, json = false, child = false, no_isolate = false;
  double peak_gflops = 0;
};

// The preset with the shape overrides applied (validated: a bad shape fails naming the field).
Preset shaped_preset(const BenchArgs& a, const std::string& name) {
  Preset p = find_preset(name);
  ModelConfig& m = p.model;
  if (a.vocab > 0) m.vocab_size = a.vocab;
  if (a.layers > 0) m.n_layers = a.layers;
  if (a.d_model > 0) m.d_model = a.d_model;
  if (a.heads > 0) m.n_heads = a.heads;
  if (a.ctx > 0) m.ctx = a.ctx;
  if (!a.gelu.empty()) m.gelu = a.gelu;
  if (a.batch > 0) p.batch = a.batch;
  m.validate();
  return p;
}

// The tokens of a training row (--seq, default the context); with --generate, the prompt and the
// tokens generated must fit the context (past it the engine recomputes the whole window per
// token, which is not the KV cache's speed).
int row_tokens(const BenchArgs& a, const ModelConfig& m) {
  if (a.generate > 0)
    check(a.prompt + a.generate <= m.ctx, "bench: --prompt " + std::to_string(a.prompt) + " plus --generate " +
                                              std::to_string(a.generate) + " tokens must fit the context of " +
                                              std::to_string(m.ctx));
  const int T = a.seq > 0 ? a.seq : m.ctx;
  check(T <= m.ctx, "bench: --seq " + std::to_string(T) + " exceeds the context of " + std::to_string(m.ctx));
  return T;
}

LoraConfig bench_lora(const BenchArgs& a) {
  LoraConfig lora;
  lora.rank = a.lora_rank;
  lora.alpha = a.lora_alpha;
  lora.targets = parse_lora_targets(a.lora_targets);
  if (lora.enabled()) validate_lora(lora);
  return lora;
}

// What every line says about the model measured.
nlohmann::json model_fields(const Preset& p, const LoraConfig& lora) {
  nlohmann::json j = {{"preset", p.name},           {"threads", cpu::num_threads()}, {"vocab", p.model.vocab_size},
                      {"layers", p.model.n_layers}, {"d_model", p.model.d_model},    {"heads", p.model.n_heads},
                      {"ctx", p.model.ctx},         {"gelu", p.model.gelu},          {"params", p.model.param_count()},
                      {"lora_rank", lora.rank}};
  if (lora.enabled()) {
    j["lora_alpha"] = lora.alpha;
    j["lora_targets"] = lora_targets_string(lora.targets);
    j["trainable_params"] = [&] {
      int64_t n = 0;
      for (const auto& t : adapter_tensors(p.model, lora)) n += t.numel();
      return n;
    }();
  }
  return j;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of this process so far (all threads, user + system).
double cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// The processor, as /proc/cpuinfo describes it. Its model name alone can hide which CPU this
// is (a virtual machine may report "AMD EPYC" on a Zen 4 and on a Zen 5, whose AVX-512 differs 2x
// in speed), so the family and model numbers go with it. Empty where there is no /proc/cpuinfo.
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string name, family, model;
  // The first processor's block: "key<tabs>: value" lines up to the first blank one.
  for (std::string line; std::getline(in, line) && !line.empty();) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name")
      name = value;
    else if (key == "cpu family")
      family = value;
    else if (key == "model")
      model = value;
  }
  if (name.empty()) return "";
  return family.empty() ? name : name + " (family " + family + ", model " + model + ")";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Matrix-product FLOPs of one run of a program (see the top of this file).
double program_flops(const Program& p) {
  auto numel = [&](int id) { return double(p.tensor(id).numel()); };
  double f = 0;
  for (const Op& op : p.ops) {
    switch (op.kind) {
      case OpKind::linear: {
        const double K = double(p.tensor(op.inputs[0]).shape.back()), M = numel(op.inputs[0]) / K;
        const double N = double(p.tensor(op.inputs[1]).shape[0]);
        f += 2 * M * N * K;
        break;
      }
      case OpKind::linear_backward: {
        const double K = double(p.tensor(op.inputs[1]).shape.back()), M = numel(op.inputs[1]) / K;
        const double N = double(p.tensor(op.inputs[2]).shape[0]);
        f += 2 * M * N * K * ((op.outputs[0] >= 0) + (op.outputs[1] >= 0));
        break;
      }
      case OpKind::attention:
      case OpKind::attention_backward: {
        const auto& s = p.tensor(op.inputs[op.kind == OpKind::attention ? 0 : 1]).shape;
        const double B = double(s[0]), T = double(s[1]), C = double(s[2]);
        const double pairs = B * C * T * (T + 1) / 2;  // (query, key) pairs times head dims, all heads
        f += (op.kind == OpKind::attention ? 4 : 8) * pairs;
        break;
      }
      case OpKind::cross_entropy_tied:
      case OpKind::cross_entropy_tied_backward: {
        const double C = double(p.tensor(op.inputs[0]).shape.back()), M = numel(op.inputs[0]) / C;
        const double V = double(p.tensor(op.inputs[1]).shape[0]);
        f += 2 * M * V * C * (op.kind == OpKind::cross_entropy_tied ? 1 : (op.outputs[0] >= 0) + (op.outputs[1] >= 0));
        break;
      }
      default:
        break;
    }
  }
  return f;
}

int64_t status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.starts_with(key)) return std::stoll(line.substr(std::string(key).size()));
  return -1;
}

// The best of a few 2048^3 products with this engine's matmul (GFLOP/s).
double measure_peak() {
  const int64_t n = 2048;
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n));
  for (int64_t i = 0; i < n * n; i++) {
    a[size_t(i)] = float((i * 7) % 13) * 0.01f;
    b[size_t(i)] = float((i * 5) % 11) * 0.01f;
  }
  double best = 1e30;
  cpu::linear_forward(c.data(), a.data(), b.data(), nullptr, n, n, n);  // warm-up
  for (int r = 0; r < 3; r++) {
    const double t0 = now_s();
    cpu::linear_forward(c.data(), a.data(), b.data(), nullptr, n, n, n);
    best = std::min(best, now_s() - t0);
  }
  return 2.0 * n * n * n / best / 1e9;
}

// One preset in this process: returns its JSON object.
// KV-cache generation of one model in this process: returns its JSON object.
nlohmann::json bench_generate(const BenchArgs& a, const std::string& name) {
  const Preset preset = shaped_preset(a, name);
  const LoraConfig lora = bench_lora(a);
  const int P = a.prompt, N = a.generate;
  row_tokens(a, preset.model);
  const double base_rss_mib = double(status_kib("VmRSS:")) / 1024.0;
  TrainConfig tc;
  tc.batch = 1;
  Trainer trainer(preset.model, tc);
  if (lora.enabled()) trainer.enable_lora(lora, 1);
  Rng rng(42);
  std::vector<int32_t> prompt(static_cast<size_t>(P));
  for (auto& t : prompt) t = int32_t(rng.below(uint64_t(preset.model.vocab_size)));
  SamplingOptions greedy;
  greedy.temperature = 0;
  // Warm-up: a whole untimed generation (the executor and its KV cache are made here).
  if (a.warmup > 0) trainer.generate(prompt, std::min(N, a.warmup), greedy);
  trainer.begin_generation(prompt, greedy);
  double t0 = now_s();
  trainer.next_token();  // runs the prompt through the cache, then picks the first new token
  const double prefill = now_s() - t0;
  std::vector<double> times;
  const double cpu0 = cpu_s();
  for (int i = 0; i < N; i++) {
    t0 = now_s();
    trainer.next_token();
    times.push_back(now_s() - t0);
  }
  const double cpu_total = cpu_s() - cpu0;
  double total = 0;
  for (double t : times) total += t;
  nlohmann::json j = model_fields(preset, lora);
  j.update({{"mode", "generate"},
            {"prompt_tokens", P},
            {"new_tokens", N},
            {"prefill_ms", prefill * 1e3},
            {"ms_per_token", median(times) * 1e3},
            {"tokens_per_s", N / total},
            {"cpu_ms_per_token", cpu_total / N * 1e3},
            {"peak_rss_mib", double(status_kib("VmHWM:")) / 1024.0},
            {"base_rss_mib", base_rss_mib}});
  return j;
}

// One preset's training step in this process: returns its JSON object.
nlohmann::json bench_preset(const BenchArgs& a, const std::string& name) {
  if (a.generate > 0) return bench_generate(a, name);
  const Preset preset = shaped_preset(a, name);
  const LoraConfig lora = bench_lora(a);
  const int T = row_tokens(a, preset.model);
  // The process before the model exists (executable, libraries, the thread pool): peak RSS minus
  // this is what the model's training costs.
  const double base_rss_mib = double(status_kib("VmRSS:")) / 1024.0;
  TrainConfig tc;
  tc.batch = preset.batch;
  tc.steps = 1000000;
  tc.schedule = "constant";
  tc.warmup = 0;
  Trainer trainer(preset.model, tc);
  if (lora.enabled()) trainer.enable_lora(lora, 1);  // the base frozen: only the adapters train
  const int B = preset.batch;
  Batch batch{B, T, std::vector<int32_t>(size_t(B) * T), std::vector<int32_t>(size_t(B) * T)};
  Rng rng(42);
  const int V = preset.model.vocab_size;
  for (auto& t : batch.inputs) t = int32_t(rng.below(uint64_t(V)));
  for (auto& t : batch.targets) t = int32_t(rng.below(uint64_t(V)));

  // The trainer builds its training program for the batch's rows (--seq may be shorter than ctx).
  cpu::Executor& ex = trainer.train_executor(T);
  for (int i = 0; i < a.warmup; i++) trainer.train_step(batch);
  ex.profile = a.ops;
  ex.op_seconds.clear();
  std::vector<double> times;
  const double cpu0 = cpu_s();
  for (int i = 0; i < a.steps; i++) {
    const double t0 = now_s();
    trainer.train_step(batch);
    times.push_back(now_s() - t0);
  }
  const double cpu_per_step = (cpu_s() - cpu0) / a.steps;
  const double sec = median(times);
  const double tokens = double(B) * T;
  const double flops = program_flops(ex.program());
  int64_t weights = 0, grads = 0, moments = 0, other = 0;
  for (const auto& t : ex.program().tensors) {
    if (t.kind == TensorKind::parameter)
      weights += t.bytes();
    else if (t.kind == TensorKind::optim_state)
      moments += t.bytes();
    else if (t.name.starts_with("grad.") && ex.program().find(t.name.substr(5)) >= 0 &&
             ex.program().tensor(ex.program().find(t.name.substr(5))).kind == TensorKind::parameter)
      grads += t.bytes();
    else
      other += t.bytes();
  }
  nlohmann::json j = model_fields(preset, lora);
  j.update({{"batch", B},
            {"seq", T},
            {"tokens_per_step", int64_t(tokens)},
            {"steps", a.steps},
            {"ms_per_step", sec * 1e3},
            {"ms_min", *std::min_element(times.begin(), times.end()) * 1e3},
            // CPU time per step over all threads: on a busy machine, wall time / this
            // shows how much of the step the threads actually got to run.
            {"cpu_ms_per_step", cpu_per_step * 1e3},
            {"tokens_per_s", tokens / sec},
            {"gflop_per_step", flops / 1e9},
            {"gflops", flops / sec / 1e9},
            {"weights_mib", weights / 1048576.0},
            {"grads_mib", grads / 1048576.0},
            {"moments_mib", moments / 1048576.0},
            {"activations_mib", other / 1048576.0},
            {"arena_mib", double(ex.arena_bytes()) / 1048576.0},
            {"live_peak_mib", double(ex.live_peak_bytes()) / 1048576.0},
            // What training needs at least: weights, gradients, moments, and the
            // activations live at the program's worst point.
            {"needed_mib", double(weights + moments + ex.live_peak_bytes()) / 1048576.0},
            {"peak_rss_mib", double(status_kib("VmHWM:")) / 1024.0},
            {"base_rss_mib", base_rss_mib}});
  if (a.ops) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [op, s] : ex.op_seconds) o[op] = s / a.steps * 1e3;
    j["ops_ms"] = o;
  }
  return j;
}

// Runs `ptl bench --child --presets NAME ...` and returns the JSON line it prints.
nlohmann::json bench_in_child(const BenchArgs& a, const std::string& name) {
  std::vector<std::string> args = {"ptl",
                                   "bench",
                                   "--child",
                                   "--presets",
                                   name,
                                   "--steps",
                                   std::to_string(a.steps),
                                   "--warmup",
                                   std::to_string(a.warmup),
                                   "--threads",
                                   std::to_string(cpu::num_threads())};
  auto pass = [&](const char* flag, const std::string& value) {
    args.push_back(flag);
    args.push_back(value);
  };
  for (const auto& [flag, v] : {std::pair{"--vocab", a.vocab},
                                {"--batch", a.batch},
                                {"--seq", a.seq},
                                {"--layers", a.layers},
                                {"--d-model", a.d_model},
                                {"--heads", a.heads},
                                {"--ctx", a.ctx},
                                {"--lora-rank", a.lora_rank},
                                {"--generate", a.generate}})
    if (v > 0) pass(flag, std::to_string(v));
  if (!a.gelu.empty()) pass("--gelu", a.gelu);
  if (a.lora_rank > 0) {
    std::ostringstream alpha;
    alpha.precision(17);
    alpha << a.lora_alpha;
    pass("--lora-alpha", alpha.str());
    pass("--lora-targets", a.lora_targets);
  }
  if (a.generate > 0) pass("--prompt", std::to_string(a.prompt));
  if (a.ops) args.push_back("--ops");
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int fds[2];
  check(pipe(fds) == 0, "bench: pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  check(rc == 0, "bench: cannot start a child process");
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench: the child process for " + name + " failed");
  return nlohmann::json::parse(out);
}

void run_bench(const BenchArgs& a) {
  if (a.threads > 0) cpu::set_num_threads(a.threads);
  std::vector<std::string> names;
  std::stringstream ss(a.presets);
  for (std::string s; std::getline(ss, s, ',');)
    if (!s.empty()) names.push_back(find_preset(s).name);
  check(!names.empty(), "bench: no presets given");
  // Every shape and the adapters checked before anything is measured.
  const LoraConfig lora = bench_lora(a);
  for (const auto& n : names) {
    const Preset p = shaped_preset(a, n);
    row_tokens(a, p.model);
    if (lora.enabled()) (void)adapter_tensors(p.model, lora);  // throws for a rank larger than a projection
  }
  if (a.child) {
    for (const auto& n : names) std::printf("%s\n", bench_preset(a, n).dump().c_str());
    return;
  }
  const std::string cpu_name = cpu_description();
  if (a.generate > 0) {
    if (!a.json)
      std::printf(
          "ptl bench --generate: %s%s%d thread(s), a %d-token prompt, then %d greedy tokens\n%-8s %10s %12s %12s %9s\n",
          cpu_name.c_str(), cpu_name.empty() ? "" : ", ", cpu::num_threads(), a.prompt, a.generate, "preset", "params",
          "prefill ms", "ms/token", "tok/s");
    for (const auto& n : names) {
      nlohmann::json j = a.no_isolate ? bench_preset(a, n) : bench_in_child(a, n);
      j["cpu"] = cpu_name;
      j["vector_bits"] = cpu::vector_bits();
      if (a.json)
        std::printf("%s\n", j.dump().c_str());
      else
        std::printf("%-8s %10lld %12.1f %12.2f %9.1f\n", n.c_str(), (long long)j["params"].get<int64_t>(),
                    j["prefill_ms"].get<double>(), j["ms_per_token"].get<double>(), j["tokens_per_s"].get<double>());
      std::fflush(stdout);
    }
    return;
  }
  double peak = a.peak_gflops;
  const bool peak_measured = peak <= 0;
  if (peak_measured) peak = measure_peak();
  if (!a.json) {
    std::printf(
        "ptl bench: %s%s%d-bit vectors, %d thread(s), peak %.0f GFLOP/s (%s), median of %d steps after %d warm-up\n",
        cpu_name.c_str(), cpu_name.empty() ? "" : ", ", cpu::vector_bits(), cpu::num_threads(), peak,
        peak_measured ? "measured: linear_forward 2048^3" : "given", a.steps, a.warmup);
    std::printf("%-8s %10s %10s %9s %12s %8s %6s %10s\n", "preset", "params", "ms/step", "tok/s", "GFLOP/step",
                "GFLOP/s", "MFU", "peak MiB");
  }
  for (const auto& n : names) {
    nlohmann::json j = a.no_isolate ? bench_preset(a, n) : bench_in_child(a, n);
    j["cpu"] = cpu_name;
    j["vector_bits"] = cpu::vector_bits();
    j["peak_gflops"] = peak;
    j["peak_source"] = peak_measured ? "linear_forward 2048^3" : "given";
    j["mfu"] = j["gflops"].get<double>() / peak;
    if (a.json) {
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%-8s %10lld %10.2f %9.0f %12.3f %8.1f %5.1f%% %10.1f\n", n.c_str(),
                  (long long)j["params"].get<int64_t>(), j["ms_per_step"].get<double>(),
                  j["tokens_per_s"].get<double>(), j["gflop_per_step"].get<double>(), j["gflops"].get<double>(),
                  100 * j["mfu"].get<double>(), j["peak_rss_mib"].get<double>());
      if (a.ops) {
        std::vector<std::pair<double, std::string>> rows;
        double total = 0;
        for (auto& [op, ms] : j["ops_ms"].items()) {
          rows.push_back({ms.get<double>(), op});
          total += ms.get<double>();
        }
        std::sort(rows.rbegin(), rows.rend());
        for (auto& [ms, op] : rows) std::printf("    %-24s %9.3f ms %5.1f%%\n", op.c_str(), ms, 100 * ms / total);
      }
    }
    std::fflush(stdout);
  }
}

}  // namespace

void add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure training-step speed, GFLOP/s and memory of the presets");
  cmd->add_option("--presets", a->presets, "Comma-separated presets")->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps per preset (the median is reported)")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--warmup", a->warmup, "Untimed steps first")->capture_default_str()->check(at_least(0));
  cmd->add_option("--threads", a->threads, "Threads (default: $PTL_THREADS or all cores)")->check(at_least(1));
  cmd->add_option("--vocab", a->vocab, "Vocabulary size of the models (default: the presets' 256)")
      ->check(CLI::Range(1, ModelConfig::kMaxVocab));
  cmd->add_option("--peak-gflops", a->peak_gflops, "Peak GFLOP/s for MFU (default: measure a 2048^3 matmul)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            return end != v.c_str() && *end == '\0' && std::isfinite(x) && x > 0
                       ? ""
                       : "must be a positive number, got " + v;
          },
          "POSITIVE"));
  cmd->add_option("--batch", a->batch, "Rows per step (default: the preset's)")->check(at_least(1));
  cmd->add_option("--seq", a->seq, "Tokens per row (default: the context)")->check(at_least(1));
  cmd->add_option("--layers", a->layers, "Override the number of layers")->check(at_least(1));
  cmd->add_option("--d-model", a->d_model, "Override the width")->check(at_least(1));
  cmd->add_option("--heads", a->heads, "Override the number of heads")->check(at_least(1));
  cmd->add_option("--ctx", a->ctx, "Override the context length")->check(at_least(1));
  cmd->add_option("--gelu", a->gelu, "The MLP's GELU (default: the presets' erf; tanh = GPT-2's)")
      ->check(CLI::IsMember({"erf", "tanh"}));
  cmd->add_option("--lora-rank", a->lora_rank, "Train LoRA adapters of this rank on the frozen base (0 = every weight)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--lora-alpha", a->lora_alpha, "LoRA scale: the update is (alpha / r) B A")->capture_default_str();
  cmd->add_option("--lora-targets", a->lora_targets,
                  "Adapted projections: q, k, v, o, fc_in, fc_out, qkv (one adapter over q, k and v), attn, mlp or all")
      ->capture_default_str();
  cmd->add_option("--generate", a->generate,
                  "Time KV-cache generation of this many greedy tokens instead of training (after --prompt tokens)")
      ->check(at_least(1));
  cmd->add_option("--prompt", a->prompt, "Prompt tokens before --generate's (random ids)")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--ops", a->ops, "Per-op time breakdown");
  cmd->add_flag("--json", a->json, "One JSON object per preset and line");
  cmd->add_flag("--no-isolate", a->no_isolate, "Run every preset in this process (peak memory then accumulates)");
  cmd->add_flag("--child", a->child, "(internal) run the presets here and print JSON")->group("");
  cmd->callback([a]() { run_bench(*a); });
}

}  // namespace ptl::cli
