// ptl: train, sample from, evaluate and inspect tiny GPTs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/checkpoint.h"
#include "engine/error.h"

namespace ptl::cli {

void check_not_overwriting(const std::string& out, const std::string& input, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool same = fs::exists(out, ec) ? fs::equivalent(out, input, ec)
                                        : fs::weakly_canonical(out, ec) == fs::weakly_canonical(input, ec);
  check(!same, what);
}

}  // namespace ptl::cli

namespace {

// CLI11 reports a mistyped command (`ptl trian`) as "A subcommand is required", and runs
// `ptl export --help` as the top-level help: check the command words first, so that the error
// names the word. Only words before the first option are commands (`ptl lora train ...`).
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    if (at->get_subcommands({}).empty()) break;  // a positional argument of the command
    CLI::App* next = nullptr;
    std::string known;
    for (CLI::App* sub : at->get_subcommands({})) {
      if (sub->get_name() == argv[i]) next = sub;
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!next) {
      const std::string where = at == &app ? "ptl" : "ptl " + at->get_name();
      return "unknown command '" + std::string(argv[i]) + "' (" + where + " has: " + known + "); see " + where +
             " --help";
    }
    at = next;
  }
  return "";
}

int fail_with(const std::string& message) {
  std::fflush(stdout);
  std::cerr << "ptl: error: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ptl: train and post-train small GPT language models on the CPU.\n"
      "Run `ptl train` to train the Medium preset on TinyShakespeare (about two and a half minutes on two idle cores; "
      "docs/models.md), then "
      "`ptl sample runs/<time>/model.tinygpt`."};
  app.name("ptl");
  app.set_version_flag("--version", ptl::kVersionString);
  app.require_subcommand(1);
  // An option given twice takes its last value, as in most command-line tools (CLI11's default
  // is an error, "At Most 1 required but received 2"). Subcommands inherit this.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  ptl::cli::add_train(app);
  ptl::cli::add_sample(app);
  ptl::cli::add_eval(app);
  ptl::cli::add_info(app);
  ptl::cli::add_lora(app);
  ptl::cli::add_sft(app);
  ptl::cli::add_bench(app);
  ptl::cli::add_export(app);
  ptl::cli::add_import_export(app);
  ptl::cli::add_tokenizer(app);
  ptl::cli::add_hf(app);
  if (const std::string bad = unknown_command(app, argc, argv); !bad.empty()) return fail_with(bad);
  if (const char* env = std::getenv("PTL_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || n < 1)
      return fail_with("PTL_THREADS must be a whole number of threads, at least 1 (got '" + std::string(env) + "')");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ptl::Error& e) {
    return fail_with(e.what());
  } catch (const std::bad_alloc&) {
    return fail_with("out of memory");
  } catch (const std::exception& e) {
    return fail_with(e.what());
  }
  // Output that never arrived (a full disk, a closed pipe, /dev/full) must not look like success.
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout)
    return fail_with("cannot write the output (standard output): the disk may be full or the reader gone");
  return ptl::cli::exit_status;
}
