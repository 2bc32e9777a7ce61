#pragma once
// The `ptl` subcommands. Each registers its options on a CLI11 subcommand and runs when chosen.
#include <CLI/CLI.hpp>

namespace ptl::cli {

void add_train(CLI::App& app);
void add_sample(CLI::App& app);
void add_eval(CLI::App& app);
void add_info(CLI::App& app);
void add_lora(CLI::App& app);  // lora train, merge, info, bench
void add_sft(CLI::App& app);   // sft, sft-eval
void add_bench(CLI::App& app);
void add_export(CLI::App& app);  // init, program

}  // namespace ptl::cli
