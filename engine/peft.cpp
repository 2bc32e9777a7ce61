// PEFT LoRA adapter folders for GPT-2 to and from the spec's adapters (peft.h; docs/gpt2.md).
#include "engine/peft.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/error.h"
#include "engine/json_text.h"

namespace ptl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
// PEFT's names for a model saved from GPT2LMHeadModel; GPT2Model's lack "transformer.".
constexpr const char* kPrefix = "base_model.model.transformer.";
constexpr const char* kBarePrefix = "base_model.model.";

// The spec's LoRA targets that GPT-2 has a module for, in the order the files list them, with
// the name adapter_config.json's target_modules gives each (the bare "c_proj" would be both).
struct Module {
  const char* target;  // the spec's
  const char* path;    // under h.{i}
  const char* listed;  // in target_modules
};
constexpr Module kModules[] = {{"qkv", "attn.c_attn", "c_attn"},
                               {"o", "attn.c_proj", "attn.c_proj"},
                               {"fc_in", "mlp.c_fc", "c_fc"},
                               {"fc_out", "mlp.c_proj", "mlp.c_proj"}};

std::string peft_name(int layer, const Module& m, const char* which) {
  return std::string(kPrefix) + "h." + std::to_string(layer) + "." + m.path + "." + which + ".weight";
}

// The spec's targets one target_modules entry stands for (PEFT matches an entry against the end
// of a module's name, so "c_proj" is both projections of that name). Empty: no GPT-2 module.
std::vector<std::string> targets_of(const std::string& entry) {
  if (entry == "c_attn" || entry == "attn.c_attn") return {"qkv"};
  if (entry == "c_proj") return {"o", "fc_out"};
  if (entry == "attn.c_proj") return {"o"};
  if (entry == "c_fc" || entry == "mlp.c_fc") return {"fc_in"};
  if (entry == "mlp.c_proj") return {"fc_out"};
  return {};
}

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace

PeftConfig peft_config_from_json(std::string_view text, const std::string& name) {
  const json j = parse_json(text, name);
  check(j.is_object(), name + ": not a JSON object");
  const auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  // A key's value, null when absent (messages are built before the check that needs them).
  const auto at = [&](const char* key) { return j.contains(key) ? j[key] : json(); };
  check(has("peft_type"), name + ": no peft_type (a PEFT LoRA adapter has \"peft_type\": \"LORA\")");
  check(j["peft_type"] == "LORA",
        name + ": peft_type is " + shown(j["peft_type"]) + "; only \"LORA\" adapters are read");
  PeftConfig c;
  LoraConfig& lora = c.lora;
  check(has("r"), name + ": no r (the adapter's rank)");
  lora.rank = int(json_int(j["r"], 1, 65536, name + ": r"));
  if (has("lora_alpha")) {  // PEFT's default is 8, ours too
    const json& a = j["lora_alpha"];
    check(a.is_number() && std::isfinite(a.get<double>()) && a.get<double>() != 0.0,
          name + ": lora_alpha " + shown(a) + " is not a non-zero number");
    lora.alpha = a.get<double>();
  }
  if (has("lora_dropout")) {
    const json& d = j["lora_dropout"];
    check(d.is_number() && d.get<double>() >= 0.0 && d.get<double>() < 1.0,
          name + ": lora_dropout " + shown(d) + " is not a rate in [0, 1)");
    lora.dropout = d.get<double>();
  }
  if (has("bias"))
    check(j["bias"] == "none", name + ": bias is " + shown(j["bias"]) +
                                   "; only \"none\" is supported (an adapter here holds no trained biases)");
  const auto refuse_true = [&](const char* key, const char* what) {
    check(!has(key) || at(key) == false,
          name + ": " + key + " is " + shown(at(key)) + "; " + what + " is not supported");
  };
  refuse_true("use_dora", "DoRA");
  refuse_true("lora_bias", "a bias on lora_B");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    check(!has(key) || (at(key).is_object() && at(key).empty()),
          name + ": " + key + " is " + shown(at(key)) + "; per-module ranks and alphas are not supported");
  check(!has("layers_to_transform"), name + ": layers_to_transform is " + shown(at("layers_to_transform")) +
                                         "; adapters on some layers only are not supported");
  check(!has("modules_to_save") || (at("modules_to_save").is_array() && at("modules_to_save").empty()),
        name + ": modules_to_save is " + shown(at("modules_to_save")) +
            "; an adapter here holds LoRA tensors only, no saved modules");
  // rsLoRA scales by alpha / sqrt(r) where LoRA scales by alpha / r: the same update with
  // alpha sqrt(r).
  if (has("use_rslora")) {
    check(j["use_rslora"].is_boolean(), name + ": use_rslora is " + shown(j["use_rslora"]) + ", not true or false");
    if (j["use_rslora"] == true) lora.alpha *= std::sqrt(double(lora.rank));
  }

  const std::string modules = "c_attn, attn.c_proj, c_fc (mlp.c_fc), mlp.c_proj, or c_proj for both";
  check(has("target_modules"), name + ": no target_modules (GPT-2's are " + modules + ")");
  const json& tm = j["target_modules"];
  lora.targets.clear();
  if (tm == "all-linear") {
    lora.targets = {"qkv", "o", "fc_in", "fc_out"};
  } else {
    check(tm.is_array(), name + ": target_modules is " + shown(tm) +
                             ", not a list of module names (a pattern is not read; GPT-2's modules are " + modules +
                             ")");
    for (const json& e : tm) {
      const auto t = e.is_string() ? targets_of(e.get<std::string>()) : std::vector<std::string>{};
      check(!t.empty(), name + ": target_modules names " + shown(e) +
                            ", which is no GPT-2 module LoRA can adapt here (" + modules + ")");
      lora.targets.insert(t.begin(), t.end());
    }
    check(!lora.targets.empty(), name + ": target_modules is empty");
  }
  if (has("base_model_name_or_path")) {
    check(j["base_model_name_or_path"].is_string(),
          name + ": base_model_name_or_path is " + shown(j["base_model_name_or_path"]) + ", not a string");
    c.base_model = j["base_model_name_or_path"].get<std::string>();
  }
  try {
    validate_lora(lora);
  } catch (const Error& e) {
    fail(name + ": " + e.what());
  }
  return c;
}

std::string peft_config_json(const PeftConfig& c) {
  const LoraConfig& lora = c.lora;
  json targets = json::array();
  for (const auto& t : lora.targets) {
    const Module* m = nullptr;
    for (const auto& k : kModules)
      if (t == k.target) m = &k;
    check(m != nullptr, "LoRA target " + t +
                            " has no GPT-2 module (GPT-2's q, k and v are one fused c_attn): train with --targets "
                            "qkv to export to PEFT");
  }
  for (const auto& m : kModules)
    if (lora.targets.count(m.target)) targets.push_back(m.listed);
  // An integral alpha as an integer, as PEFT writes its own (its field is an int).
  const json alpha = lora.alpha == std::floor(lora.alpha) && std::fabs(lora.alpha) < 1e15 ? json(int64_t(lora.alpha))
                                                                                          : json(lora.alpha);
  const json j = {{"peft_type", "LORA"},
                  {"task_type", "CAUSAL_LM"},
                  {"r", lora.rank},
                  {"lora_alpha", alpha},
                  {"lora_dropout", lora.dropout},
                  {"target_modules", targets},
                  {"fan_in_fan_out", true},  // GPT-2's Conv1D layers
                  {"bias", "none"},
                  {"base_model_name_or_path", c.base_model.empty() ? json(nullptr) : json(c.base_model)},
                  {"inference_mode", true},
                  {"init_lora_weights", true},
                  {"modules_to_save", nullptr},
                  {"layers_to_transform", nullptr},
                  {"layers_pattern", nullptr},
                  {"rank_pattern", json::object()},
                  {"alpha_pattern", json::object()},
                  {"use_rslora", false},
                  {"use_dora", false},
                  {"revision", nullptr}};
  return j.dump(2) + "\n";
}

