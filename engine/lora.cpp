#include "engine/lora.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "engine/backends/cpu/cpu_backend.h"
#include "engine/dropout.h"
#include "engine/error.h"

namespace ptl {

namespace {

// In canonical order. "qkv" is the fused adapter over q, k and v (GPT-2's c_attn).
const std::vector<std::string> kTargets = {"q", "k", "v", "qkv", "o", "fc_in", "fc_out"};
constexpr const char* kChoices = "q, k, v, o, fc_in, fc_out, qkv";

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

nlohmann::json meta_json(const SafeTensors& f, const std::string& key, const std::string& what) {
  auto it = f.metadata.find(key);
  check(it != f.metadata.end(), what + ": adapter metadata lacks '" + key + "'");
  try {
    return nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception&) {
    fail(what + ": adapter metadata '" + key + "' is not valid JSON");
  }
}

}  // namespace

std::set<std::string> parse_lora_targets(const std::string& list) {
  std::set<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    item = trim(item);
    if (item.empty()) continue;
    if (item == "all") {
      out.insert({"q", "k", "v", "o", "fc_in", "fc_out"});
    } else if (item == "attn") {
      out.insert({"q", "k", "v", "o"});
    } else if (item == "mlp") {
      out.insert({"fc_in", "fc_out"});
    } else if (item == "c_attn" || item == "attn.c_attn") {  // GPT-2's module names (docs/gpt2.md)
      out.insert("qkv");
    } else if (item == "attn.c_proj") {
      out.insert("o");
    } else if (item == "c_fc" || item == "mlp.c_fc") {
      out.insert("fc_in");
    } else if (item == "mlp.c_proj") {
      out.insert("fc_out");
    } else if (item == "c_proj") {  // as PEFT reads it: both modules of that name
      out.insert({"o", "fc_out"});
    } else {
      check(std::find(kTargets.begin(), kTargets.end(), item) != kTargets.end(),
            "unknown LoRA target '" + item + "' (choose from " + kChoices +
                ", or attn, mlp, all, or GPT-2's c_attn, attn.c_proj, c_fc, mlp.c_proj)");
      out.insert(item);
    }
  }
  check(!out.empty(), std::string("no LoRA targets given (choose from ") + kChoices + ")");
  return out;
}

std::string lora_targets_string(const std::set<std::string>& targets) {
  std::string out;
  for (const auto& t : kTargets)
    if (targets.count(t)) out += (out.empty() ? "" : ",") + t;
  return out;
}

LoraConfig default_lora() {
  LoraConfig c;  // alpha and targets: the struct's defaults
  c.rank = 2;
  return c;
}

void validate_lora(const LoraConfig& lora) {
  check(lora.rank >= 1, "LoRA rank must be at least 1, got " + std::to_string(lora.rank));
  check(std::isfinite(lora.alpha) && lora.alpha != 0.0, "LoRA alpha must be a non-zero number");
  check(std::isfinite(lora.weight_decay) && lora.weight_decay >= 0.0, "LoRA weight decay must not be negative");
  dropout::check_rate(lora.dropout, "LoRA dropout");
  check(!lora.targets.empty(), std::string("no LoRA targets given (choose from ") + kChoices + ")");
  for (const auto& t : lora.targets)
    check(std::find(kTargets.begin(), kTargets.end(), t) != kTargets.end(),
          "unknown LoRA target '" + t + "' (choose from " + kChoices + ")");
  for (const char* t : {"q", "k", "v"})
    check(!lora.targets.count("qkv") || !lora.targets.count(t),
          std::string("LoRA targets qkv and ") + t + " overlap: qkv adapts q, k and v together; choose one");
}

std::vector<LoraUpdate> lora_updates(const ModelConfig& mc, const LoraConfig& lora) {
  std::vector<LoraUpdate> out;
  for (int i = 0; i < mc.n_layers; ++i) {
    const std::string pre = "blocks." + std::to_string(i) + ".";
    for (const auto& t : kTargets) {
      if (!lora.targets.count(t)) continue;
      if (t == "qkv") {
        for (const char* n : {"q", "k", "v"})
          out.push_back({pre + "attn.qkv.lora_A", pre + "attn.qkv." + n + ".lora_B", pre + "attn." + n + "_proj"});
        continue;
      }
      const std::string layer = t == "fc_in" || t == "fc_out" ? pre + "mlp." + t : pre + "attn." + t + "_proj";
      out.push_back({layer + ".lora_A", layer + ".lora_B", layer});
    }
  }
  return out;
}

nlohmann::json lora_to_json(const LoraConfig& lora) {
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& t : kTargets)
    if (lora.targets.count(t)) targets.push_back(t);
  return {{"rank", lora.rank},
          {"alpha", lora.alpha},
          {"targets", targets},
          {"weight_decay", lora.weight_decay},
          {"dropout", lora.dropout}};
}

LoraConfig lora_from_json(const nlohmann::json& j) {
  check(j.is_object(), "LoRA config: expected a JSON object");
  LoraConfig c;
  try {
    c.rank = int(json_int(j.at("rank"), 0, std::numeric_limits<int>::max(), "LoRA config: 'rank'"));
    c.alpha = j.at("alpha").get<double>();
    c.targets.clear();
    for (const auto& t : j.at("targets")) c.targets.insert(t.get<std::string>());
    c.weight_decay = j.value("weight_decay", 0.0);
    c.dropout = j.value("dropout", 0.0);  // absent in older adapters: no dropout
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("LoRA config: ") + e.what());
  }
  validate_lora(c);
  return c;
}

