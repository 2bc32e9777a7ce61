// What the playground and the WebGPU backend need from the engine: the training batches and
// learning rates for an external executor, inspection (next-byte probabilities and attention
// maps, the attention_probs op), and running one serialised program once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/error.h"
#include "engine/program_run.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(scale * rng.normal());
  return v;
}

// softmax of one row of logits, in double.
std::vector<double> softmax(const float* row, int V) {
  double mx = row[0];
  for (int v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
  std::vector<double> p(V);
  double sum = 0;
  for (int v = 0; v < V; ++v) sum += p[v] = std::exp(double(row[v]) - mx);
  for (auto& x : p) x /= sum;
  return p;
}

// Randomises the LoRA B matrices (zero at initialisation, which would make adapters invisible).
void randomise_lora_b(Trainer& tr) {
  uint64_t seed = 5;
  for (const auto& name : tr.store().names()) {
    if (!name.ends_with(".lora_B") || name.starts_with("optim.")) continue;
    const int64_t n = tr.store().numel(name);
    auto v = random_floats(size_t(n), seed++, 0.05);
    std::memcpy(tr.store().find(name), v.data(), size_t(n) * 4);
  }
}

}  // namespace

// --- Batches and learning rates for an external executor --------------------------------------

TEST(ExternalExecutor, NextTrainBatchIsTheBatchTrainStepConsumes) {
  const std::string text = synthetic_text(4000);
  TrainConfig tc = train_config(4, 11);
  Trainer trained(tiny(), tc), replayed(tiny(), tc), external(tiny(), tc);
  for (Trainer* t : {&trained, &replayed, &external}) t->set_corpus(text, "synthetic");
  const int N = 6;
  for (int i = 0; i < N; ++i) {
    const StepResult a = trained.train_step();
    // The same step, on the batch next_train_batch draws: bitwise the same loss and norm.
    const Batch b = replayed.next_train_batch();
    const StepResult r = replayed.train_step(b);
    EXPECT_EQ(a.loss, r.loss) << "step " << i + 1;
    EXPECT_EQ(a.grad_norm, r.grad_norm) << "step " << i + 1;
    EXPECT_EQ(a.lr, r.lr);
    EXPECT_EQ(a.lr, trained.lr_at(i));
    EXPECT_EQ(a.lr, tc.lr_at(i));
    // An executor elsewhere gets the same batch and counts its step the same way.
    const Batch e = external.next_train_batch();
    EXPECT_EQ(e.inputs, b.inputs) << "step " << i + 1;
    EXPECT_EQ(e.targets, b.targets);
    EXPECT_EQ(external.count_external_step(e), a.step);
  }
  // The data order, step and token count carry into a checkpoint exactly as N training steps do.
  EXPECT_EQ(external.state().data_rng.to_hex(), trained.state().data_rng.to_hex());
  EXPECT_EQ(external.state().step, trained.state().step);
  EXPECT_EQ(external.state().tokens_seen, trained.state().tokens_seen);
  auto resumed = Trainer::from_checkpoint(external.save_checkpoint(), "external");
  resumed->set_corpus(text, "synthetic");
  EXPECT_EQ(resumed->next_train_batch().inputs, trained.next_train_batch().inputs);
  // The learning rate follows the schedule, including after a schedule change.
  for (int64_t s : {0, 5, 10, 50, 99, 100, 150}) EXPECT_EQ(external.lr_at(s), tc.lr_at(s)) << s;
  external.train_config().schedule = "constant";
  EXPECT_EQ(external.lr_at(0), tc.lr);
}

TEST(ExternalExecutor, NextTrainBatchNeedsData) {
  Trainer tr(tiny(), train_config(2));
  EXPECT_THROW(tr.next_train_batch(), Error);
  EXPECT_EQ(tr.state().step, 0);
}

// --- The attention_probs op ------------------------------------------------------------------

