// The `ptl` command line as a user meets it: runs, resumes, files it writes, and its errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;
using namespace ptl::test;

namespace {

std::vector<double> losses(const std::string& metrics_path) {
  std::vector<double> out;
  std::ifstream f(metrics_path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line)["train_loss"].get<double>());
  return out;
}

const char* kTiny = "--preset tiny --sample-every 0";

}  // namespace

TEST(Cli, TrainWritesCheckpointAndMetrics) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  CliRun r =
      ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 20 --eval-every 10 --beta2 0.99 --out run", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("val loss"), std::string::npos);
  std::ifstream f(d.file("run/metrics.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    ++n;
    EXPECT_EQ(j["step"].get<int>(), n);
    for (const char* k : {"train_loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"})
      EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j.contains("val_loss"), n % 10 == 0);
  }
  EXPECT_EQ(n, 20);
  auto ck = Trainer::from_checkpoint(read_file_bytes(d.file("run/model.tinygpt")), "ck");
  EXPECT_EQ(ck->state().step, 20);
  EXPECT_DOUBLE_EQ(ck->train_config().beta2, 0.99);  // and AdamW's program reads it from there
  EXPECT_FALSE(std::filesystem::exists(d.file("run/model.tinygpt.tmp")));
}

TEST(Cli, DefaultOutputFolderIsTimestampedUnderRuns) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 2", d).code, 0);
  int found = 0;
  for (auto& e : std::filesystem::directory_iterator(d.path / "runs"))
    found += std::filesystem::exists(e.path() / "model.tinygpt") && std::filesystem::exists(e.path() / "metrics.jsonl");
  EXPECT_EQ(found, 1);
}

TEST(Cli, ResumeIsBitwiseEquivalentToAStraightRun) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  const std::string common = std::string("train ") + kTiny + " --data t.txt --steps 100 --eval-every 25";
  ASSERT_EQ(ptl_cli(common + " --out straight", d).code, 0);
  // Cosine schedule: stop at 50 of a 100-step plan, then resume.
  ASSERT_EQ(ptl_cli(common + " --until 50 --out split", d).code, 0);
  CliRun r = ptl_cli("train --resume split/model.tinygpt", d);
  ASSERT_EQ(r.code, 0) << r.err;
  auto a = losses(d.file("straight/metrics.jsonl")), b = losses(d.file("split/metrics.jsonl"));
  ASSERT_EQ(a.size(), 100u);
  EXPECT_EQ(a, b);  // bitwise: the same doubles
  // The final weights and AdamW moments are bitwise the same too.
  const auto fa = read_file_bytes(d.file("straight/model.tinygpt")),
             fb = read_file_bytes(d.file("split/model.tinygpt"));
  SafeTensors sa = decode_safetensors(fa.data(), fa.size()), sb = decode_safetensors(fb.data(), fb.size());
  ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
  for (size_t i = 0; i < sa.tensors.size(); ++i)
    EXPECT_EQ(sa.tensors[i].data, sb.tensors[i].data) << sa.tensors[i].name;
  // Constant schedule: 50 steps, then extend the run to 100.
  const std::string constant = std::string("train ") + kTiny + " --data t.txt --schedule constant --eval-every 25";
  ASSERT_EQ(ptl_cli(constant + " --steps 100 --out c1", d).code, 0);
  ASSERT_EQ(ptl_cli(constant + " --steps 50 --out c2", d).code, 0);
  ASSERT_EQ(ptl_cli("train --resume c2/model.tinygpt --steps 100", d).code, 0);
  EXPECT_EQ(losses(d.file("c1/metrics.jsonl")), losses(d.file("c2/metrics.jsonl")));
}