SafeTensors peft_from_adapter(const SafeTensors& adapter, const ModelConfig& mc, const LoraConfig& lora) {
  PeftConfig check_targets{lora, ""};
  (void)peft_config_json(check_targets);  // throws for a target GPT-2 has no module for
  const auto tensor = [&](const std::string& n) {
    const StoredTensor* t = adapter.find(n);
    check(t != nullptr && t->dtype == DType::f32, "adapter tensor '" + n + "' is missing");
    return t;
  };
  SafeTensors out;
  out.metadata["format"] = "pt";
  for (int i = 0; i < mc.n_layers; ++i) {
    const std::string pre = "blocks." + std::to_string(i) + ".";
    for (const auto& m : kModules) {
      if (!lora.targets.count(m.target)) continue;
      const std::string t = m.target;
      if (t != "qkv") {
        const std::string layer = t == "o" ? pre + "attn.o_proj" : pre + "mlp." + t;
        for (const char* which : {"lora_A", "lora_B"}) {
          const StoredTensor* s = tensor(layer + "." + which);
          out.add(peft_name(i, m, which), DType::f32, s->shape, s->data.data());
        }
        continue;
      }
      const StoredTensor* a = tensor(pre + "attn.qkv.lora_A");
      out.add(peft_name(i, m, "lora_A"), DType::f32, a->shape, a->data.data());
      // B [3d, r]: the q, k and v row blocks one after another.
      std::vector<uint8_t> b;
      int64_t rows = 0;
      for (const char* n : {"q", "k", "v"}) {
        const StoredTensor* s = tensor(pre + "attn.qkv." + n + ".lora_B");
        b.insert(b.end(), s->data.begin(), s->data.end());
        rows += s->shape[0];
      }
      out.add(peft_name(i, m, "lora_B"), DType::f32, {rows, lora.rank}, b.data());
    }
  }
  return out;
}

SafeTensors adapter_from_peft(const SafeTensors& peft, const ModelConfig& mc, const LoraConfig& lora,
                              const std::string& what) {
  const int64_t C = mc.d_model, r = lora.rank;
  std::set<std::string> used;
  std::map<std::string, std::vector<uint8_t>> ours;  // the spec's name -> F32 bytes
  // The tensor PEFT saved for layer i's module, with or without "transformer.", checked.
  const auto take = [&](int i, const Module& m, const char* which, std::vector<int64_t> shape) {
    const std::string name = peft_name(i, m, which);
    const std::string bare = kBarePrefix + name.substr(std::string_view(kPrefix).size());
    const StoredTensor* t = peft.find(name);
    if (!t) t = peft.find(bare);
    check(t != nullptr, what + ": missing tensor '" + name + "' (adapter_config.json's r " + std::to_string(r) +
                            " and target_modules on a base with " + std::to_string(mc.n_layers) +
                            " layers need it; looked for with and without 'transformer.')");
    check(t->dtype == DType::f32, what + ": tensor '" + t->name + "' is I32; LoRA tensors are F32, F16 or BF16");
    check(t->shape == shape, what + ": tensor '" + t->name + "' has shape " + shape_str(t->shape) + " but r " +
                                 std::to_string(r) + " on a base with d " + std::to_string(C) + " needs " +
                                 shape_str(shape));
    used.insert(t->name);
    return t;
  };
  for (int i = 0; i < mc.n_layers; ++i) {
    const std::string pre = "blocks." + std::to_string(i) + ".";
    for (const auto& m : kModules) {
      if (!lora.targets.count(m.target)) continue;
      const std::string t = m.target;
      const int64_t in = t == "fc_out" ? 4 * C : C;
      const int64_t out = t == "qkv" ? 3 * C : t == "fc_in" ? 4 * C : C;
      const StoredTensor* a = take(i, m, "lora_A", {r, in});
      const StoredTensor* b = take(i, m, "lora_B", {out, r});
      if (t == "qkv") {
        ours[pre + "attn.qkv.lora_A"] = a->data;
        const size_t block = size_t(C * r) * 4;  // one row block of B, in bytes
        int n = 0;
        for (const char* p : {"q", "k", "v"}) {
          const auto first = b->data.begin() + std::ptrdiff_t(block * size_t(n++));
          ours[pre + "attn.qkv." + p + ".lora_B"] = std::vector<uint8_t>(first, first + std::ptrdiff_t(block));
        }
      } else {
        const std::string layer = t == "o" ? pre + "attn.o_proj" : pre + "mlp." + t;
        ours[layer + ".lora_A"] = a->data;
        ours[layer + ".lora_B"] = b->data;
      }
    }
  }
  for (const auto& t : peft.tensors)
    check(used.count(t.name), what + ": unexpected tensor '" + t.name +
                                  "' (adapter_config.json's target_modules and a base with " +
                                  std::to_string(mc.n_layers) + " layers have no such LoRA tensor)");
  SafeTensors out;
  for (const auto& t : adapter_tensors(mc, lora)) {
    const auto& bytes = ours.at(t.name);
    check(int64_t(bytes.size()) == t.numel() * 4, what + ": tensor for '" + t.name + "' has the wrong size");
    out.add(t.name, DType::f32, t.shape, bytes.data());
  }
  return out;
}

