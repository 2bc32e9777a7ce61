#include "engine/program.h"

#include "engine/error.h"

namespace ptl {

namespace {
constexpr const char* kOpNames[] = {
    "embedding",
    "embedding_backward",
    "layernorm",
    "layernorm_backward",
    "linear",
    "linear_backward",
    "attention",
    "attention_backward",
    "kv_cache_write",
    "attention_cached",
    "attention_probs",
    "gelu",
    "gelu_backward",
    "add",
    "add_backward",
    "dropout",
    "dropout_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "grad_norm",
    "adamw",
};
// One name per OpKind, in its order.
static_assert(std::size(kOpNames) == static_cast<size_t>(OpKind::adamw) + 1);
constexpr const char* kKindNames[] = {"parameter", "gradient", "optim_state", "activation", "input", "state"};
}  // namespace

const char* to_string(DType d) { return d == DType::f32 ? "f32" : "i32"; }
const char* to_string(TensorKind k) { return kKindNames[static_cast<int>(k)]; }
const char* to_string(OpKind k) { return kOpNames[static_cast<int>(k)]; }

OpKind op_kind_from_string(const std::string& s) {
  for (size_t i = 0; i < std::size(kOpNames); ++i)
    if (s == kOpNames[i]) return static_cast<OpKind>(i);
  fail("unknown op '" + s + "'");
}

static TensorKind kind_from_string(const std::string& s) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (s == kKindNames[i]) return static_cast<TensorKind>(i);
  fail("unknown tensor kind '" + s + "'");
}

int Program::add_tensor(TensorInfo info) {
  int existing = find(info.name);
  if (existing >= 0) {
    const auto& t = tensors[existing];
    check(t.shape == info.shape && t.kind == info.kind && t.dtype == info.dtype,
          "program '" + name + "': tensor '" + info.name + "' declared twice with different shapes or kinds");
    return existing;
  }
  tensors.push_back(std::move(info));
  return static_cast<int>(tensors.size()) - 1;
}

int Program::find(const std::string& tensor_name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == tensor_name) return static_cast<int>(i);
  return -1;
}

int Program::id(const std::string& tensor_name) const {
  int i = find(tensor_name);
  check(i >= 0, "program '" + name + "' has no tensor '" + tensor_name + "'");
  return i;
}

void Program::add_op(OpKind kind, std::vector<int> inputs, std::vector<int> outputs,
                     std::map<std::string, double> attrs) {
  ops.push_back(Op{kind, std::move(inputs), std::move(outputs), std::move(attrs)});
}

nlohmann::json Program::to_json() const {
  nlohmann::json j;
  j["format"] = "ptl-program";
  j["version"] = 1;
  j["name"] = name;
  auto& ts = j["tensors"] = nlohmann::json::array();
  for (const auto& t : tensors)
    ts.push_back({{"name", t.name},
                  {"kind", to_string(t.kind)},
                  {"dtype", to_string(t.dtype)},
                  {"shape", t.shape},
                  {"trainable", t.trainable}});
  auto& os = j["ops"] = nlohmann::json::array();
  for (const auto& op : ops)
    os.push_back({{"op", to_string(op.kind)}, {"inputs", op.inputs}, {"outputs", op.outputs}, {"attrs", op.attrs}});
  return j;
}

Program Program::from_json(const nlohmann::json& j) {
  check(j.value("format", "") == "ptl-program", "not a serialised program (format is not 'ptl-program')");
  check(j.value("version", 0) == 1, "unsupported program version");
  Program p;
  p.name = j.value("name", "");
  for (const auto& t : j.at("tensors")) {
    TensorInfo info;
    info.name = t.at("name");
    info.kind = kind_from_string(t.at("kind"));
    info.dtype = t.at("dtype") == "i32" ? DType::i32 : DType::f32;
    info.shape = t.at("shape").get<std::vector<int64_t>>();
    info.trainable = t.value("trainable", false);
    p.tensors.push_back(info);
  }
  for (const auto& o : j.at("ops")) {
    Op op{op_kind_from_string(o.at("op")), o.at("inputs").get<std::vector<int>>(),
          o.at("outputs").get<std::vector<int>>(), o.at("attrs").get<std::map<std::string, double>>()};
    for (int id : op.inputs) check(id >= -1 && id < (int)p.tensors.size(), "program: op input out of range");
    for (int id : op.outputs) check(id >= -1 && id < (int)p.tensors.size(), "program: op output out of range");
    p.ops.push_back(std::move(op));
  }
  return p;
}

}  // namespace ptl