TEST(Cli, SampleStreamsPromptAndContinuation) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 5 --out run", d).code, 0);
  CliRun a = ptl_cli("sample run/model.tinygpt --prompt 'the king' --max-tokens 40 --temperature 0", d);
  CliRun b = ptl_cli("sample run/model.tinygpt --prompt 'the king' --max-tokens 40 --temperature 0", d);
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out.rfind("the king", 0), 0u);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.err.find("tokens/s"), std::string::npos);
  EXPECT_NE(a.err.find("time to first token"), std::string::npos);
  CliRun c = ptl_cli("sample run/model.tinygpt --max-tokens 40 --temperature 1 --top-k 5 --seed 1", d);
  CliRun e = ptl_cli("sample run/model.tinygpt --max-tokens 40 --temperature 1 --top-k 5 --seed 2", d);
  EXPECT_NE(c.out, e.out);
}

TEST(Cli, EvalAndInfo) {
  test::TempDir d;
  const std::string text = test::synthetic_text(5000);
  write(d.file("t.txt"), text);
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 5 --out run", d).code, 0);
  CliRun r = ptl_cli("eval run/model.tinygpt --data t.txt --json", d);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].get<int64_t>(), int64_t(text.size()) - 1);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(j["loss"].get<double>()), 1e-9);
  EXPECT_NEAR(j["bits_per_byte"].get<double>(), j["loss"].get<double>() / std::log(2.0), 1e-12);
  CliRun v = ptl_cli("eval run/model.tinygpt --json", d);  // the training corpus's validation split
  ASSERT_EQ(v.code, 0) << v.err;
  EXPECT_EQ(nlohmann::json::parse(v.out)["tokens"].get<int64_t>(), 499);
  // --split picks a side of the spec's 90/10 split of --data; val is what the training reported.
  CliRun sv = ptl_cli("eval run/model.tinygpt --data t.txt --split val --json", d);
  ASSERT_EQ(sv.code, 0) << sv.err;
  EXPECT_EQ(nlohmann::json::parse(sv.out)["loss"].get<double>(), nlohmann::json::parse(v.out)["loss"].get<double>());
  CliRun st = ptl_cli("eval run/model.tinygpt --data t.txt --split train --json", d);
  ASSERT_EQ(st.code, 0) << st.err;
  EXPECT_EQ(nlohmann::json::parse(st.out)["tokens"].get<int64_t>(), 4499);
  CliRun bad = ptl_cli("eval run/model.tinygpt --data t.txt --split test", d);  // a CLI11 usage error
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--split: test not in {all,train,val}"), std::string::npos) << bad.err;
  CliRun i = ptl_cli("info run/model.tinygpt", d);
  EXPECT_NE(i.out.find("70464"), std::string::npos);
  EXPECT_NE(i.out.find("5 steps"), std::string::npos);
  CliRun p = ptl_cli("info --preset behemoth", d);
  EXPECT_NE(p.out.find("473244160"), std::string::npos);
}

// A preset with GPT-2's vocabulary: more parameters, and activations that do not grow with V
// (the loss never holds the [B*T, V] logits).
TEST(Cli, InfoOfAPresetWithAnotherVocabulary) {
  test::TempDir d;
  const CliRun a = ptl_cli("info --preset medium --json", d),
               b = ptl_cli("info --preset medium --vocab 50257 --json", d);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(jb["model_config"]["vocab_size"], 50257);
  EXPECT_EQ(jb["parameters"].get<int64_t>() - ja["parameters"].get<int64_t>(), (50257 - 256) * 128);
  EXPECT_EQ(jb["training_memory"]["activations_bytes"], ja["training_memory"]["activations_bytes"]);
  const CliRun bad = ptl_cli("info --preset medium --vocab 65537", d);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--vocab"), std::string::npos) << bad.err;
}

