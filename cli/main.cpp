// ptl: train, sample from, evaluate and inspect tiny GPTs.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "engine/checkpoint.h"
#include "engine/error.h"

int main(int argc, char** argv) {
  CLI::App app{"ptl: train and post-train small GPT language models on the CPU.\n"
               "Run `ptl train` to train the Small preset on TinyShakespeare, then `ptl sample runs/<time>/model.tinygpt`."};
  app.name("ptl");
  app.set_version_flag("--version", ptl::kVersionString);
  app.require_subcommand(1);
  ptl::cli::add_train(app);
  ptl::cli::add_sample(app);
  ptl::cli::add_eval(app);
  ptl::cli::add_info(app);
  ptl::cli::add_lora(app);
  ptl::cli::add_sft(app);
  ptl::cli::add_bench(app);
  ptl::cli::add_export(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ptl::Error& e) {
    std::fflush(stdout);
    std::cerr << "ptl: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "ptl: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ptl: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
