// ptl train: train a model from scratch or resume a run, with progress, metrics and checkpoints.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/progress.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/memory.h"
#include "engine/safetensors.h"
#include "engine/tokenizer_files.h"
#include "engine/trainer.h"
#include "engine/training_loop.h"

namespace ptl::cli {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};

struct TrainArgs {
  std::string preset = DefaultRun::preset, data, out, resume, tokenizer;
  int64_t steps = DefaultRun::steps, until = 0, eval_every = 100, sample_every = 500, log_every = 50, warmup = -1;
  int64_t snapshot_every = 0, snapshot_from = 0;
  int batch = 0, layers = 0, d_model = 0, heads = 0, ctx = 0;
  double lr = 0, dropout = 0, weight_decay = 0.1, min_lr_frac = 0.1, beta2 = 0.95;
  std::string schedule = "cosine";
  uint64_t seed = 1337;
  bool overwrite = false;
};

// runs/<date>-<time>, or runs/<date>-<time>-2, -3 ... when runs started in the same second.
std::string timestamp_dir() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/%Y%m%d-%H%M%S", std::localtime(&t));
  std::string dir = buf;
  for (int n = 2; fs::exists(dir); ++n) dir = std::string(buf) + "-" + std::to_string(n);
  return dir;
}

// What a person can read in a terminal: control bytes other than newline and tab (a barely
// trained model emits NUL, ESC, CR ...) become U+FFFD. samples.txt keeps the bytes as generated.
std::string for_terminal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
      out += "\xEF\xBF\xBD";
    else
      out += c;
  }
  return out;
}

// On resume, the run's logs are cut back to the checkpoint's step: the steps after it (written
// before a crash, a kill or a failed save) are trained again, and must not be logged twice; a
// line cut off mid-way by the crash goes too. metrics.jsonl keeps its complete lines with step
// <= `step`; samples.txt its samples up to that step.
// A file as the file system knows it: replaced (renamed over), rewritten or removed, it differs.
struct FileIdentity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

FileIdentity identify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_dev, st.st_ino, st.st_size, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