// `ptl info --defaults` is what `ptl train` runs with no options (the site starts from it): the
// same values as train's --help shows, and the preset's batch.
TEST(Cli, InfoDefaultsAreTrainsDefaults) {
  test::TempDir d;
  const CliRun r = ptl_cli("info --defaults --json", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const CliRun help = ptl_cli("train --help", d);
  ASSERT_EQ(help.code, 0) << help.err;
  // The default CLI11 shows after the option's type: "--steps INT=1500", "--schedule TEXT:{...}=cosine".
  auto shown = [&](const std::string& option) {
    const size_t at = help.out.find("  " + option + " ");
    if (at == std::string::npos) return std::string("(no " + option + ")");
    const size_t eq = help.out.find('=', at), end = help.out.find_first_of(" \n", eq);
    return help.out.substr(eq + 1, end - eq - 1);
  };
  EXPECT_EQ(shown("--preset"), j["preset"].get<std::string>());
  EXPECT_EQ(std::stoll(shown("--steps")), j["steps"].get<int64_t>());
  EXPECT_EQ(shown("--schedule"), j["schedule"].get<std::string>());
  EXPECT_DOUBLE_EQ(std::stod(shown("--dropout")), j["dropout"].get<double>());
  EXPECT_DOUBLE_EQ(std::stod(shown("--beta2")), j["beta2"].get<double>());
  EXPECT_EQ(std::stoull(shown("--seed")), j["seed"].get<uint64_t>());
  const CliRun p = ptl_cli("info --preset " + j["preset"].get<std::string>() + " --json", d);
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(j["batch"], nlohmann::json::parse(p.out)["training_memory"]["batch"]);
  // --lr has no fixed default: the preset's, which `ptl info --preset` prints.
  EXPECT_DOUBLE_EQ(j["lr"].get<double>(), nlohmann::json::parse(p.out)["lr"].get<double>());
  EXPECT_NE(help.out.find("Peak learning rate (default: the preset's"), std::string::npos);
  expect_error(ptl_cli("info --defaults --preset tiny", d), "--defaults takes no checkpoint and no --preset");
}

// Its "lora_train" is what `ptl lora train` runs with no options (the playground's Fine-tune panel
// starts from it): the values lora train's --help shows.
TEST(Cli, InfoDefaultsHaveLoraTrainsDefaults) {
  test::TempDir d;
  const CliRun r = ptl_cli("info --defaults --json", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out).at("lora_train");
  const CliRun help = ptl_cli("lora train --help", d);
  ASSERT_EQ(help.code, 0) << help.err;
  auto shown = [&](const std::string& option) {
    const size_t at = help.out.find("  " + option + " ");
    if (at == std::string::npos) return std::string("(no " + option + ")");
    const size_t eq = help.out.find('=', at), end = help.out.find_first_of(" \n", eq);
    return help.out.substr(eq + 1, end - eq - 1);
  };
  EXPECT_EQ(std::stoi(shown("--rank")), j["rank"].get<int>());
  EXPECT_DOUBLE_EQ(std::stod(shown("--alpha")), j["alpha"].get<double>());
  EXPECT_DOUBLE_EQ(std::stod(shown("--lr")), j["lr"].get<double>());
  EXPECT_EQ(std::stoll(shown("--steps")), j["steps"].get<int64_t>());
  LoraConfig listed;
  listed.targets = parse_lora_targets(shown("--targets"));
  EXPECT_EQ(lora_to_json(listed)["targets"], j["targets"]);
  // The engine's defaults, which the WebAssembly API fills in.
  EXPECT_EQ(j["rank"].get<int>(), default_lora().rank);
  EXPECT_EQ(j["targets"], lora_to_json(default_lora())["targets"]);
  EXPECT_DOUBLE_EQ(j["lr"].get<double>(), kDefaultLoraLr);
}

TEST(Cli, BenchPrintsOneJsonLinePerPresetWithItsFigures) {
  test::TempDir d;
  CliRun r = ptl_cli("bench --presets tiny --steps 2 --warmup 1 --threads 1 --json --ops --peak-gflops 100", d);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  auto j = nlohmann::json::parse(line);
  EXPECT_FALSE(std::getline(lines, line)) << "one line per preset";
  EXPECT_EQ(j["preset"], "tiny");
  EXPECT_EQ(j["params"].get<int64_t>(), 70464);
  EXPECT_EQ(j["tokens_per_step"].get<int64_t>(), 512);
  EXPECT_EQ(j["threads"].get<int>(), 1);
  const double ms = j["ms_per_step"].get<double>();
  ASSERT_GT(ms, 0.0);
  EXPECT_NEAR(j["tokens_per_s"].get<double>(), 512 / (ms / 1000), 1e-6 * 512 / (ms / 1000));
  EXPECT_NEAR(j["gflops"].get<double>(), j["gflop_per_step"].get<double>() / (ms / 1000),
              1e-6 * j["gflops"].get<double>());
  EXPECT_NEAR(j["mfu"].get<double>(), j["gflops"].get<double>() / 100, 1e-12);
  EXPECT_EQ(j["peak_source"], "given");
  EXPECT_GT(j["peak_rss_mib"].get<double>(), j["needed_mib"].get<double>() * 0.5);
  ASSERT_TRUE(j["ops_ms"].is_object());
  EXPECT_GT(j["ops_ms"]["linear"].get<double>(), 0.0);
  EXPECT_GT(j["ops_ms"]["adamw"].get<double>(), 0.0);
  const int bits = j["vector_bits"].get<int>();
  EXPECT_TRUE(bits == 128 || bits == 256 || bits == 512) << bits;
#ifdef __linux__
  EXPECT_NE(j["cpu"].get<std::string>(), "") << "the CPU from /proc/cpuinfo";
#endif
  CliRun bad = ptl_cli("bench --presets tiny,nosuch --steps 1 --json", d);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("nosuch"), std::string::npos) << bad.err;
}

