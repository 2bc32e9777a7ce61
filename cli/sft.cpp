// ptl sft: full fine-tuning on SFT examples (JSONL, chat template, loss on the replies only).
// ptl sft-eval: exact-match accuracy of greedy replies on held-out examples.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/finetune.h"
#include "engine/error.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace fs = std::filesystem;

namespace {

void run_sft(const FinetuneArgs& a) {
  check(a.data.ends_with(".jsonl"),
        "ptl sft trains on SFT examples: --data must be a .jsonl file (got " + a.data + ")");
  check_not_overwriting(
      (fs::path(a.out) / "model.tinygpt").string(), a.base,
      "--out " + a.out + " holds the base checkpoint: the fine-tuned model would replace it; choose another --out");
  auto trainer = setup_finetune(a);
  const ModelConfig& mc = trainer->model_config();
  const TrainConfig& tc = trainer->train_config();
  const std::string path = (fs::path(a.out) / "model.tinygpt").string();
  std::printf(
      "ptl sft: base %s (%d layers, d %d, ctx %d, %lld parameters, all trained)\n"
      "batch %d, %s lr %.2e, %lld steps\ndata: %s\nout: %s\n",
      a.base.c_str(), mc.n_layers, mc.d_model, mc.ctx, (long long)mc.param_count(), tc.batch, tc.schedule.c_str(),
      tc.lr, (long long)tc.steps, describe_data(*trainer).c_str(), a.out.c_str());
  std::fflush(stdout);
  run_finetune_loop(
      *trainer, a, [&] { write_file_atomic(path, trainer->save_checkpoint(false)); }, "model");
  const auto& s = trainer->state();
  std::printf("done: %lld steps, %.1f s (%.0f tokens/s). Checkpoint: %s\n", (long long)s.step, s.elapsed_seconds,
              double(s.tokens_seen) / std::max(1e-9, s.elapsed_seconds), path.c_str());
}

struct SftEvalArgs {
  std::string checkpoint, adapter, data;
  int max_tokens = 0;
  int show = 3;
  bool json = false;
};

void run_sft_eval(const SftEvalArgs& a) {
  auto trainer = Trainer::from_checkpoint(read_file_bytes(a.checkpoint), a.checkpoint);
  if (!a.adapter.empty()) trainer->load_adapter(read_file_bytes(a.adapter), a.adapter);
  const auto examples = read_sft_file(a.data, &trainer->tokenizer().id());
  const Tokenizer& tokenizer = trainer->tokenizer().text();
  const int max_tokens = a.max_tokens > 0 ? a.max_tokens : trainer->model_config().ctx;
  SamplingOptions greedy;
  greedy.temperature = 0;
  const std::string end = kChatEnd;
  int64_t exact = 0, ended = 0, shown = 0;
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& ex : examples) {
    std::string reply;
    bool stopped = false;
    // The prompt in the tokens training saw (the template's parts encoded one by one); the reply
    // ends where "<|end|>" appears in its bytes (a token may carry more after it).
    trainer->generate(chat_prompt_tokens(ex, tokenizer), max_tokens, greedy, [&](int32_t tok) {
      reply += tokenizer.token_bytes(tok);
      stopped = reply.find(end) != std::string::npos;
      return !stopped;
    });
    if (stopped) {
      reply.resize(reply.find(end));
      ++ended;
    }
    const bool ok = stopped && reply == chat_reply(ex);
    exact += ok;
    if (!ok && shown < a.show) {
      ++shown;
      failures.push_back(
          {{"line", ex.line}, {"expected", chat_reply(ex)}, {"got", printable_utf8(reply)}, {"ended", stopped}});
    }
  }
  const double accuracy = double(exact) / double(examples.size());
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"examples", examples.size()},
                                       {"exact_match", exact},
                                       {"accuracy", accuracy},
                                       {"ended", ended},
                                       {"failures", failures}}
                            .dump()
                            .c_str());
    return;
  }
  for (const auto& f : failures)
    std::printf("line %d: expected \"%s\", got \"%s\"%s\n", f["line"].get<int>(),
                f["expected"].get<std::string>().c_str(), f["got"].get<std::string>().c_str(),
                f["ended"].get<bool>() ? "" : " (no <|end|>)");
  std::printf("%s: exact match %lld / %zu = %.1f%% (%lld replies ended with <|end|>)\n", a.data.c_str(),
              (long long)exact, examples.size(), 100.0 * accuracy, (long long)ended);
}

}  // namespace

void add_sft(CLI::App& app) {
  auto a = std::make_shared<FinetuneArgs>();
  CLI::App* cmd =
      app.add_subcommand("sft", "Fine-tune every weight of a base on SFT examples (JSONL) into OUT/model.tinygpt");
  add_finetune_options(cmd, *a,
                       "SFT examples (.jsonl: one {\"prompt\", \"response\"} or {\"messages\"} object per line)");
  cmd->add_option("--dropout", a->dropout, "Dropout rate while fine-tuning (docs/model.md, \"Dropout\")")
      ->capture_default_str()
      ->check(dropout_rate());
  cmd->callback([a]() { run_sft(*a); });

  auto e = std::make_shared<SftEvalArgs>();
  CLI::App* ev = app.add_subcommand("sft-eval", "Exact-match accuracy of greedy replies to SFT examples (JSONL)");
  ev->add_option("checkpoint", e->checkpoint, "Checkpoint")->required();
  ev->add_option("--adapter", e->adapter, "LoRA adapter to apply to the checkpoint");
  ev->add_option("--data", e->data, "Examples (.jsonl); each last assistant message is the expected reply")->required();
  ev->add_option("--max-tokens", e->max_tokens, "Longest reply to generate, in tokens (default: the context length)")
      ->check(at_least(1));
  ev->add_option("--show", e->show, "Print this many wrong replies")->capture_default_str()->check(at_least(0));
  ev->add_flag("--json", e->json, "Print one JSON object {examples, exact_match, accuracy, ended, failures}");
  ev->callback([e]() { run_sft_eval(*e); });
}

}  // namespace ptl::cli