TEST(AttentionProbs, CausalSoftmaxOfScaledScores) {
  const int64_t B = 2, T = 7, C = 12, H = 3, hs = C / H;
  const auto q = random_floats(B * T * C, 1), k = random_floats(B * T * C, 2);
  std::vector<float> probs(B * H * T * T, -1.0f);
  cpu::attention_probs_forward(probs.data(), q.data(), k.data(), B, T, C, H);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const float* row = probs.data() + ((b * H + h) * T + i) * T;
        // Reference in double.
        std::vector<double> s(i + 1);
        double mx = -INFINITY, sum = 0, row_sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < hs; ++c)
            d += double(q[(b * T + i) * C + h * hs + c]) * k[(b * T + j) * C + h * hs + c];
          s[j] = d / std::sqrt(double(hs));
          mx = std::max(mx, s[j]);
        }
        for (auto& x : s) sum += x = std::exp(x - mx);
        for (int64_t j = 0; j <= i; ++j) {
          EXPECT_NEAR(row[j], s[j] / sum, 1e-6) << b << " " << h << " " << i << " " << j;
          row_sum += row[j];
        }
        EXPECT_NEAR(row_sum, 1.0, 1e-6);
        for (int64_t j = i + 1; j < T; ++j) EXPECT_EQ(row[j], 0.0f) << "above the diagonal";
      }
  // Bitwise the same with one thread.
  const int threads = cpu::num_threads();
  cpu::set_num_threads(1);
  std::vector<float> one(probs.size());
  cpu::attention_probs_forward(one.data(), q.data(), k.data(), B, T, C, H);
  cpu::set_num_threads(threads);
  EXPECT_EQ(std::memcmp(one.data(), probs.data(), probs.size() * 4), 0);
}

TEST(AttentionProbs, InspectProgramSerialises) {
  const Program p = build_inspect_program(tiny(), 9);
  EXPECT_EQ(p.name, "inspect");
  int n = 0;
  for (const auto& op : p.ops)
    if (op.kind == OpKind::attention_probs) {
      ++n;
      EXPECT_EQ(op.attr("heads"), 3);
    }
  EXPECT_EQ(n, tiny().n_layers);
  EXPECT_EQ(p.tensor(p.id("blocks.1.attn.probs")).shape, (std::vector<int64_t>{1, 3, 9, 9}));
  EXPECT_EQ(p.tensor(p.id("logits")).shape, (std::vector<int64_t>{9, 256}));
  const auto j = p.to_json();
  EXPECT_NE(j.dump().find("\"attention_probs\""), std::string::npos);
  EXPECT_EQ(Program::from_json(j).to_json(), j);
  EXPECT_EQ(op_kind_from_string("attention_probs"), OpKind::attention_probs);
  EXPECT_THROW(build_inspect_program(tiny(), 33), Error);  // past the context
  EXPECT_THROW(build_inspect_program(tiny(), 0), Error);
}

// The maps are the weights the attention op applied: probs @ v equals its output y, per layer
// and head, in the same forward pass (run without memory sharing so every tensor keeps its value).
TEST(AttentionProbs, ProbsTimesValuesIsTheAttentionOutput) {
  for (bool lora : {false, true}) {
    SCOPED_TRACE(lora ? "with LoRA on q, k, v" : "base model");
    Trainer tr(tiny(), train_config(1));
    if (lora) {
      LoraConfig lc;
      lc.rank = 4;
      lc.targets = {"q", "k", "v"};
      tr.enable_lora(lc, 3);
      randomise_lora_b(tr);
    }
    const ModelConfig mc = tiny();
    const int T = 20, H = mc.n_heads, C = mc.d_model, hs = C / H;
    // Initial weights give nearly uniform attention, where a wrong map would hardly change y:
    // larger q and k weights make the maps peaked.
    uint64_t seed = 100;
    for (int l = 0; l < mc.n_layers; ++l)
      for (const char* proj : {"q_proj", "k_proj"}) {
        const std::string name = "blocks." + std::to_string(l) + ".attn." + proj + ".weight";
        const auto w = random_floats(size_t(C) * C, seed++, 0.4);
        std::memcpy(tr.store().find(name), w.data(), w.size() * 4);
      }
    double peak = 0;
    cpu::Executor ex(build_inspect_program(mc, T, tr.lora_config()), tr.store(), /*share_memory=*/false);
    const Batch b = random_batch(1, T, 9);
    std::memcpy(ex.i32("tokens"), b.inputs.data(), T * 4);
    ex.run();
    for (int l = 0; l < mc.n_layers; ++l) {
      const std::string pre = "blocks." + std::to_string(l) + ".attn.";
      const float* probs = ex.f32(pre + "probs");
      const int v_id = ex.program().find(pre + "v_proj.lora_out") >= 0 ? ex.program().id(pre + "v_proj.lora_out")
                                                                       : ex.program().id(pre + "v_proj.out");
      const float* v = static_cast<const float*>(ex.data(v_id));
      const float* y = ex.f32(pre + "y");
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < T; ++i) {
          const float* row = probs + (size_t(h) * T + i) * T;
          double row_sum = 0;
          for (int j = 0; j < T; ++j) {
            row_sum += row[j];
            peak = std::max(peak, double(row[j]) * (i + 1));  // 1 for a uniform row
            if (j > i) {
              EXPECT_EQ(row[j], 0.0f);
            }
          }
          EXPECT_NEAR(row_sum, 1.0, 1e-5) << "layer " << l << " head " << h << " row " << i;
          for (int c = 0; c < hs; ++c) {
            double pv = 0;
            for (int j = 0; j <= i; ++j) pv += double(row[j]) * v[size_t(j) * C + h * hs + c];
            EXPECT_NEAR(pv, y[size_t(i) * C + h * hs + c], 2e-5) << "layer " << l << " head " << h << " row " << i;
          }
        }
    }
    EXPECT_GT(peak, 5.0) << "the maps are nearly uniform: the check above would be weak";
    // Trainer::inspect runs the same program with memory sharing: the maps are results (no op
    // reads them), so they survive the run and equal these bitwise.
    const InspectResult r = tr.inspect(b.inputs);
    ASSERT_EQ(r.attention.size(), size_t(mc.n_layers) * H * T * T);
    for (int l = 0; l < mc.n_layers; ++l)
      EXPECT_EQ(std::memcmp(r.attention.data() + size_t(l) * H * T * T,
                            ex.f32("blocks." + std::to_string(l) + ".attn.probs"), size_t(H) * T * T * 4),
                0)
          << "layer " << l;
  }
}