TEST(Cli, BadInputGivesOneLineErrors) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  write(d.file("empty.txt"), "");
  write(d.file("small.txt"), "too short");
  expect_error(ptl_cli("train --preset gigantic --data t.txt", d), "unknown preset 'gigantic'");
  expect_error(ptl_cli("train --preset tiny --data missing.txt", d), "data file not found: ");
  expect_error(ptl_cli("train --preset tiny --data empty.txt", d), "data file is empty");
  expect_error(ptl_cli("train --preset tiny --data small.txt", d), "corpus too small");
  expect_error(ptl_cli("train --preset tiny --ctx 4096 --data t.txt", d), "context of 4096");
  expect_error(ptl_cli("train --preset tiny --heads 5 --data t.txt", d), "not divisible by n_heads 5");
  // Too big for any machine: refused before allocating, with the bytes needed and the limit.
  CliRun big = ptl_cli("train --preset behemoth --batch 65536 --data t.txt --out big", d);
  expect_error(big, "training this model at batch 65536 needs ");
  EXPECT_NE(big.err.find(" available: use a smaller batch, context or preset"), std::string::npos) << big.err;

  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 4 --out run", d).code, 0);
  const auto good = read_file_bytes(d.file("run/model.tinygpt"));
  write(d.file("truncated.tinygpt"), std::string(good.begin(), good.begin() + good.size() / 2));
  expect_error(ptl_cli("sample truncated.tinygpt", d), "the file is shorter than its header says (truncated?)");
  std::string corrupt(good.begin(), good.end());
  for (size_t i = 8; i < 40; ++i) corrupt[i] = '#';
  write(d.file("corrupt.tinygpt"), corrupt);
  expect_error(ptl_cli("eval corrupt.tinygpt --data t.txt", d), "corrupt.tinygpt");
  write(d.file("notes.txt.tinygpt"), "hello, this is not a checkpoint at all");
  expect_error(ptl_cli("info notes.txt.tinygpt", d), "notes.txt.tinygpt");
  SafeTensors f = decode_safetensors(good.data(), good.size());
  SafeTensors foreign = f;
  foreign.metadata.clear();
  write_file_atomic(d.file("foreign.safetensors"), encode_safetensors(foreign));
  expect_error(ptl_cli("sample foreign.safetensors", d), "not a tinygpt checkpoint");
  SafeTensors future = f;
  future.metadata["format_version"] = "7";
  write_file_atomic(d.file("future.tinygpt"), encode_safetensors(future));
  expect_error(ptl_cli("sample future.tinygpt", d), "unsupported checkpoint format_version 7");
  SafeTensors wrong = f;
  wrong.metadata["model_config"] = R"({"vocab_size":256,"n_layers":2,"d_model":64,"n_heads":4,"ctx":32})";
  write_file_atomic(d.file("wrong.tinygpt"), encode_safetensors(wrong));
  expect_error(ptl_cli("sample wrong.tinygpt", d), "has shape [256, 48] but the config needs [256, 64]");
  SafeTensors garbled = f;
  garbled.metadata["model_config"] = "{not json";
  write_file_atomic(d.file("garbled.tinygpt"), encode_safetensors(garbled));
  const CliRun g = ptl_cli("info garbled.tinygpt", d);
  expect_error(g, "garbled.tinygpt: checkpoint metadata 'model_config' is not valid JSON");
  EXPECT_EQ(g.err.find("garbled.tinygpt: garbled.tinygpt"), std::string::npos) << g.err;
  std::string bad_header = std::string("\x10\0\0\0\0\0\0\0", 8) + "{\"a\":1,}        ";
  write(d.file("badjson.tinygpt"), bad_header);
  const CliRun j = ptl_cli("info badjson.tinygpt", d);
  expect_error(j, "header is not valid JSON (parse error at line 1");
  EXPECT_EQ(j.err.find("[json.exception"), std::string::npos) << j.err;
  expect_error(ptl_cli("sample nothing-here.tinygpt", d), "no such file");
}

