#pragma once
// The `ptl` subcommands. Each registers its options on a CLI11 subcommand and runs when chosen.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace ptl::cli {

// A whole-number option's lower bound, with a message a person can read ("--batch: must be at
// least 1, got 0"; CLI11's PositiveNumber prints its whole double range). Options whose 0 means
// "not given, use the default" take at_least(1), so that an explicit 0 is an error, not the default.
inline CLI::Validator at_least(long long min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size()) return "expects a whole number, got '" + s + "'";
        return v >= min ? std::string() : "must be at least " + std::to_string(min) + ", got " + s;
      },
      min == 0   ? "NONNEGATIVE"
      : min == 1 ? "POSITIVE"
                 : ">=" + std::to_string(min));
}

// A dropout rate: a number in [0, 1) ("--dropout: must be at least 0 and below 1, got 1").
inline CLI::Validator dropout_rate() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != s.size()) return "expects a number, got '" + s + "'";
        return v >= 0.0 && v < 1.0 ? std::string() : "must be at least 0 and below 1, got " + s;
      },
      "[0, 1)");
}

// The process's exit status when a command returns normally: 130 (128 + SIGINT, what shells
// report for Ctrl-C) when a run stopped on Ctrl-C after saving, so scripts can tell it from a
// finished run.
inline int exit_status = 0;
constexpr int kInterruptedStatus = 130;

// Fails when `out` would be written over `input` (the same file, whatever the spelling), so that
// e.g. `--out` naming the base checkpoint cannot replace it.
void check_not_overwriting(const std::string& out, const std::string& input, const std::string& what);

// What `ptl train` does with no options (preset, its batch, steps, lr, schedule, dropout ...):
// `ptl info --defaults --json` prints it, and the playground site starts from the same settings.
nlohmann::json train_defaults();
// What `ptl lora train` does with no options: {"rank", "alpha", "targets": [...], "lr", "steps"}
// (`ptl info --defaults` prints it as "lora_train"; the playground's fine-tune panel starts there).
nlohmann::json lora_train_defaults();

void add_train(CLI::App& app);
void add_sample(CLI::App& app);
void add_eval(CLI::App& app);
void add_info(CLI::App& app);
void add_lora(CLI::App& app);  // lora train, merge, info, bench
void add_sft(CLI::App& app);   // sft, sft-eval
void add_bench(CLI::App& app);
void add_export(CLI::App& app);         // init, program
void add_import_export(CLI::App& app);  // export, import
void add_tokenizer(CLI::App& app);      // tokenizer train, encode, decode, info
void add_hf(CLI::App& app);             // import-hf, export-hf (Hugging Face GPT-2 folders)

}  // namespace ptl::cli