// --- Trainer::inspect ------------------------------------------------------------------------

TEST(Inspect, TopBytesAreTheSoftmaxOfTheEvalLogits) {
  const std::string text = synthetic_text(4000);
  TrainConfig tc = train_config(8, 3);
  tc.lr = 3e-3;
  Trainer tr(tiny(), tc);
  tr.set_corpus(text, "synthetic");
  for (int i = 0; i < 30; ++i) tr.train_step();  // past uniform predictions
  const ModelConfig mc = tiny();
  for (int lora = 0; lora < 2; ++lora) {
    SCOPED_TRACE(lora ? "with LoRA" : "base model");
    if (lora) {
      LoraConfig lc;
      lc.rank = 2;
      lc.targets = {"q", "v", "fc_out"};
      tr.enable_lora(lc, 4);
      randomise_lora_b(tr);
    }
    for (const std::string& prompt : {std::string("the king and"), text.substr(100, 50)}) {
      const InspectResult r = tr.inspect(encode(prompt), 10);
      // A prompt longer than the context is cropped to its last ctx bytes.
      const size_t T = std::min<size_t>(prompt.size(), size_t(mc.ctx));
      ASSERT_EQ(r.tokens, encode(prompt.substr(prompt.size() - T)));
      EXPECT_EQ(r.T, int(T));
      EXPECT_EQ(r.layers, mc.n_layers);
      EXPECT_EQ(r.heads, mc.n_heads);
      Batch b{1, int(T), r.tokens, std::vector<int32_t>(T, 0)};
      const auto p = softmax(tr.logits(b) + (T - 1) * 256, 256);
      ASSERT_EQ(r.top.size(), 10u);
      for (size_t i = 0; i < r.top.size(); ++i) {
        EXPECT_NEAR(r.top[i].second, p[r.top[i].first], 1e-9) << "rank " << i;
        if (i > 0) {
          EXPECT_GE(r.top[i - 1].second, r.top[i].second);
        }
      }
      // Nothing outside the top 10 is more likely than the 10th.
      int above = 0;
      for (int v = 0; v < 256; ++v) above += p[v] > r.top.back().second + 1e-12;
      EXPECT_EQ(above, 9);
    }
  }
}

TEST(Inspect, EmptyPromptAndErrors) {
  Trainer tr(tiny(), train_config(1));
  const InspectResult r = tr.inspect({}, 3);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{'\n'});
  EXPECT_EQ(r.attention.size(), size_t(2 * 3));    // [2, 3, 1, 1]
  for (float x : r.attention) EXPECT_EQ(x, 1.0f);  // one position attends to itself
  EXPECT_EQ(tr.inspect({'a'}, 1000).top.size(), 256u);
  EXPECT_THROW(tr.inspect({'a'}, 0), Error);
  EXPECT_THROW(tr.inspect({300}, 10), Error);
}