// Options whose absence means "the preset's" or "all cores" (stored as 0) refuse an explicit 0 or
// a negative number instead of quietly taking the default (before: `--layers 0` trained the
// preset's layers, `--threads -2` ran on all cores, `--until 0` ran every step, `--warmup -3`
// took the default warm-up), with a message that names the option.
TEST(Cli, CountOptionsRejectZeroAndNegativeNumbers) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  const std::pair<std::string, std::string> cases[] = {
      {"train --preset tiny --data t.txt --out r --batch 0", "--batch: must be at least 1, got 0"},
      {"train --preset tiny --data t.txt --out r --layers 0", "--layers: must be at least 1, got 0"},
      {"train --preset tiny --data t.txt --out r --ctx -8", "--ctx: must be at least 1, got -8"},
      {"train --preset tiny --data t.txt --out r --threads -2", "--threads: must be at least 1, got -2"},
      {"train --preset tiny --data t.txt --out r --batch 2.5", "--batch: expects a whole number, got '2.5'"},
      {"train --preset tiny --data t.txt --out r --until 0", "--until: must be at least 1, got 0"},
      {"train --preset tiny --data t.txt --out r --warmup -3", "--warmup: must be at least 0, got -3"},
      {"train --preset tiny --data t.txt --out r --log-every 0", "--log-every: must be at least 1, got 0"},
      {"bench --presets tiny --threads 0", "--threads: must be at least 1, got 0"},
      {"bench --presets tiny --steps 0", "--steps: must be at least 1, got 0"},
      {"lora bench --presets tiny --warmup -1", "--warmup: must be at least 0, got -1"},
      {"info --preset tiny --batch 0", "--batch: must be at least 1, got 0"},
      {"sample nothing.tinygpt --max-tokens -1", "--max-tokens: must be at least 0, got -1"},
      {"sft-eval nothing.tinygpt --data t.jsonl --max-tokens 0", "--max-tokens: must be at least 1, got 0"},
      {"program --preset tiny --seq -5", "--seq: must be at least 1, got -5"},
  };
  for (const auto& [args, phrase] : cases) {
    const CliRun r = ptl_cli(args, d);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(phrase), std::string::npos) << args << "\nstderr: " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(d.file("r"))) << "a refused command wrote its run folder";
}

TEST(Cli, DivergenceStopsAndKeepsTheLastGoodCheckpoint) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 10 --eval-every 5 --out run", d).code, 0);
  const auto good = read_file_bytes(d.file("run/model.tinygpt"));
  // A learning rate of 1e30 blows the weights up on the first update.
  CliRun r = ptl_cli("train --resume run/model.tinygpt --steps 20 --lr 1e30 --schedule constant", d);
  expect_error(r, "training diverged at step 12: loss is NaN");
  EXPECT_NE(r.err.find("the last good checkpoint is run/model.tinygpt (step 10)"), std::string::npos) << r.err;
  EXPECT_EQ(read_file_bytes(d.file("run/model.tinygpt")), good);
  EXPECT_EQ(Trainer::from_checkpoint(good, "g")->state().step, 10);
}