void trim_run_logs(const fs::path& dir, int64_t step) {
  const fs::path metrics = dir / "metrics.jsonl", samples = dir / "samples.txt";
  for (const fs::path& p : {metrics, samples, dir / "model.tinygpt"}) remove_stale_temporaries(p.string());
  auto rewrite = [](const fs::path& path, const std::string& text) {
    write_file_atomic(path.string(), std::vector<uint8_t>(text.begin(), text.end()));
  };
  if (fs::is_regular_file(metrics)) {
    std::ifstream in(metrics, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string kept;
    for (size_t begin = 0, end; (end = all.find('\n', begin)) != std::string::npos; begin = end + 1) {
      const std::string line = all.substr(begin, end - begin);
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() <= step)
        kept += line + "\n";
    }
    if (kept != all) rewrite(metrics, kept);
  }
  if (fs::is_regular_file(samples)) {
    std::ifstream in(samples, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Each sample starts with a line "--- step N ---"; keep everything before the first N > step.
    for (size_t at = 0; (at = all.find("--- step ", at)) != std::string::npos; ++at) {
      if (at > 0 && all[at - 1] != '\n') continue;
      if (std::strtoll(all.c_str() + at + 9, nullptr, 10) > step) {
        rewrite(samples, all.substr(0, at));
        break;
      }
    }
  }
}

std::string sample_text(Trainer& trainer, int n, uint64_t seed) {
  SamplingOptions opt;
  opt.temperature = 0.8;
  opt.seed = seed;
  return trainer.decode(trainer.generate({}, n, opt));
}

void run_train(const TrainArgs& a, CLI::App& cmd) {
  auto given = [&](const char* opt) { return cmd.count(opt) > 0; };
  std::unique_ptr<Trainer> trainer;
  std::string out = a.out;
  if (!a.resume.empty()) {
    const std::vector<uint8_t> bytes = read_file_bytes(a.resume);
    trainer = Trainer::from_checkpoint(bytes, a.resume);
    TrainConfig& tc = trainer->train_config();
    // The model and the data order are the checkpoint's: an option that would change them is an
    // error, one that repeats them is fine.
    const ModelConfig& mc = trainer->model_config();
    auto fixed = [&](const char* opt, long long given_value, long long value) {
      check(!given(opt) || given_value == value, std::string(opt) + " " + std::to_string(given_value) +
                                                     " differs from the checkpoint's " + std::to_string(value) +
                                                     ": it cannot change when resuming");
    };
    fixed("--batch", a.batch, tc.batch);
    fixed("--seed", (long long)a.seed, (long long)tc.seed);
    fixed("--layers", a.layers, mc.n_layers);
    fixed("--d-model", a.d_model, mc.d_model);
    fixed("--heads", a.heads, mc.n_heads);
    fixed("--ctx", a.ctx, mc.ctx);
    if (!a.tokenizer.empty()) {
      const ModelTokenizer given_tok = ModelTokenizer::of(load_tokenizer(a.tokenizer));
      check(given_tok.id() == trainer->tokenizer().id(),
            "--tokenizer " + a.tokenizer + " (" + given_tok.id().describe() + ") differs from the checkpoint's (" +
                trainer->tokenizer().id().describe() + "): it cannot change when resuming");
    }
    // Built into the training program, and part of what makes a resumed run the same run.
    auto format_number = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", v);
      return std::string(buf);
    };
    check(!given("--dropout") || a.dropout == tc.dropout,
          "--dropout " + format_number(a.dropout) + " differs from the checkpoint's " + format_number(tc.dropout) +
              ": it cannot change when resuming");
    if (given("--preset")) {
      ModelConfig p = find_preset(a.preset).model;
      p.vocab_size = mc.vocab_size;  // the tokenizer's, checked above
      if (a.layers) p.n_layers = a.layers;
      if (a.d_model) p.d_model = a.d_model;
      if (a.heads) p.n_heads = a.heads;
      if (a.ctx) p.ctx = a.ctx;
      check(p == mc, "--preset " + a.preset + " is not the checkpoint's model: the model cannot change when resuming");
    }
    if (!inspect_checkpoint(decode_safetensors(bytes.data(), bytes.size(), a.resume), a.resume).has_optimizer)
      std::printf("note: %s has no optimizer state (a merged or fine-tuned model): AdamW's moments start from zero\n",
                  a.resume.c_str());
    const TrainConfig planned = tc;
    if (given("--steps")) tc.steps = a.steps;
    if (given("--lr")) tc.lr = a.lr;
    if (given("--weight-decay")) tc.weight_decay = a.weight_decay;
    if (given("--beta2")) tc.beta2 = a.beta2;
    if (given("--min-lr-frac")) tc.min_lr_frac = a.min_lr_frac;
    if (given("--schedule")) tc.schedule = a.schedule;
    if (given("--eval-every")) tc.eval_every = a.eval_every;
    if (given("--sample-every")) tc.sample_every = a.sample_every;
    if (given("--data")) tc.data_path = fs::absolute(a.data).string();
    tc.validate();
    const int64_t at = trainer->state().step;
    // More (or fewer) steps stretch the cosine from the rate reached, instead of restarting it.
    tc = continue_schedule(planned, tc, at);
    check(at < tc.steps, given("--steps")
                             ? a.resume + " is already at step " + std::to_string(at) + " of --steps " +
                                   std::to_string(tc.steps) + "; give --steps above " + std::to_string(at) +
                                   " (the run's total, not the steps to add)"
                             : a.resume + " has completed its " + std::to_string(tc.steps) +
                                   " steps; to train further, pass --steps N with N above " + std::to_string(at));
    if (out.empty()) out = fs::path(a.resume).parent_path().string();
    if (out.empty()) out = ".";
  } else {
    ModelConfig mc = find_preset(a.preset).model;
    // The tokenizer sets the vocabulary (a byte-level model's is the presets' 256).
    const ModelTokenizer tok =
        a.tokenizer.empty() ? ModelTokenizer::bytes() : ModelTokenizer::of(load_tokenizer(a.tokenizer));
    mc.vocab_size = tok.vocab_size();
    if (a.layers) mc.n_layers = a.layers;
    if (a.d_model) mc.d_model = a.d_model;
    if (a.heads) mc.n_heads = a.heads;
    if (a.ctx) mc.ctx = a.ctx;
    mc.validate();
    TrainConfig tc;
    tc.batch = a.batch ? a.batch : find_preset(a.preset).batch;
    tc.steps = a.steps;
    tc.lr = a.lr > 0 ? a.lr : find_preset(a.preset).lr;
    tc.weight_decay = a.weight_decay;
    tc.beta2 = a.beta2;
    tc.min_lr_frac = a.min_lr_frac;
    tc.schedule = a.schedule;
    tc.warmup = a.warmup;
    tc.seed = a.seed;
    tc.dropout = a.dropout;
    tc.eval_every = a.eval_every;
    tc.sample_every = a.sample_every;
    tc.data_path = fs::absolute(a.data.empty() ? find_tinyshakespeare() : a.data).string();
    BuildOptions opt;
    opt.batch = tc.batch;
    opt.dropout = tc.dropout;
    check_training_fits(mc, opt, tc);  // before the weights are allocated and initialised
    trainer = std::make_unique<Trainer>(mc, tc);
    trainer->set_tokenizer(tok);
    if (out.empty()) out = timestamp_dir();
  }
  TrainConfig& tc = trainer->train_config();
  if (tc.data_path.empty()) tc.data_path = find_tinyshakespeare();
  check(!tc.data_path.ends_with(".jsonl"),
        (a.resume.empty() || given("--data") ? "--data " + tc.data_path
                                             : a.resume + " was fine-tuned on " + tc.data_path) +
            ": ptl train trains on plain text, and that is SFT examples (JSONL); use ptl sft or ptl lora train for "
            "those, or pass --data with a text file");
  trainer->set_corpus(read_text_file(tc.data_path), tc.data_path);

  std::error_code ec;
  fs::create_directories(out, ec);
  check(!ec, "cannot create output folder " + out + ": " + ec.message());
  const std::string ckpt_path = (fs::path(out) / "model.tinygpt").string();
  if (a.resume.empty()) {
    check(a.overwrite || !fs::exists(ckpt_path), out + " already holds a run (" + ckpt_path +
                                                     "): continue it with --resume " + ckpt_path +
                                                     ", or choose another --out, or pass --overwrite to replace it");
  } else {
    trim_run_logs(out, trainer->state().step);
  }
  std::ofstream metrics(fs::path(out) / "metrics.jsonl", a.resume.empty() ? std::ios::trunc : std::ios::app);
  check(bool(metrics), "cannot write " + (fs::path(out) / "metrics.jsonl").string() + ": " + std::strerror(errno));
  std::ofstream samples(fs::path(out) / "samples.txt", a.resume.empty() ? std::ios::trunc : std::ios::app);

  const ModelConfig& mc = trainer->model_config();
  const int64_t first = trainer->state().step;
  const int64_t last = a.until > 0 ? std::min(a.until, tc.steps) : tc.steps;
  check(last > first,
        "nothing to do: the run is at step " + std::to_string(first) + " and --until is " + std::to_string(a.until));
  std::printf(
      "ptl train: %d layers, d %d, %d heads, ctx %d (%lld parameters), batch %d, %s lr %.2e, steps %lld..%lld\n"
      "data: %s (%zu train / %zu val bytes)\n",
      mc.n_layers, mc.d_model, mc.n_heads, mc.ctx, (long long)mc.param_count(), tc.batch, tc.schedule.c_str(), tc.lr,
      (long long)first + 1, (long long)last, tc.data_path.c_str(), trainer->corpus().train().size(),
      trainer->corpus().val().size());
  if (!trainer->tokenizer().is_bytes())
    std::printf(
        "tokens: %s: %zu train / %zu val tokens (%.2f bytes per token)\n", trainer->tokenizer().id().describe().c_str(),
        trainer->corpus().train_tokens(), trainer->corpus().val_tokens(),
        double(trainer->corpus().train().size()) / double(std::max<size_t>(1, trainer->corpus().train_tokens())));
  std::printf("out: %s\n", out.c_str());
  std::fflush(stdout);

  TrainingLoop loop(*trainer, TrainingLoop::options_from(*trainer));
  LoopOptions lo = loop.options();
  lo.last = last;
  loop.set_options(lo);
  // The last good checkpoint on disk: the one we resumed from until we write our own.
  if (!a.resume.empty()) loop.set_saved_step(first);

  g_interrupted = false;
  auto old_handler = std::signal(SIGINT, [](int) { g_interrupted = true; });
  Progress progress(first, last, a.log_every);
  double ema_tps = 0;
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
      std::snprintf(line, sizeof line, "step %lld: train loss %.4f, val loss %.4f (perplexity %.2f, %.3f bits/byte)",
                    (long long)r.step, r.loss, val.loss, val.perplexity(), val.bits_per_byte());
      progress.message(line);
    }
    metrics << m.dump() << "\n";
  };
  cb.on_sample = [&](int64_t step) {
    std::string text = sample_text(*trainer, 200, tc.seed + uint64_t(step));
    progress.message("--- sample at step " + std::to_string(step) + " ---\n" + for_terminal(printable_utf8(text)) +
                     "\n---");
    samples << "--- step " << step << " ---\n" << text << "\n";
    samples.flush();
  };
  bool wrote_own = false;  // a checkpoint of this run is on disk (else the one resumed from is the last good one)
  // What the checkpoint's name held when the run last looked: another program replacing it (a
  // second run into the same folder, a user's copy) must not be overwritten silently.
  FileIdentity expected = identify(ckpt_path);
  auto last_good = [&]() -> std::string {
    const auto saved = loop.saved_step();
    return saved ? "the last good checkpoint is " + (wrote_own ? ckpt_path : a.resume) + " (step " +
                       std::to_string(*saved) + ")"
                 : std::string("no checkpoint was written");
  };
  cb.on_save = [&](int64_t step) {
    metrics.flush();
    const std::vector<uint8_t> bytes = trainer->save_checkpoint(true);
    if (identify(ckpt_path) != expected) {
      const std::string aside = (fs::path(out) / ("model.step-" + std::to_string(step) + ".tinygpt")).string();
      write_file_atomic(aside, bytes);
      fail(ckpt_path + " was replaced by another program during this run; it is left as it is. This run's step " +
           std::to_string(step) + " is saved in " + aside + " (continue with: ptl train --resume " + aside + ")");
    }
    try {
      write_file_atomic(ckpt_path, bytes);
    } catch (const Error& e) {
      fail(std::string(e.what()) + "; the run stops at step " + std::to_string(step) + ", and " + last_good());
    }
    expected = identify(ckpt_path);
    wrote_own = true;
  };
  // Snapshots for weight averaging (`ptl average`): the weights alone, one file per step kept.
  const fs::path snapshot_dir = fs::path(out) / "snapshots";
  cb.on_step_end = [&](const StepReport& rep) {
    const int64_t step = rep.result.step;
    if (a.snapshot_every > 0 && step >= a.snapshot_from && step % a.snapshot_every == 0) {
      char name[64];
      std::snprintf(name, sizeof name, "step-%06lld.tinygpt", (long long)step);
      fs::create_directories(snapshot_dir, ec);
      check(!ec, "cannot create " + snapshot_dir.string() + ": " + ec.message());
      write_file_atomic((snapshot_dir / name).string(), trainer->save_checkpoint(false));
    }
    progress.update(step, rep.result.loss, ema_tps, rep.result.lr);
  };
  cb.stop_requested = [] { return g_interrupted.load(); };
  const FitResult res = loop.fit(cb);
  if (res.stop == FitResult::diverged) {
    progress.finish();
    fail(res.divergence->message() + " (try a lower --lr); " + last_good());
  }
  if (res.stop == FitResult::interrupted) {
    progress.finish();
    std::signal(SIGINT, old_handler);
    std::printf("interrupted at step %lld; saved %s. Continue with: ptl train --resume %s\n", (long long)res.step,
                ckpt_path.c_str(), ckpt_path.c_str());
    exit_status = kInterruptedStatus;
    return;
  }
  std::signal(SIGINT, old_handler);
  progress.finish();
  const auto& s = trainer->state();
  std::printf("done: %lld steps, %.1f s, %lld tokens (%.0f tokens/s). Checkpoint: %s\n", (long long)s.step,
              s.elapsed_seconds, (long long)s.tokens_seen, double(s.tokens_seen) / std::max(1e-9, s.elapsed_seconds),
              ckpt_path.c_str());
}

}  // namespace