namespace {
NamedFiles peft_files(const PeftConfig& config, const SafeTensors& peft) {
  const std::string text = peft_config_json(config);
  NamedFiles files;
  files.emplace_back(kWeightsFile, encode_safetensors(peft));
  files.emplace_back(kConfigFile, std::vector<uint8_t>(text.begin(), text.end()));
  return files;
}
}  // namespace

PeftExport peft_export(const SafeTensors& f, const std::string& what, const std::string& base_model) {
  const AdapterContents c = inspect_adapter(f, what);  // every tensor there, with its shape
  PeftExport out;
  out.config = PeftConfig{c.lora, base_model};
  if (out.config.base_model.empty())
    if (auto it = f.metadata.find(kPeftBaseModelKey); it != f.metadata.end()) out.config.base_model = it->second;
  try {
    out.tensors = peft_from_adapter(f, c.base_model, c.lora);
  } catch (const Error& e) {
    fail(what + ": cannot export to PEFT: " + e.what());
  }
  out.files = peft_files(out.config, out.tensors);
  return out;
}

void write_peft_folder(const std::string& dir, const NamedFiles& files) {
  write_folder_atomic(dir, files, {kConfigFile, kWeightsFile}, "export-peft");
}

void write_peft_folder(const std::string& dir, const PeftConfig& config, const SafeTensors& peft) {
  write_peft_folder(dir, peft_files(config, peft));
}

PeftFolder read_peft_folder(const std::string& dir_arg) {
  const fs::path dir(dir_arg);
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  check(st.type() != fs::file_type::not_found, "no such folder: " + dir_arg);
  check(fs::is_directory(st),
        dir_arg + " is not a folder (a PEFT adapter is a folder: " + kConfigFile + " and " + kWeightsFile + ")");
  const auto has = [&](const char* file) { return fs::is_regular_file(dir / file, ec); };
  const std::string config_path = (dir / kConfigFile).string();
  check(has(kConfigFile),
        config_path + ": no such file (a PEFT adapter folder has " + kConfigFile + " and " + kWeightsFile + ")");
  PeftFolder out;
  out.config = peft_config_from_json(text_of(read_file_bytes(config_path)), config_path);
  out.weights_path = (dir / kWeightsFile).string();
  check(has(kWeightsFile),
        out.weights_path + ": no such file" +
            (has("adapter_model.bin") ? std::string(" (adapter_model.bin, a pickle, is not read: save the adapter with "
                                                    "safe_serialization, the default)")
                                      : std::string(" (a PEFT adapter folder has it next to ") + kConfigFile + ")"));
  const std::vector<uint8_t> bytes = read_file_bytes(out.weights_path);
  out.tensors = decode_safetensors(bytes.data(), bytes.size(), out.weights_path);
  return out;
}

}  // namespace ptl