// A run killed between checkpoints has logged steps the checkpoint does not hold (and may have
// cut its last line in half); resuming trains those steps again, so the logs are cut back to
// the checkpoint's step first: every step is logged once, every sample printed once.
TEST(Cli, ResumeCutsTheLogsBackToTheCheckpoint) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  ASSERT_EQ(
      ptl_cli("train --preset tiny --data t.txt --steps 40 --eval-every 10 --sample-every 5 --until 20 --out run", d)
          .code,
      0);
  // What a kill -9 at step 26 leaves: steps 21-25 logged, a torn line, a sample past the checkpoint.
  {
    std::ofstream m(d.file("run/metrics.jsonl"), std::ios::app);
    for (int s = 21; s <= 25; ++s) m << nlohmann::json{{"step", s}, {"train_loss", 9.0}}.dump() << "\n";
    m << "{\"step\":26,\"train_lo";
    std::ofstream(d.file("run/samples.txt"), std::ios::app) << "--- step 25 ---\nnot trained yet\n";
  }
  CliRun r = ptl_cli("train --resume run/model.tinygpt --until 30", d);
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream f(d.file("run/metrics.jsonl"));
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);  // throws on a torn line
    EXPECT_EQ(j["step"].get<int>(), ++n);
    EXPECT_NE(j["train_loss"].get<double>(), 9.0) << "a line of the killed run survived";
  }
  EXPECT_EQ(n, 30);
  const std::string samples = slurp(d.file("run/samples.txt"));
  EXPECT_EQ(samples.find("not trained yet"), std::string::npos);
  for (int s = 5; s <= 30; s += 5) {
    const std::string head = "--- step " + std::to_string(s) + " ---\n";
    const size_t at = samples.find(head);
    EXPECT_NE(at, std::string::npos) << s;
    EXPECT_EQ(samples.find(head, at + 1), std::string::npos) << "sample " << s << " twice";
  }
}

// Options that repeat the checkpoint's model or data order are accepted on resume; those that
// would change them are refused, naming both values. A finished run says how to extend it.
TEST(Cli, ResumeAcceptsUnchangedOptionsAndRefusesChangedOnes) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 10 --eval-every 5 --out run", d).code, 0);
  expect_error(ptl_cli("train --resume run/model.tinygpt", d),
               "has completed its 10 steps; to train further, pass --steps N");
  expect_error(ptl_cli("train --resume run/model.tinygpt --steps 8", d),
               "is already at step 10 of --steps 8; give --steps above 10");
  expect_error(ptl_cli("train --resume run/model.tinygpt --steps 20 --batch 8", d),
               "--batch 8 differs from the checkpoint's 16");
  expect_error(ptl_cli("train --resume run/model.tinygpt --steps 20 --preset small", d),
               "--preset small is not the checkpoint's model");
  CliRun r = ptl_cli("train --resume run/model.tinygpt --steps 12 --preset tiny --batch 16 --seed 1337", d);
  EXPECT_EQ(r.code, 0) << r.err;
}

// Command words are checked before CLI11 sees them (it said "A subcommand is required" for a
// typo); an option given twice takes its last value; a bad PTL_THREADS is an error.
TEST(Cli, MistypedCommandsAndRepeatedOptions) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(5000));
  expect_error(ptl_cli("trian --steps 3", d), "unknown command 'trian' (ptl has: train, sample");
  expect_error(ptl_cli("lora trian", d),
               "unknown command 'trian' (ptl lora has: train, merge, info, export-peft, import-peft, bench)");
  expect_error(ptl_cli("exprot --help", d), "unknown command 'exprot'");
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 5 --steps 3 --out run", d).code, 0);
  EXPECT_EQ(losses(d.file("run/metrics.jsonl")).size(), 3u);
  setenv("PTL_THREADS", "abc", 1);
  const CliRun bad = ptl_cli("info --preset tiny", d);
  unsetenv("PTL_THREADS");
  expect_error(bad, "PTL_THREADS must be a whole number of threads, at least 1 (got 'abc')");
}