nlohmann::json train_defaults() {
  const TrainArgs a;
  return {{"preset", a.preset},
          {"batch", find_preset(a.preset).batch},
          {"steps", a.steps},
          {"lr", a.lr > 0 ? a.lr : find_preset(a.preset).lr},  // the preset's
          {"schedule", a.schedule},
          {"warmup", a.warmup},
          {"min_lr_frac", a.min_lr_frac},
          {"weight_decay", a.weight_decay},
          {"beta2", a.beta2},
          {"dropout", a.dropout},
          {"seed", a.seed},
          {"eval_every", a.eval_every},
          {"sample_every", a.sample_every}};
}

void add_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model (default: the Medium preset, 4000 steps, on TinyShakespeare into runs/<time>/)");
  cmd->add_option("--preset", a->preset, "Model preset: tiny, small, medium, large, xl, huge, massive, mega, behemoth")
      ->capture_default_str();
  cmd->add_option("--data", a->data, "Training text (default: TinyShakespeare from $PTL_DATA_DIR or ../shared/data)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "Train over this tokenizer's tokens (the vocabulary is its size): a tokenizer.json, a folder with "
                  "GPT-2's files, or a checkpoint (default: bytes, vocabulary 256; docs/tokenizers.md)");
  cmd->add_option("--steps", a->steps, "Total optimizer steps (the schedule spans these)")->capture_default_str();
  cmd->add_option("--until", a->until, "Stop after this step (the schedule still plans for --steps; resume later)")
      ->check(at_least(1));
  cmd->add_option("--batch", a->batch, "Sequences per batch (default: the preset's)")->check(at_least(1));
  cmd->add_option("--lr", a->lr,
                  "Peak learning rate (default: the preset's: 2e-3 for Tiny to Medium, 1.5e-3 for Large, 1e-3 for "
                  "XL to Mega, 3e-4 for Behemoth; `ptl info --preset NAME`)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--weight-decay", a->weight_decay, "AdamW's decoupled weight decay (2-D weights only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--beta2", a->beta2, "AdamW's beta2, the decay of its running average of squared gradients")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9999));
  cmd->add_option("--min-lr-frac", a->min_lr_frac, "The cosine ends at this fraction of --lr")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--schedule", a->schedule, "Learning-rate schedule")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Warm-up steps (default: min(100, steps/10))")->check(at_least(0));
  cmd->add_option("--seed", a->seed, "Seed for the weights, the batches and the dropout masks")->capture_default_str();
  cmd->add_option("--dropout", a->dropout, "Dropout rate (docs/model.md, \"Dropout\"; 0 = none)")
      ->capture_default_str()
      ->check(dropout_rate());
  cmd->add_option("--eval-every", a->eval_every, "Validation loss and checkpoint every N steps")->capture_default_str();
  cmd->add_option("--sample-every", a->sample_every, "Print a text sample every N steps (0 = never)")
      ->capture_default_str();
  cmd->add_option("--snapshot-every", a->snapshot_every,
                  "Keep the weights every N steps as snapshots/step-NNNNNN.tinygpt in --out, for `ptl average` "
                  "(0 = none; docs/models.md, \"Weight averaging\")")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--snapshot-from", a->snapshot_from, "The first step a snapshot is kept at (with --snapshot-every)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--log-every", a->log_every, "When stdout is not a terminal, print a line every N steps")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--out", a->out,
                  "Output folder for model.tinygpt, metrics.jsonl and samples.txt (default: runs/<time>; "
                  "with --resume, the checkpoint's folder)");
  cmd->add_flag("--overwrite", a->overwrite, "Replace a run already in --out");
  cmd->add_option("--resume", a->resume,
                  "Continue the run saved in this checkpoint: the same model, batches and schedule; its logs are "
                  "cut back to the checkpoint's step, and model.tinygpt is written in its folder (or --out)");
  cmd->add_option("--layers", a->layers, "Override the preset's number of layers")->check(at_least(1));
  cmd->add_option("--d-model", a->d_model, "Override the preset's width")->check(at_least(1));
  cmd->add_option("--heads", a->heads, "Override the preset's number of heads")->check(at_least(1));
  cmd->add_option("--ctx", a->ctx, "Override the preset's context length")->check(at_least(1));
  auto threads = std::make_shared<int>(0);
  cmd->add_option("--threads", *threads, "CPU threads (default: $PTL_THREADS, else all cores)")->check(at_least(1));
  cmd->callback([a, cmd, threads]() {
    if (*threads > 0) cpu::set_num_threads(*threads);
    run_train(*a, *cmd);
  });
}

}  // namespace ptl::cli
