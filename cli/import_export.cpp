// ptl export / ptl import: checkpoints in and out of ptl.
//   export: the weights and metadata of a checkpoint without its optimizer state (a third of
//           the size), for sampling, evaluating, fine-tuning or loading in PyTorch elsewhere;
//           with --dtype f16 or bf16 the weights are stored in 16 bits (a sixth of the size).
//   import: a safetensors file with the spec's parameters that another tool wrote (no ptl
//           metadata), turned into a checkpoint ptl can sample from, evaluate and train.
//   average: the element-wise mean of several checkpoints of one model (weight averaging: the
//           snapshots `ptl train --snapshot-every` keeps from a run's last steps).
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "engine/checkpoint.h"
#include "engine/error.h"
#include "engine/tokenizer_files.h"
#include "engine/trainer.h"

namespace ptl::cli {

namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string checkpoint, out, dtype = "f32";
};

void run_export(const ExportArgs& a) {
  check_not_overwriting(a.out, a.checkpoint,
                        "--out " + a.out + " is the checkpoint being exported; choose another --out");
  const auto bytes = read_file_bytes(a.checkpoint);
  auto trainer = Trainer::from_checkpoint(bytes, a.checkpoint);
  auto out = trainer->save_checkpoint(false);
  if (a.dtype != "f32") {
    // Every tensor of a weights-only checkpoint is an F32 parameter; the metadata stays as it is
    // (every reader widens the weights back to F32 on load).
    SafeTensors f = decode_safetensors(out.data(), out.size(), a.out);
    for (auto& t : f.tensors) t.encoding = a.dtype == "f16" ? Encoding::f16 : Encoding::bf16;
    out = encode_safetensors(f);
  }
  write_file_atomic(a.out, out);
  std::printf("wrote %s: %lld parameters at step %lld as %s, %.2f MB (%s: %.2f MB; optimizer state left out)\n",
              a.out.c_str(), (long long)trainer->model_config().param_count(), (long long)trainer->state().step,
              a.dtype == "f32"   ? "F32"
              : a.dtype == "f16" ? "F16"
                                 : "BF16",
              out.size() / 1e6, a.checkpoint.c_str(), bytes.size() / 1e6);
}

struct ImportArgs {
  std::string file, out, tokenizer;
  int heads = 0;
};

void run_import(const ImportArgs& a) {
  check_not_overwriting(a.out, a.file, "--out " + a.out + " is the file being imported; choose another --out");
  const auto bytes = read_file_bytes(a.file);
  SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), a.file);
  std::string how;
  if (f.metadata.count("model_config")) {
    // Already a ptl checkpoint (or one from python_ref): validated and written as is, less the
    // optimizer state, which a model from elsewhere would not carry on.
    check(a.heads == 0, a.file + " is a ptl checkpoint: its config has the heads; --heads is for files without one");
    check(a.tokenizer.empty(),
          a.file + " is a ptl checkpoint: it records its tokenizer; --tokenizer is for files without one");
    how = "a ptl checkpoint already";
  } else {
    const ModelConfig mc = infer_model_config(f, a.heads, a.file);
    how = "config from the tensors' shapes" + std::string(a.heads ? "" : ", heads of the preset with those shapes");
    // The tokenizer given (its vocabulary must be tok_emb's rows); without one, bytes for 256 rows.
    std::optional<ModelTokenizer> tok;
    if (!a.tokenizer.empty()) {
      tok = ModelTokenizer::of(load_tokenizer(a.tokenizer));
      check(tok->vocab_size() == mc.vocab_size, a.tokenizer + " has " + std::to_string(tok->vocab_size()) +
                                                    " tokens but " + a.file + "'s tok_emb.weight has " +
                                                    std::to_string(mc.vocab_size) + " rows (they must be equal)");
      how += ", tokenizer " + a.tokenizer;
    }
    f = with_checkpoint_metadata(std::move(f), mc, tok ? &*tok : nullptr);
  }
  auto trainer = Trainer::from_checkpoint(encode_safetensors(f), a.file);  // every tensor checked here
  write_file_atomic(a.out, trainer->save_checkpoint(false));
  const ModelConfig& mc = trainer->model_config();
  std::printf("wrote %s: %d layers, d %d, %d heads, ctx %d, %lld parameters (%s)\n", a.out.c_str(), mc.n_layers,
              mc.d_model, mc.n_heads, mc.ctx, (long long)mc.param_count(), how.c_str());
}

struct AverageArgs {
  std::vector<std::string> checkpoints;
  std::string out, dtype = "f32";
};