// No command writes over its own input, and a run folder is not silently replaced.
TEST(Cli, OutputsNeverReplaceInputsOrOtherRuns) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 4 --out run", d).code, 0);
  const auto base = read_file_bytes(d.file("run/model.tinygpt"));
  expect_error(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 4 --out run", d),
               "run already holds a run (run/model.tinygpt): continue it with --resume");
  EXPECT_EQ(read_file_bytes(d.file("run/model.tinygpt")), base);
  EXPECT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 4 --seed 5 --out run --overwrite", d).code,
            0);
  EXPECT_NE(read_file_bytes(d.file("run/model.tinygpt")), base);
  const auto trained = read_file_bytes(d.file("run/model.tinygpt"));
  ASSERT_EQ(ptl_cli("lora train --base run/model.tinygpt --data t.txt --steps 2 --out ad", d).code, 0);
  expect_error(
      ptl_cli("lora merge --base run/model.tinygpt --adapter ad/adapter.tinygpt-lora --out ./run/model.tinygpt", d),
      "is the base checkpoint: the merge would replace it");
  write(d.file("c.jsonl"), "{\"prompt\":\"a\",\"response\":\"b\"}\n");
  expect_error(ptl_cli("sft --base run/model.tinygpt --data c.jsonl --out run", d), "holds the base checkpoint");
  EXPECT_EQ(read_file_bytes(d.file("run/model.tinygpt")), trained);
  // Only regular files are replaced: a FIFO (like a device) stays what it is.
  ASSERT_EQ(mkfifo(d.file("pipe").c_str(), 0600), 0);
  expect_error(ptl_cli("init --preset tiny --out pipe", d), "cannot write pipe: it exists and is not a regular file");
  EXPECT_TRUE(std::filesystem::is_fifo(d.file("pipe")));
  // Runs started in the same second get folders of their own.
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 1 && " + test::ptl_command() + " train " +
                        kTiny + " --data t.txt --steps 1",
                    d)
                .code,
            0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(d.path / "runs"), std::filesystem::directory_iterator()),
            2);
}

// Output that cannot be written is an error, not a silent success; Ctrl-C saves and exits 130.
TEST(Cli, WriteErrorsAndInterruptsShowInTheExitStatus) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  if (std::filesystem::is_character_file("/dev/full")) {
    const int status = std::system(
        (test::ptl_command() + " info --preset tiny --json > /dev/full 2> '" + d.file("err.txt") + "'").c_str());
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_NE(slurp(d.file("err.txt")).find("cannot write the output (standard output)"), std::string::npos);
  }
  const std::string run = "cd '" + d.path.string() + "' && " + test::ptl_command() + " train " + kTiny +
                          " --data t.txt --steps 10000000 --threads 1 --out run > out.txt 2>&1 & pid=$!; sleep 2; "
                          "kill -INT $pid; wait $pid";
  const int status = std::system(run.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(d.file("out.txt"));
  EXPECT_NE(slurp(d.file("out.txt")).find("interrupted at step"), std::string::npos);
  EXPECT_GT(Trainer::from_checkpoint(read_file_bytes(d.file("run/model.tinygpt")), "ck")->state().step, 0);
}

// The sample printed during training is all there (bytes after a NUL included) and safe for a
// terminal: no control bytes but newline and tab.
TEST(Cli, TrainingSamplesPrintWholeAndWithoutControlBytes) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  CliRun r = ptl_cli("train --preset tiny --data t.txt --steps 4 --sample-every 2 --out run", d);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int s : {2, 4}) {
    const std::string head = "--- sample at step " + std::to_string(s) + " ---\n";
    const size_t at = r.out.find(head);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n---\n", at + head.size()), std::string::npos) << "sample " << s << " cut short";
  }
  for (unsigned char c : r.out) EXPECT_TRUE(c >= 0x20 || c == '\n' || c == '\t') << "control byte " << int(c);
  EXPECT_EQ(slurp(d.file("run/samples.txt")).size() > 400, true);  // two samples of 200 bytes, as generated
}

