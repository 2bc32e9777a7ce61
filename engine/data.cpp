#include "engine/data.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"

namespace ptl {

namespace fs = std::filesystem;

std::vector<int32_t> encode(const std::string& text) {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string decode(const std::vector<int32_t>& tokens) {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) out[i] = static_cast<char>(tokens[i] & 0xFF);
  return out;
}

std::string printable_utf8(const std::string& s) {
  std::string out;
  const std::string replacement = "\xEF\xBF\xBD";
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += replacement;
      ++i;
    }
  }
  return out;
}

Corpus::Corpus(std::string bytes, int ctx, double val_fraction, const std::string& name, const Tokenizer* tokenizer)
    : ctx_(ctx) {
  check(!bytes.empty(), name + ": the corpus is empty");
  check(ctx >= 1, name + ": the context length must be at least 1, got " + std::to_string(ctx));
  // (NaN fails both comparisons.)
  check(val_fraction >= 0 && val_fraction < 1, name + ": the validation fraction must be in [0, 1)");
  const size_t n_val = size_t(double(bytes.size()) * val_fraction);
  const size_t n_train = bytes.size() - n_val;
  const size_t need = size_t(ctx) + 1;
  bpe_ = tokenizer != nullptr && !tokenizer->is_bytes();
  if (bpe_) {
    train_ = bytes.substr(0, n_train);
    val_ = bytes.substr(n_train);
    train_ids_ = tokenizer->encode(train_);
    val_ids_ = tokenizer->encode(val_);
    check(train_ids_.size() >= need, name + ": corpus too small: its training split (" + std::to_string(n_train) +
                                         " bytes) is " + std::to_string(train_ids_.size()) +
                                         " tokens, but a context of " + std::to_string(ctx) + " needs windows of " +
                                         std::to_string(need) + " tokens");
    check(n_val == 0 || val_ids_.size() >= need,
          name + ": corpus too small: its validation split (last " + std::to_string(int(val_fraction * 100)) + "%, " +
              std::to_string(n_val) + " bytes) is " + std::to_string(val_ids_.size()) +
              " tokens, fewer than one window of " + std::to_string(need) + " tokens for a context of " +
              std::to_string(ctx));
    return;
  }
  check(n_train >= need, name + ": corpus too small: " + std::to_string(bytes.size()) +
                             " bytes gives a training split of " + std::to_string(n_train) +
                             " bytes, but a context of " + std::to_string(ctx) + " needs windows of " +
                             std::to_string(need) + " bytes");
  check(n_val == 0 || n_val >= need, name + ": corpus too small: its validation split (last " +
                                         std::to_string(int(val_fraction * 100)) + "%) has " + std::to_string(n_val) +
                                         " bytes, fewer than one window of " + std::to_string(need) +
                                         " bytes for a context of " + std::to_string(ctx));
  train_ = bytes.substr(0, n_train);
  val_ = bytes.substr(n_train);
}

namespace {

// `size` tokens, token k = at(k): B windows [s, s + ctx] at starts drawn from `rng`.
template <class At>
Batch windows(size_t size, At at, Rng& rng, int batch, int ctx) {
  check(batch >= 1, "batch must be at least 1, got " + std::to_string(batch));
  Batch b{batch, ctx, std::vector<int32_t>(size_t(batch) * ctx), std::vector<int32_t>(size_t(batch) * ctx)};
  const uint64_t starts = size - size_t(ctx);  // window [s, s + ctx] inclusive
  for (int i = 0; i < batch; ++i) {
    const size_t s = rng.below(starts);
    for (int t = 0; t < ctx; ++t) {
      b.inputs[size_t(i) * ctx + t] = at(s + t);
      b.targets[size_t(i) * ctx + t] = at(s + t + 1);
    }
  }
  return b;
}

Batch windows(const std::string& text, Rng& rng, int batch, int ctx) {
  return windows(
      text.size(), [&](size_t k) { return int32_t(static_cast<unsigned char>(text[k])); }, rng, batch, ctx);
}

Batch windows(const std::vector<int32_t>& ids, Rng& rng, int batch, int ctx) {
  return windows(
      ids.size(), [&](size_t k) { return ids[k]; }, rng, batch, ctx);
}

}  // namespace

Batch Corpus::sample_train(Rng& rng, int batch) const {
  return bpe_ ? windows(train_ids_, rng, batch, ctx_) : windows(train_, rng, batch, ctx_);
}