// Weight averaging: late in a run the weights wander around a minimum with the noise of the
// batches, and their mean sits nearer its centre than any one of them (Izmailov et al. 2018,
// "Averaging Weights Leads to Wider Optima"). The sums are kept in double so that the order of
// the files changes nothing but the last bit.
void run_average(const AverageArgs& a) {
  for (const auto& c : a.checkpoints)
    check_not_overwriting(a.out, c, "--out " + a.out + " is one of the checkpoints averaged; choose another --out");
  std::optional<CheckpointContents> first;
  std::vector<TensorInfo> params;
  std::vector<std::vector<double>> sums;
  SafeTensors latest;  // the file with the most steps (the run's latest): its metadata is kept
  int64_t latest_step = -1;
  nlohmann::json sources = nlohmann::json::array();
  for (const std::string& path : a.checkpoints) {
    const auto bytes = read_file_bytes(path);
    SafeTensors f = decode_safetensors(bytes.data(), bytes.size(), path);
    const CheckpointContents c = inspect_checkpoint(f, path);  // every tensor and setting checked
    if (!first) {
      first = c;
      params = parameter_list(c.model);
      for (const auto& p : params) sums.emplace_back(size_t(f.find(p.name)->numel()), 0.0);
    } else {
      check(c.model == first->model, path + " is another model than " + a.checkpoints[0] + " (" +
                                         c.model.to_json().dump() + " against " + first->model.to_json().dump() +
                                         "): only one model's weights average");
      check(c.tokenizer.id() == first->tokenizer.id(),
            path + " reads another tokenizer than " + a.checkpoints[0] + ": only one model's weights average");
    }
    // By name: writers may order the tensors differently.
    for (size_t t = 0; t < params.size(); ++t) {
      const float* w = f.find(params[t].name)->f32();
      for (size_t j = 0; j < sums[t].size(); ++j) sums[t][j] += w[j];
    }
    sources.push_back(
        {{"file", fs::path(path).filename().string()}, {"step", c.state.step}, {"sha256", sha256_hex(bytes)}});
    std::printf("%s: step %lld\n", path.c_str(), (long long)c.state.step);
    if (c.state.step > latest_step) {
      latest_step = c.state.step;
      latest = std::move(f);
    }
  }
  SafeTensors out;  // the parameters only, in their canonical order
  out.metadata = std::move(latest.metadata);
  out.metadata["averaged_from"] = sources.dump();
  const double n = double(a.checkpoints.size());
  for (size_t t = 0; t < params.size(); ++t) {
    std::vector<float> mean(sums[t].size());
    for (size_t j = 0; j < mean.size(); ++j) mean[j] = float(sums[t][j] / n);
    out.add(params[t].name, DType::f32, params[t].shape, mean.data());
    if (a.dtype != "f32") out.tensors.back().encoding = a.dtype == "f16" ? Encoding::f16 : Encoding::bf16;
  }
  const auto bytes = encode_safetensors(out);
  inspect_checkpoint(decode_safetensors(bytes.data(), bytes.size(), a.out), a.out);  // what is written loads
  write_file_atomic(a.out, bytes);
  std::printf("wrote %s: the mean of %zu checkpoints' %lld parameters (metadata of step %lld) as %s, %.2f MB\n",
              a.out.c_str(), a.checkpoints.size(), (long long)first->model.param_count(), (long long)latest_step,
              a.dtype == "f32"   ? "F32"
              : a.dtype == "f16" ? "F16"
                                 : "BF16",
              bytes.size() / 1e6);
}

}  // namespace

void add_import_export(CLI::App& app) {
  auto e = std::make_shared<ExportArgs>();
  CLI::App* ex = app.add_subcommand(
      "export",
      "Write a checkpoint's weights and metadata without its optimizer state (for sampling or use elsewhere)");
  ex->add_option("checkpoint", e->checkpoint, "Checkpoint to export")->required();
  ex->add_option("--out", e->out, "File to write (.tinygpt or .safetensors)")->required();
  ex->add_option("--dtype", e->dtype,
                 "Weights as f32 (exact), f16 or bf16 (half the size, rounded to nearest even; every ptl front "
                 "end and python_ref widens them back to f32 on load)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  ex->callback([e]() { run_export(*e); });

  auto i = std::make_shared<ImportArgs>();
  CLI::App* im = app.add_subcommand(
      "import", "Make a ptl checkpoint of a safetensors file holding this GPT's parameters (e.g. saved from PyTorch)");
  im->add_option("file", i->file,
                 "safetensors file with the parameter names of docs/checkpoint-format.md (F32, F16 or BF16)")
      ->required();
  im->add_option("--out", i->out, "Checkpoint to write")->required();
  im->add_option("--heads", i->heads, "Attention heads (not in any tensor's shape; default: the matching preset's)")
      ->check(at_least(1));
  im->add_option("--tokenizer", i->tokenizer,
                 "The tokenizer the weights read (tokenizer.json or a folder of GPT-2's files; default: bytes for a "
                 "vocabulary of 256)");
  im->callback([i]() { run_import(*i); });

  auto v = std::make_shared<AverageArgs>();
  CLI::App* av = app.add_subcommand(
      "average",
      "Average the weights of several checkpoints of one model (e.g. the snapshots of `ptl train --snapshot-every`)");
  av->add_option("checkpoints", v->checkpoints, "Checkpoints to average (the same model and tokenizer)")
      ->required()
      ->expected(1, -1);
  av->add_option("--out", v->out,
                 "File to write: the mean weights, no optimizer state, the metadata of the checkpoint with the most "
                 "steps, and \"averaged_from\" (each file's name, step and sha256)")
      ->required();
  av->add_option("--dtype", v->dtype, "Weights as f32, f16 or bf16 (as ptl export)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  av->callback([v]() { run_average(*v); });
}

}  // namespace ptl::cli