// export leaves the optimizer state out and keeps everything else; import makes a checkpoint of
// a bare safetensors file with the spec's names (what another tool saves), reading the config off
// the shapes: the same weights, the same loss.
TEST(Cli, ExportAndImportRoundTrip) {
  test::TempDir d;
  write(d.file("t.txt"), test::synthetic_text(20000));
  ASSERT_EQ(ptl_cli(std::string("train ") + kTiny + " --data t.txt --steps 6 --eval-every 3 --out run", d).code, 0);
  const auto full = read_file_bytes(d.file("run/model.tinygpt"));
  CliRun r = ptl_cli("export run/model.tinygpt --out w.tinygpt", d);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto light = read_file_bytes(d.file("w.tinygpt"));
  const SafeTensors a = decode_safetensors(full.data(), full.size()),
                    b = decode_safetensors(light.data(), light.size());
  EXPECT_EQ(b.tensors.size() * 3, a.tensors.size());  // parameters, without m and v
  for (const auto& t : b.tensors) EXPECT_EQ(t.data, a.find(t.name)->data) << t.name;
  for (const char* k : {"model_config", "train_config", "train_state", "loss_history"})
    EXPECT_EQ(b.metadata.at(k), a.metadata.at(k)) << k;
  expect_error(ptl_cli("export run/model.tinygpt --out run/model.tinygpt", d), "is the checkpoint being exported");

  SafeTensors bare = b;
  bare.metadata.clear();
  write_file_atomic(d.file("bare.safetensors"), encode_safetensors(bare));
  r = ptl_cli("import bare.safetensors --out imported.tinygpt", d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 layers, d 48, 3 heads, ctx 32"), std::string::npos) << r.out;
  const auto imp = read_file_bytes(d.file("imported.tinygpt"));
  const SafeTensors c = decode_safetensors(imp.data(), imp.size());
  for (const auto& t : b.tensors) EXPECT_EQ(c.find(t.name)->data, t.data) << t.name;
  const CliRun e1 = ptl_cli("eval run/model.tinygpt --data t.txt --json", d);
  const CliRun e2 = ptl_cli("eval imported.tinygpt --data t.txt --json", d);
  ASSERT_EQ(e2.code, 0) << e2.err;
  EXPECT_EQ(nlohmann::json::parse(e1.out)["loss"], nlohmann::json::parse(e2.out)["loss"]);

  // No preset has 2 layers of d 48 with ctx 16: the heads must be given.
  SafeTensors odd = bare;
  odd.tensors.clear();
  for (const auto& t : bare.tensors) {
    StoredTensor s = t;
    if (t.name == "pos_emb.weight") {
      s.shape[0] = 16;
      s.data.resize(16 * 48 * sizeof(float));
    }
    odd.tensors.push_back(s);
  }
  write_file_atomic(d.file("odd.safetensors"), encode_safetensors(odd));
  expect_error(ptl_cli("import odd.safetensors --out o.tinygpt", d), "give it with --heads");
  EXPECT_EQ(ptl_cli("import odd.safetensors --out o.tinygpt --heads 4", d).code, 0);
  expect_error(ptl_cli("import odd.safetensors --out o2.tinygpt --heads 5", d), "not divisible");
  SafeTensors missing = bare;
  missing.tensors.erase(missing.tensors.begin() + 5);
  write_file_atomic(d.file("missing.safetensors"), encode_safetensors(missing));
  expect_error(ptl_cli("import missing.safetensors --out m.tinygpt", d), "missing.safetensors: missing tensor");
  write(d.file("notes.safetensors"), "not a safetensors file at all");
  expect_error(ptl_cli("import notes.safetensors --out n.tinygpt", d), "notes.safetensors");
}
