#pragma once
// PEFT's LoRA adapter folders for GPT-2 models (docs/gpt2.md, "PEFT adapters"): adapter_config.json
// and adapter_model.safetensors, the layout `PeftModel.from_pretrained` loads, to and from this
// engine's adapters (lora.h).
//
// GPT-2's modules and the spec's LoRA targets: attn.c_attn = qkv (one A over the input, one B
// [3d, r] over q, k and v), attn.c_proj = o, mlp.c_fc = fc_in, mlp.c_proj = fc_out. PEFT's A and
// B are [r, in] and [out, r] as ours (fan_in_fan_out only transposes the merged update into
// Conv1D's [in, out] layout), so the tensors are copied, never transposed.
#include <string>
#include <string_view>

#include "engine/lora.h"
#include "engine/model.h"
#include "engine/safetensors.h"

namespace ptl {

struct PeftConfig {
  LoraConfig lora;         // rank, alpha, dropout and the targets in the spec's names
  std::string base_model;  // base_model_name_or_path ("" = null)
};

// adapter_config.json's text -> the config. peft_type "LORA", r, lora_alpha, target_modules (a
// list of GPT-2 module names, or one), bias "none", lora_dropout; use_rslora is folded into
// alpha; DoRA, per-module ranks (rank_pattern, alpha_pattern), layers_to_transform and
// modules_to_save are refused. Throws ptl::Error with one line naming `name` (the file).
PeftConfig peft_config_from_json(std::string_view text, const std::string& name);
// The adapter_config.json that describes `config` (targets q, k and v alone have no GPT-2 module:
// an error says to use qkv).
std::string peft_config_json(const PeftConfig& config);

// The spec's adapter tensors (adapter_tensors' names and shapes, F32) -> PEFT's
// ("base_model.model.transformer.h.{i}.attn.c_attn.lora_A.weight" ...), and back. The reverse
// checks every name and shape against the config (PEFT's names with or without "transformer.",
// as saved from GPT2LMHeadModel or GPT2Model) and names `what` (the file) in its errors.
SafeTensors peft_from_adapter(const SafeTensors& adapter, const ModelConfig& model, const LoraConfig& lora);
SafeTensors adapter_from_peft(const SafeTensors& peft, const ModelConfig& model, const LoraConfig& lora,
                              const std::string& what);

// Metadata key of an adapter file imported from PEFT: the folder's base_model_name_or_path,
// which an export writes back.
inline constexpr const char* kPeftBaseModelKey = "peft_base_model";

// An adapter file (format "tinygpt-lora", decoded; `what` names it in errors) as PEFT's folder:
// its config (base_model_name_or_path: `base_model`, else the file's kPeftBaseModelKey, else
// null) and tensors, and the two files' bytes (adapter_config.json, adapter_model.safetensors).
// `ptl lora export-peft` and the WebAssembly API share it.
struct PeftExport {
  PeftConfig config;
  SafeTensors tensors;
  NamedFiles files;
};
PeftExport peft_export(const SafeTensors& adapter_file, const std::string& what, const std::string& base_model);

// Writes adapter_config.json and adapter_model.safetensors (F32) into `dir` as one step
// (write_folder_atomic): `dir` may be new, empty or an earlier export.
void write_peft_folder(const std::string& dir, const PeftConfig& config, const SafeTensors& peft);
void write_peft_folder(const std::string& dir, const NamedFiles& files);  // peft_export's

struct PeftFolder {
  PeftConfig config;
  SafeTensors tensors;  // PEFT's names, F32 (F16 and BF16 widened)
  std::string weights_path;
};
// Reads a folder's adapter_config.json and adapter_model.safetensors (the tensors unchecked: see
// adapter_from_peft). Throws ptl::Error naming the folder or file and the problem.
PeftFolder read_peft_folder(const std::string& dir);

}  // namespace ptl
