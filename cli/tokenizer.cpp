// ptl tokenizer train | encode | decode | info: byte-level BPE tokenizers (engine/tokenizer.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli/commands.h"
#include "engine/bpe_trainer.h"
#include "engine/data.h"
#include "engine/error.h"
#include "engine/safetensors.h"
#include "engine/tokenizer_files.h"

namespace ptl::cli {

namespace {

constexpr const char* kTokenizerHelp =
    "A tokenizer.json, or a folder holding tokenizer.json, vocab.json + merges.txt (a Hugging Face model "
    "folder) or encoder.json + vocab.bpe (OpenAI's GPT-2 files)";

std::string read_input(const std::string& path) {
  if (path.empty() || path == "-") {
    std::string s{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    check(!std::cin.bad(), "cannot read standard input");
    return s;
  }
  const std::vector<uint8_t> b = read_file_bytes(path);
  return std::string(b.begin(), b.end());
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- train ----

struct TokenizerTrainArgs {
  std::string data, out;
  int vocab_size = 4096;
};

void run_tokenizer_train(const TokenizerTrainArgs& a) {
  check_not_overwriting(a.out, a.data, "--out names the training text itself: " + a.out);
  const std::string text = read_text_file(a.data);
  const bool tty = isatty(fileno(stderr));
  BpeTrainOptions opt;
  opt.vocab_size = a.vocab_size;
  if (tty)
    opt.progress = [](int made, int wanted) {
      std::fprintf(stderr, "\rtokens %d/%d", made, wanted);
      std::fflush(stderr);
    };
  BpeTrainStats st;
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer t = train_bpe(text, opt, &st);
  const double train_s = seconds_since(t0);
  if (tty) std::fprintf(stderr, "\n");
  save_tokenizer(t, a.out);
  const auto t1 = std::chrono::steady_clock::now();
  const size_t tokens = t.encode(text).size();
  const double encode_s = seconds_since(t1);
  std::fprintf(stderr,
               "trained a %d-token vocabulary (256 bytes, %d merges, %zu special) on %s (%zu bytes: %lld pieces, "
               "%lld distinct) in %.2f s (pieces %.2f s, merges %.2f s; last merge's count %lld)\n",
               st.vocab_size, st.merges, t.specials().size(), a.data.c_str(), text.size(), (long long)st.pieces,
               (long long)st.distinct_pieces, train_s, st.split_s, st.merge_s, (long long)st.last_count);
  if (st.vocab_size < a.vocab_size)
    std::fprintf(stderr, "the text ran out of pairs to merge before %d tokens\n", a.vocab_size);
  std::fprintf(stderr, "%s: %zu tokens, %.2f bytes per token (encoded in %.2f s)\nwrote %s\n", a.data.c_str(), tokens,
               double(text.size()) / double(std::max<size_t>(tokens, 1)), encode_s, a.out.c_str());
}

// ---- encode ----

struct EncodeArgs {
  std::string tokenizer, data;
  bool json = false, no_special = false, timing = false;
  int repeat = 1;
};

void run_encode(const EncodeArgs& a) {
  const Tokenizer t = load_tokenizer(a.tokenizer);
  const std::string text = read_input(a.data);
  std::vector<int32_t> ids;
  double best = 1e300;
  for (int r = 0; r < a.repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ids = t.encode(text, !a.no_special);
    best = std::min(best, seconds_since(t0));
  }
  std::string out;
  out.reserve(ids.size() * 6 + 64);
  if (a.json)
    out +=
        "{\"tokens\": " + std::to_string(ids.size()) + ", \"bytes\": " + std::to_string(text.size()) + ", \"ids\": [";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += a.json ? ", " : " ";
    out += std::to_string(ids[i]);
  }
  out += a.json ? "]}\n" : "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (a.timing)
    std::fprintf(stderr, "%s\n",
                 nlohmann::json{{"tokens", ids.size()},
                                {"bytes", text.size()},
                                {"seconds", best},
                                {"mb_per_s", best > 0 ? double(text.size()) / 1e6 / best : 0.0},
                                {"repeat", a.repeat}}
                     .dump()
                     .c_str());
}

// ---- decode ----

struct DecodeArgs {
  std::string tokenizer, ids;
};

void run_decode(const DecodeArgs& a) {
  const Tokenizer t = load_tokenizer(a.tokenizer);
  const std::string in = read_input(a.ids);
  const std::string where = a.ids.empty() || a.ids == "-" ? "standard input" : a.ids;
  // Whitespace- or comma-separated ids; the brackets of a JSON array are allowed around them.
  std::vector<int32_t> ids;
  for (size_t i = 0; i < in.size();) {
    const char c = in[i];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ',' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < in.size() && in[j] >= '0' && in[j] <= '9' && j - i < 10) ++j;
    const bool ends = j == in.size() || std::string_view(" \n\t\r,[]").find(in[j]) != std::string_view::npos;
    if (j == i || !ends) {
      size_t e = i;
      while (e < in.size() && e - i < 20 && !std::isspace(static_cast<unsigned char>(in[e]))) ++e;
      fail(where + ": '" + in.substr(i, e - i) + "' is not a token id (whole numbers separated by spaces)");
    }
    const long long id = std::stoll(in.substr(i, j - i));
    if (!t.has_token(static_cast<int32_t>(std::min<long long>(id, INT32_MAX))))
      fail(where + ": token id " + std::to_string(id) + " is not in the vocabulary (size " +
           std::to_string(t.vocab_size()) + ")");
    ids.push_back(static_cast<int32_t>(id));
    i = j;
  }
  const std::string bytes = t.decode(ids);
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
}

// ---- info ----

struct TokenizerInfoArgs {
  std::string tokenizer;
  bool json = false;
};

void run_tokenizer_info(const TokenizerInfoArgs& a) {
  const Tokenizer t = load_tokenizer(a.tokenizer);
  nlohmann::json specials = nlohmann::json::array();
  for (const auto& s : t.specials()) specials.push_back({{"text", s.text}, {"id", s.id}});
  if (a.json) {
    std::printf("%s\n", nlohmann::json{{"tokenizer", a.tokenizer},
                                       {"type", t.type()},
                                       {"vocab_size", t.vocab_size()},
                                       {"merges", t.merge_count()},
                                       {"specials", specials}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("%s\ntype: %s (%s)\nvocabulary size: %d\nmerges: %zu\nspecial tokens:", a.tokenizer.c_str(),
              t.type().c_str(), t.is_bytes() ? "one token per byte" : "byte-level BPE, GPT-2's scheme", t.vocab_size(),
              t.merge_count());
  if (t.specials().empty()) std::printf(" none");
  for (const auto& s : t.specials()) std::printf(" %s = %d", s.text.c_str(), s.id);
  std::printf("\n");
}

// ---- convert ----

struct ConvertArgs {
  std::string tokenizer, out;
};

void run_convert(const ConvertArgs& a) {
  const Tokenizer t = load_tokenizer(a.tokenizer);
  check_not_overwriting(a.out, a.tokenizer, "--out names the tokenizer being read: " + a.out);
  save_tokenizer(t, a.out);
  std::fprintf(stderr, "wrote %s (%s, vocabulary %d, %zu merges)\n", a.out.c_str(), t.type().c_str(), t.vocab_size(),
               t.merge_count());
}

}  // namespace

void add_tokenizer(CLI::App& app) {
  CLI::App* tok = app.add_subcommand(
      "tokenizer",
      "Byte-level BPE tokenizers (GPT-2's scheme): train one on a text, encode, decode, convert, inspect.\n"
      "Reads tokenizer.json (Hugging Face), vocab.json + merges.txt and encoder.json + vocab.bpe (GPT-2's "
      "files); writes tokenizer.json.");
  tok->require_subcommand(1);

  auto ta = std::make_shared<TokenizerTrainArgs>();
  CLI::App* train = tok->add_subcommand(
      "train",
      "Train a byte-level BPE tokenizer on a text and write it as tokenizer.json (ids 0-255 are the bytes, "
      "then the merged tokens, then <|endoftext|>)");
  train->add_option("--data", ta->data, "The text to learn from")->required();
  train
      ->add_option("--vocab-size", ta->vocab_size,
                   "Vocabulary size: 256 bytes + merged tokens + 1 (<|endoftext|>), 257 to 65536")
      ->check(CLI::Range(kMinTrainVocab, kMaxTrainVocab))
      ->capture_default_str();
  train->add_option("--out", ta->out, "Where to write tokenizer.json")->required();
  train->callback([ta]() { run_tokenizer_train(*ta); });

  auto ea = std::make_shared<EncodeArgs>();
  CLI::App* encode = tok->add_subcommand(
      "encode", "Print the token ids of a text, separated by spaces (or a JSON object with --json)");
  encode->add_option("--tokenizer", ea->tokenizer, kTokenizerHelp)->required();
  encode->add_option("--data", ea->data, "The text (any bytes) to encode (default: standard input)");
  encode->add_flag("--json", ea->json, "Print {\"tokens\": N, \"bytes\": M, \"ids\": [...]}");
  encode->add_flag("--no-special", ea->no_special,
                   "Read special tokens' text (<|endoftext|>) as ordinary text, as gpt-3-encoder does");
  encode->add_flag("--timing", ea->timing,
                   "Print the encoding time on standard error as JSON {tokens, bytes, seconds, mb_per_s, repeat}");
  encode->add_option("--repeat", ea->repeat, "Encode this many times; --timing reports the fastest")
      ->check(at_least(1));
  encode->callback([ea]() { run_encode(*ea); });

  auto da = std::make_shared<DecodeArgs>();
  CLI::App* decode = tok->add_subcommand(
      "decode", "Write the bytes of token ids (whitespace or comma separated, from standard input) to standard output");
  decode->add_option("--tokenizer", da->tokenizer, kTokenizerHelp)->required();
  decode->add_option("--ids", da->ids, "A file of ids instead of standard input");
  decode->callback([da]() { run_decode(*da); });

  auto ca = std::make_shared<ConvertArgs>();
  CLI::App* convert = tok->add_subcommand(
      "convert",
      "Write a tokenizer (e.g. GPT-2's vocab.json + merges.txt or encoder.json + vocab.bpe) as tokenizer.json");
  convert->add_option("--tokenizer", ca->tokenizer, kTokenizerHelp)->required();
  convert->add_option("--out", ca->out, "Where to write tokenizer.json")->required();
  convert->callback([ca]() { run_convert(*ca); });

  auto ia = std::make_shared<TokenizerInfoArgs>();
  CLI::App* info = tok->add_subcommand("info", "Show a tokenizer's type, vocabulary size, merges and special tokens");
  info->add_option("tokenizer", ia->tokenizer, kTokenizerHelp)->required();
  info->add_flag("--json", ia->json, "Print one JSON object {tokenizer, type, vocab_size, merges, specials}");
  info->callback([ia]() { run_tokenizer_info(*ia); });
}

}  // namespace ptl::cli
