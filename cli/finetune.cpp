#include "cli/finetune.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/progress.h"
#include "engine/error.h"
#include "engine/training_loop.h"
#if __has_include("engine/backends/cpu/thread_pool.h")
#include "engine/backends/cpu/thread_pool.h"
#define PTL_HAS_THREAD_POOL 1
#endif

namespace ptl::cli {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};

}  // namespace

void add_finetune_options(CLI::App* cmd, FinetuneArgs& a, const std::string& data_help) {
  cmd->add_option("--base", a.base, "Base model checkpoint (.tinygpt)")->required();
  cmd->add_option("--data", a.data, data_help)->required();
  cmd->add_option("--out", a.out, "Output folder")->required();
  cmd->add_option("--steps", a.steps, "Optimizer steps")->capture_default_str()->check(at_least(1));
  cmd->add_option("--lr", a.lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--batch", a.batch, "Sequences per batch (default: the base run's)")->check(at_least(1));
  cmd->add_option("--schedule", a.schedule, "Learning-rate schedule")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  cmd->add_option("--warmup", a.warmup, "Warm-up steps (default: min(100, steps/10))")->check(at_least(0));
  cmd->add_option("--seed", a.seed, "Seed for the adapters and the data order")->capture_default_str();
  cmd->add_option("--eval-every", a.eval_every, "Validation loss and a save every N steps (0 = only at the end)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--log-every", a.log_every, "When stdout is not a terminal, print a line every N steps")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--threads", a.threads, "CPU threads (default: $PTL_THREADS, else all cores)")->check(at_least(1));
}

std::unique_ptr<Trainer> setup_finetune(const FinetuneArgs& a) {
#ifdef PTL_HAS_THREAD_POOL
  if (a.threads > 0) cpu::set_num_threads(a.threads);
#endif
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.base), a.base);
  TrainConfig tc = trainer->train_config();  // the base run's optimizer settings, then ours
  if (a.batch) tc.batch = a.batch;
  tc.steps = a.steps;
  tc.lr = a.lr;
  tc.schedule = a.schedule;
  tc.warmup = a.warmup;
  tc.seed = a.seed;
  tc.eval_every = a.eval_every;
  tc.dropout = a.dropout;
  tc.sample_every = 0;
  tc.data_path = fs::absolute(a.data).string();
  trainer->start_finetune(tc);
  const int ctx = trainer->model_config().ctx;
  if (a.data.ends_with(".jsonl")) {
    // Encoded by the base's tokenizer; a file declaring another tokenizer is refused (sft.h).
    trainer->set_sft_data(std::make_unique<SftData>(read_sft_file(a.data, &trainer->tokenizer().id()), ctx, 0.1, a.data,
                                                    trainer->tokenizer()));
  } else {
    trainer->set_corpus(read_text_file(a.data), a.data);
  }
  return trainer;
}

std::string describe_data(Trainer& t) {
  const std::string& path = t.train_config().data_path;
  char buf[512];
  if (t.has_sft_data()) {
    const SftData& d = t.sft_data();
    std::snprintf(buf, sizeof buf,
                  "%s (SFT: %zu training / %zu validation examples, %lld training bytes with the template)",
                  path.c_str(), d.train_examples(), d.val_examples(), (long long)d.train_bytes());
  } else {
    std::snprintf(buf, sizeof buf, "%s (text: %zu train / %zu val bytes)", path.c_str(), t.corpus().train().size(),
                  t.corpus().val().size());
  }
  std::string out = buf;
  if (!t.tokenizer().is_bytes()) {
    const size_t tokens = t.has_sft_data() ? size_t(t.sft_data().train_tokens()) : t.corpus().train_tokens();
    out += "; " + std::to_string(tokens) + " training tokens of " + t.tokenizer().id().describe();
  }
  return out;
}

void run_finetune_loop(Trainer& trainer, const FinetuneArgs& a, const std::function<void()>& save,
                       const std::string& result) {
  std::error_code ec;
  fs::create_directories(a.out, ec);
  check(!ec, "cannot create output folder " + a.out + ": " + ec.message());
  const std::string metrics_path = (fs::path(a.out) / "metrics.jsonl").string();
  std::ofstream metrics(metrics_path, std::ios::trunc);
  check(bool(metrics), "cannot write " + metrics_path);
  const TrainConfig& tc = trainer.train_config();
  const bool has_val = trainer.has_sft_data() ? trainer.sft_data().has_val() : trainer.corpus().has_val();
  const int64_t last = tc.steps;

  TrainingLoop loop(trainer, TrainingLoop::options_from(trainer));
  g_interrupted = false;
  auto old_handler = std::signal(SIGINT, [](int) { g_interrupted = true; });
  Progress progress(0, last, a.log_every);
  double ema_tps = 0;
  if (has_val) {
    const EvalResult v = trainer.validation_loss();
    char line[160];
    std::snprintf(line, sizeof line, "step 0: val loss %.4f (perplexity %.2f)", v.loss, v.perplexity());
    progress.message(line);
    metrics << nlohmann::json{{"step", 0}, {"val_loss", v.loss}}.dump() << "\n";
  }
  FitCallbacks cb;
  cb.on_step = [&](const StepReport& rep) {
    const StepResult& r = rep.result;
    const double tps = r.tokens / r.seconds;
    ema_tps = ema_tps == 0 ? tps : 0.9 * ema_tps + 0.1 * tps;
    nlohmann::json m = {{"step", r.step},           {"train_loss", r.loss}, {"lr", r.lr},
                        {"grad_norm", r.grad_norm}, {"tokens_per_s", tps},  {"elapsed_s", rep.elapsed_seconds}};
    if (rep.validation) {
      const EvalResult& val = *rep.validation;
      m["val_loss"] = val.loss;
      m["val_bits_per_byte"] = val.bits_per_byte();
      char line[160];
      std::snprintf(line, sizeof line, "step %lld: train loss %.4f, val loss %.4f (perplexity %.2f)", (long long)r.step,
                    r.loss, val.loss, val.perplexity());
      progress.message(line);
    }
    metrics << m.dump() << "\n";
  };
  cb.on_save = [&](int64_t) {
    metrics.flush();
    save();
  };
  cb.on_step_end = [&](const StepReport& rep) {
    progress.update(rep.result.step, rep.result.loss, ema_tps, rep.result.lr);
  };
  cb.stop_requested = [] { return g_interrupted.load(); };
  const FitResult res = loop.fit(cb);
  if (res.stop == FitResult::diverged) {
    progress.finish();
    std::signal(SIGINT, old_handler);
    const auto saved = loop.saved_step();
    fail(res.divergence->message() + " (try a lower --lr); " +
         (saved ? "the " + result + " of step " + std::to_string(*saved) + " is saved"
                : std::string("nothing was saved")));
  }
  if (res.stop == FitResult::interrupted) {
    progress.finish();
    std::signal(SIGINT, old_handler);
    std::printf(
        "interrupted at step %lld; the %s of that step is saved (fine-tuning runs do not resume: "
        "start again with --steps to train longer)\n",
        (long long)res.step, result.c_str());
    exit_status = kInterruptedStatus;
    return;
  }
  std::signal(SIGINT, old_handler);
  progress.finish();
}

}  // namespace ptl::cli