// --- One program, once (ptl_program_run kernel, ptl_run_program) ------------------------------

TEST(RunProgram, OneLinearOpAndEveryTensorOfSeveral) {
  Program p;
  p.name = "kernel";
  const int x = p.add_tensor({"x", TensorKind::input, DType::f32, {3, 4}});
  const int w = p.add_tensor({"w", TensorKind::input, DType::f32, {5, 4}});
  const int bias = p.add_tensor({"b", TensorKind::input, DType::f32, {5}});
  const int y = p.add_tensor({"y", TensorKind::activation, DType::f32, {3, 5}});
  const int g = p.add_tensor({"g", TensorKind::activation, DType::f32, {3, 5}});
  p.add_op(OpKind::linear, {x, w, bias}, {y});
  p.add_op(OpKind::gelu, {y}, {g});
  const auto xs = random_floats(12, 1), ws = random_floats(20, 2), bs = random_floats(5, 3);
  SafeTensors in;
  in.add("x", DType::f32, {3, 4}, xs.data());
  in.add("w", DType::f32, {5, 4}, ws.data());
  in.add("b", DType::f32, {5}, bs.data());
  const SafeTensors out = run_program_once(Program::from_json(p.to_json()), in);
  ASSERT_EQ(out.tensors.size(), 5u);
  std::vector<float> want_y(15), want_g(15);
  cpu::linear_forward(want_y.data(), xs.data(), ws.data(), bs.data(), 3, 5, 4);
  cpu::gelu_forward(want_g.data(), want_y.data(), 15);
  // y is read by the gelu, so a shared arena could reuse it; here every tensor keeps its value.
  EXPECT_EQ(std::memcmp(out.find("y")->data.data(), want_y.data(), 60), 0);
  EXPECT_EQ(std::memcmp(out.find("g")->data.data(), want_g.data(), 60), 0);
  EXPECT_EQ(std::memcmp(out.find("x")->data.data(), xs.data(), 48), 0);
  // Round trip through bytes, as the WebAssembly API and the native tool do.
  const auto bytes = encode_safetensors(out);
  EXPECT_EQ(decode_safetensors(bytes.data(), bytes.size()).find("g")->data, out.find("g")->data);
  // A tensor the program lacks, or of the wrong size, is an error naming it.
  SafeTensors bad = in;
  bad.add("z", DType::f32, {1}, xs.data());
  try {
    run_program_once(p, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'z'"), std::string::npos) << e.what();
  }
  SafeTensors wrong;
  wrong.add("x", DType::f32, {2, 4}, xs.data());
  EXPECT_THROW(run_program_once(p, wrong), Error);
}

TEST(Inspect, CliExportsTheInspectProgram) {
  TempDir dir;
  const CliRun r = ptl_cli("program --preset tiny --program inspect --seq 5", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Program p = Program::from_json(nlohmann::json::parse(r.out));
  EXPECT_EQ(p.name, "inspect");
  EXPECT_EQ(p.tensor(p.id("tokens")).shape, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(p.tensor(p.id("blocks.0.attn.probs")).shape, (std::vector<int64_t>{1, 3, 5, 5}));
}

// `ptl program --program generate --seq K`: the generate program over K tokens (a prompt's block
// for another executor's KV cache, what WebGPU's prefill runs); longer than the context is refused.
TEST(Inspect, CliExportsTheGenerateProgramOverABlock) {
  TempDir dir;
  CliRun r = ptl_cli("program --preset tiny --program generate --seq 8", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Program p = Program::from_json(nlohmann::json::parse(r.out));
  EXPECT_EQ(p.name, "generate");
  EXPECT_EQ(p.tensor(p.id("tokens")).shape, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(p.tensor(p.id("logits")).shape, (std::vector<int64_t>{1, 256}));  // the last position's
  r = ptl_cli("program --preset tiny --program generate", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const Program one = Program::from_json(nlohmann::json::parse(r.out));
  EXPECT_EQ(one.tensor(one.id("tokens")).shape, (std::vector<int64_t>{1, 1}));
  expect_error(ptl_cli("program --preset tiny --program generate --seq 33", dir), "longer than the context (32)");
}