std::vector<TensorInfo> adapter_tensors(const ModelConfig& mc, const LoraConfig& lora) {
  std::vector<TensorInfo> out;
  for (auto& t : parameter_list(mc, lora))
    if (t.name.ends_with(".lora_A") || t.name.ends_with(".lora_B")) out.push_back(std::move(t));
  return out;
}

bool is_adapter(const SafeTensors& f) {
  auto it = f.metadata.find("format");
  return it != f.metadata.end() && it->second == kAdapterFormat;
}

AdapterContents inspect_adapter(const SafeTensors& f, const std::string& what) {
  auto fmt = f.metadata.find("format");
  check(fmt != f.metadata.end() && fmt->second == kAdapterFormat,
        what + ": not a LoRA adapter (its safetensors metadata has no format \"tinygpt-lora\")" +
            (fmt != f.metadata.end() && fmt->second == "tinygpt" ? "; it is a model checkpoint" : ""));
  auto ver = f.metadata.find("format_version");
  check(ver != f.metadata.end(), what + ": adapter has no format_version");
  check(ver->second == std::to_string(kAdapterVersion), what + ": unsupported adapter format_version " + ver->second +
                                                            " (this ptl reads version " +
                                                            std::to_string(kAdapterVersion) + ")");
  AdapterContents c;
  try {
    c.base_model = ModelConfig::from_json(meta_json(f, "model_config", what));
    c.lora = lora_from_json(meta_json(f, "lora_config", what));
    if (f.metadata.count("train_config")) c.train = TrainConfig::from_json(meta_json(f, "train_config", what));
  } catch (const Error& e) {
    const std::string m = e.what();
    fail(m.starts_with(what) ? m : what + ": " + m);
  }
  // The base's tokenizer identity (absent: a byte-level base, as adapters were before BPE).
  c.tokenizer = f.metadata.count("tokenizer") ? TokenizerId::from_json(meta_json(f, "tokenizer", what), what)
                                              : TokenizerId::from_json(nlohmann::json{{"type", "byte"}}, what);
  auto sha = f.metadata.find("base_sha256");
  auto wsha = f.metadata.find("base_weights_sha256");
  check(sha == f.metadata.end() || sha->second.size() == 64, what + ": adapter metadata 'base_sha256' is not a sha256");
  check(wsha == f.metadata.end() || wsha->second.size() == 64,
        what + ": adapter metadata 'base_weights_sha256' is not a sha256");
  check(sha != f.metadata.end() || wsha != f.metadata.end(),
        what + ": adapter metadata lacks the base's sha256 (base_weights_sha256 or base_sha256)");
  if (sha != f.metadata.end()) c.base_sha256 = sha->second;
  if (wsha != f.metadata.end()) c.base_weights_sha256 = wsha->second;
  if (f.metadata.count("train_state")) {
    auto s = meta_json(f, "train_state", what);
    c.steps = s.contains("step")
                  ? json_int(s["step"], 0, std::numeric_limits<int64_t>::max(), what + ": train_state 'step'")
                  : 0;
  }
  if (f.metadata.count("loss_history")) {
    auto h = meta_json(f, "loss_history", what);
    if (h.is_array())
      for (const auto& e : h) {
        if (!e.is_array() || e.size() < 2 || !e[0].is_number() || !e[1].is_number()) continue;
        if (!e[0].is_number_integer()) continue;  // a step is an integer: 1e300 is no step
        LossPoint p{e[0].get<int64_t>(), e[1].get<double>(), std::nullopt};
        if (e.size() > 2 && e[2].is_number()) p.val_loss = e[2].get<double>();
        c.history.push_back(p);
      }
  }
  if (auto cb = f.metadata.find("created_by"); cb != f.metadata.end()) c.created_by = cb->second;

  std::vector<TensorInfo> expected;
  try {
    expected = adapter_tensors(c.base_model, c.lora);  // checks the rank against every layer
  } catch (const Error& e) {
    fail(what + ": " + e.what());
  }
  std::set<std::string> names;
  for (const auto& t : expected) {
    names.insert(t.name);
    const StoredTensor* s = f.find(t.name);
    check(s != nullptr, what + ": missing adapter tensor '" + t.name + "'");
    check(s->dtype == DType::f32, what + ": tensor '" + t.name + "' is I32; it must be F32 (or F16 or BF16)");
    check(s->shape == t.shape, what + ": tensor '" + t.name + "' has shape " + shape_str(s->shape) +
                                   " but the adapter config needs " + shape_str(t.shape));
  }
  for (const auto& s : f.tensors)
    check(names.count(s.name), what + ": unexpected tensor '" + s.name + "' in a LoRA adapter");
  return c;
}

std::string weights_sha256(const cpu::TensorStore& store, const ModelConfig& model) {
  std::vector<std::string> names;
  for (const TensorInfo& t : parameter_list(model)) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  // A digest of per-tensor digests: no copy of the weights is made (a 124M model is 500 MB).
  std::string lines;
  for (const std::string& n : names) {
    const float* p = store.find(n);
    check(p != nullptr, "the model has no tensor '" + n + "'");
    lines += n + " " + sha256_hex(reinterpret_cast<const uint8_t*>(p), size_t(store.numel(n)) * sizeof(float)) + "\n";
  }
  return sha256_hex(reinterpret_cast<const uint8_t*>(lines.data()), lines.size());
}

}  // namespace ptl