std::vector<Batch> Corpus::val_batches(int batch, int count) const {
  check(has_val(), "this corpus has no validation split");
  Rng rng(0x5eed0fda7a5e7u);  // fixed: the same windows for every run
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i)
    out.push_back(bpe_ ? windows(val_ids_, rng, batch, ctx_) : windows(val_, rng, batch, ctx_));
  return out;
}

std::vector<Batch> text_windows(const std::string& bytes, int ctx) {
  check(bytes.size() >= 2, "text too short to evaluate: it needs at least 2 bytes");
  check(ctx >= 1, "the context length must be at least 1, got " + std::to_string(ctx));
  std::vector<Batch> out;
  for (size_t s = 0; s + 1 < bytes.size(); s += size_t(ctx)) {
    const int T = int(std::min<size_t>(ctx, bytes.size() - 1 - s));
    Batch b{1, T, std::vector<int32_t>(T), std::vector<int32_t>(T)};
    for (int t = 0; t < T; ++t) {
      b.inputs[t] = static_cast<unsigned char>(bytes[s + t]);
      b.targets[t] = static_cast<unsigned char>(bytes[s + t + 1]);
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<Batch> text_windows(const std::vector<int32_t>& ids, int ctx) {
  check(ids.size() >= 2, "text too short to evaluate: it is " + std::to_string(ids.size()) +
                             " token(s) under the model's tokenizer, and it needs at least 2");
  check(ctx >= 1, "the context length must be at least 1, got " + std::to_string(ctx));
  std::vector<Batch> out;
  for (size_t s = 0; s + 1 < ids.size(); s += size_t(ctx)) {
    const int T = int(std::min<size_t>(ctx, ids.size() - 1 - s));
    Batch b{1, T, std::vector<int32_t>(ids.begin() + s, ids.begin() + s + T),
            std::vector<int32_t>(ids.begin() + s + 1, ids.begin() + s + 1 + T)};
    out.push_back(std::move(b));
  }
  return out;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  check(fs::exists(path, ec), "data file not found: " + path);
  check(!fs::is_directory(path, ec), "data path is a directory, not a file: " + path);
  std::ifstream f(path, std::ios::binary);
  check(bool(f), "cannot read data file: " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  check(!s.empty(), "data file is empty: " + path);
  return s;
}

namespace {
constexpr const char* kShakespeareUrl =
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt";
constexpr const char* kShakespeareSha256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed";

bool has_expected_size(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && fs::file_size(p, ec) == 1115394;
}
}  // namespace

std::string find_tinyshakespeare() {
  std::vector<fs::path> tried;
  if (const char* dir = std::getenv("PTL_DATA_DIR")) tried.push_back(fs::path(dir) / "tinyshakespeare.txt");
  // ../shared/data relative to the working directory and to each parent of it.
  for (fs::path d = fs::current_path();; d = d.parent_path()) {
    tried.push_back(d / ".." / "shared" / "data" / "tinyshakespeare.txt");
    tried.push_back(d / "shared" / "data" / "tinyshakespeare.txt");
    if (d == d.parent_path()) break;
  }
  for (const auto& p : tried)
    if (has_expected_size(p)) return fs::weakly_canonical(p).string();

  // Last resort: download into the user's cache and verify the checksum.
  const char* home = std::getenv("HOME");
  fs::path cache = fs::path(home ? home : "/tmp") / ".cache" / "posttrainllm";
  fs::path target = cache / "tinyshakespeare.txt";
  if (has_expected_size(target)) return target.string();
  std::error_code ec;
  fs::create_directories(cache, ec);
  const std::string tmp = target.string() + ".download";
  std::string cmd = "curl -fsSL --max-time 60 -o '" + tmp + "' '" + kShakespeareUrl +
                    "' 2>/dev/null || wget -q -T 60 -O '" + tmp + "' '" + kShakespeareUrl + "' 2>/dev/null";
  int rc = std::system(cmd.c_str());
  if (rc == 0) {
    std::array<char, 128> buf{};
    std::string sum;
    if (FILE* pipe = popen(("sha256sum '" + tmp + "'").c_str(), "r")) {
      if (fgets(buf.data(), buf.size(), pipe)) sum = std::string(buf.data()).substr(0, 64);
      pclose(pipe);
    }
    if (sum == kShakespeareSha256) {
      fs::rename(tmp, target, ec);
      if (!ec) return target.string();
    }
  }
  fs::remove(tmp, ec);
  fail(
      "TinyShakespeare not found: set PTL_DATA_DIR to a folder holding tinyshakespeare.txt, put it in "
      "../shared/data, or pass --data FILE (the download from " +
      std::string(kShakespeareUrl) + " failed)");
}

}  // namespace ptl
