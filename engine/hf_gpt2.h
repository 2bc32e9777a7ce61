#pragma once
// Hugging Face GPT-2 folders (docs/gpt2.md): config.json, the weights in model.safetensors or in
// shards listed by model.safetensors.index.json, and the tokenizer files. Read into this engine's
// model (the spec's names and layouts, docs/model.md) and written back.
//
// GPT-2 is this architecture with the tanh GELU. Its names differ (wte, h.{i}.ln_1, attn.c_attn,
// mlp.c_fc, ...), its Conv1D weights are stored [in, out] (y = x W + b), the transpose of the
// spec's [out, in], and its q, k and v projections are one fused c_attn [d, 3d].
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config.h"
#include "engine/folder_files.h"
#include "engine/safetensors.h"
#include "engine/tokenizer.h"
#include "engine/trainer.h"

namespace ptl {

// config.json's text -> the model config: model_type "gpt2", n_inner null or 4 n_embd,
// activation_function gelu_new (gelu "tanh") or gelu (the exact form), layer_norm_epsilon 1e-5,
// tied embeddings. Anything this architecture is not is an error naming `name` (the file).
ModelConfig hf_gpt2_config(std::string_view json_text, const std::string& name);
// The config.json that describes `config` to transformers' GPT2Config; `eos_id` is the
// tokenizer's <|endoftext|> (bos and eos), or -1 for none.
std::string hf_gpt2_config_json(const ModelConfig& config, int eos_id = -1);

// GPT-2's parameters for a config, without the "transformer." prefix, with their Hugging Face
// shapes (Conv1D weights [in, out]), in the order GPT2Model declares them.
std::vector<std::pair<std::string, std::vector<int64_t>>> hf_gpt2_parameters(const ModelConfig& config);
// GPT-2's tensors (names without the prefix, shapes as hf_gpt2_parameters, F32) -> the spec's
// parameters in parameter_list order, and back (names with the "transformer." prefix, as
// GPT2LMHeadModel saves them). Exact: only copies and transposes.
SafeTensors spec_from_hf_gpt2(const std::map<std::string, StoredTensor>& hf, const ModelConfig& config);
SafeTensors hf_gpt2_from_spec(const SafeTensors& spec, const ModelConfig& config);

struct HfGpt2Folder {
  ModelConfig config;
  SafeTensors weights;  // the spec's parameters, F32
  std::optional<Tokenizer> tokenizer;
  std::string weights_from;    // for messages: "model.safetensors, F32" or "3 shards, BF16"
  std::string tokenizer_from;  // "tokenizer.json", "vocab.json + merges.txt", or "" (none in the folder)
};

// Reads and checks a folder's files (on disk, or bytes a browser picked: folder_files.h): every name, shape and dtype,
// lm_head.weight only as a copy of wte.weight, the attention-mask buffers (h.{i}.attn.bias, .masked_bias) ignored, and
// the tokenizer's size against vocab_size. Throws ptl::Error with one line naming the file and the problem.
HfGpt2Folder read_hf_gpt2(const FolderFiles& folder);
HfGpt2Folder read_hf_gpt2(const std::string& dir);  // a folder on disk (its absence named first)

// A read folder as a model, as `ptl import-hf` and the WebAssembly API make it: the weights and
// config through a checkpoint's encoding and checks (Trainer::from_checkpoint, `what` naming the
// folder), the folder's tokenizer recorded when it has exactly the model's ids (one with fewer, a
// vocabulary padded past the tokenizer's, is checked only). `summary`: one line, "GPT-2 with 2
// layers, d 64, ... (model.safetensors, F32; tokenizer vocab.json + merges.txt, 50257 ids, ...)".
// `checkpoint`: the model's checkpoint file (what `ptl import-hf` writes), whose sha256 is the
// trainer's base_sha256, so that adapters trained on either side load on the other.
struct HfGpt2Import {
  std::unique_ptr<Trainer> trainer;
  std::vector<uint8_t> checkpoint;
  std::string summary;
  bool tokenizer_stored = false;
};
HfGpt2Import import_hf_gpt2(HfGpt2Folder folder, const std::string& what);

// The files of a Hugging Face folder for a model: config.json, model.safetensors (F32, GPT-2's
// names) and, given a tokenizer, tokenizer.json.
NamedFiles hf_gpt2_files(const ModelConfig& config, const SafeTensors& spec, const Tokenizer* tokenizer);
// The same for a checkpoint (decoded; `what` names it): its model, weights and the tokenizer it
// records (none for a model of ids). `summary`: what was written, for messages.
struct HfGpt2Export {
  NamedFiles files;
  std::string summary;
};
HfGpt2Export hf_gpt2_export(const SafeTensors& checkpoint, const std::string& what);

// Writes config.json, model.safetensors (F32, GPT-2's names) and, given a tokenizer,
// tokenizer.json into `dir`, as one step: the files go to a new folder beside it that then takes
// its place, so a failure leaves `dir` as it was. `dir` may be new, empty, or an earlier export
// (holding only files this writes); anything else in it is refused before anything is written.
void write_hf_gpt2(const std::string& dir, const ModelConfig& config, const SafeTensors& spec,
                   const Tokenizer* tokenizer);
void write_hf_gpt2(const std::string& dir, const NamedFiles& files);  // files of hf_gpt2_files / hf_gpt2_export

}  // namespace ptl
