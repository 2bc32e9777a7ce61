// Tokenizers: GPT-2's pre-tokenisation, BPE merges on a vocabulary checked by hand, round trips of
// arbitrary bytes, streaming decode, the file readers' errors, training, and the CLI. (Exactness
// against GPT-2's reference encoders is tested in Node: tests/tokenizer/.)
#include <map>
#include <random>

#include "engine/bpe_trainer.h"
#include "engine/error.h"
#include "engine/pretokenize.h"
#include "engine/tokenizer.h"
#include "engine/tokenizer_files.h"
#include "engine/unicode_classes.h"
#include "tests/test_util.h"

namespace ptl {
namespace {

using test::TempDir;

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for_each_gpt2_piece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using V = std::vector<std::string>;

TEST(Pretokenize, FollowsGpt2Pattern) {
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("it's they're I'm we'll he'd you've don't"),
            (V{"it", "'s", " they", "'re", " I", "'m", " we", "'ll", " he", "'d", " you", "'ve", " don", "'t"}));
  EXPECT_EQ(pieces("IT'S"), (V{"IT", "'", "S"}));  // contractions are lower case only
  // A run of spaces gives all but its last space to a piece of its own; the last starts the word.
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(pieces("end  "), (V{"end", "  "}));  // at the end of the text the whole run is one piece
  EXPECT_EQ(pieces("x\n\ny"), (V{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces("x \n y"), (V{"x", " \n", " y"}));
  EXPECT_EQ(pieces("abc123def 42"), (V{"abc", "123", "def", " 42"}));
  EXPECT_EQ(pieces(" ?!x...y"), (V{" ?!", "x", "...", "y"}));
  EXPECT_EQ(pieces("café naïve"), (V{"café", " naïve"}));
  EXPECT_EQ(pieces("日本語のテキスト"), (V{"日本語のテキスト"}));
  EXPECT_EQ(pieces("Ⅻ²٣"), (V{"Ⅻ²٣"}));                    // numbers beyond ASCII
  EXPECT_EQ(pieces("a\u00a0b"), (V{"a", "\u00a0", "b"}));  // no-break space is white space
  EXPECT_EQ(pieces(" 😀😀 x"), (V{" 😀😀", " x"}));            // emoji are "other"
  EXPECT_EQ(pieces("n\u0303a"), (V{"n", "\u0303", "a"}));  // a combining mark is not a letter
  // Invalid UTF-8 bytes are "other" characters, one byte each, and stay in the pieces.
  EXPECT_EQ(pieces("ab\xff\xfe cd \xe2\x82"), (V{"ab", "\xff\xfe", " cd", " \xe2\x82"}));
  EXPECT_EQ(pieces(""), V{});
}

TEST(Pretokenize, CharClasses) {
  EXPECT_EQ(char_class('a'), CharClass::letter);
  EXPECT_EQ(char_class(0x4E2D), CharClass::letter);  // 中
  EXPECT_EQ(char_class(0x0663), CharClass::number);  // Arabic-Indic 3
  EXPECT_EQ(char_class(0x2163), CharClass::number);  // Roman numeral four (Nl)
  EXPECT_EQ(char_class(0x3000), CharClass::space);
  EXPECT_EQ(char_class(0x85), CharClass::space);         // White_Space (JavaScript's \s lacks it)
  EXPECT_EQ(char_class(0xFEFF), CharClass::other);       // not White_Space (JavaScript's \s has it)
  EXPECT_EQ(char_class(0x1F600), CharClass::other);      // 😀
  EXPECT_FALSE(next_utf8("\xc0\xaf", 0).valid);          // overlong
  EXPECT_FALSE(next_utf8("\xed\xa0\x80", 0).valid);      // surrogate
  EXPECT_FALSE(next_utf8("\xf4\x90\x80\x80", 0).valid);  // above U+10FFFF
  EXPECT_EQ(next_utf8("\xf0\x9f\x98\x80", 0).cp, 0x1F600u);
}

TEST(Tokenizer, BytesToUnicodeIsGpt2s) {
  EXPECT_EQ(bytes_to_unicode(" "), "Ġ");
  EXPECT_EQ(bytes_to_unicode("\n"), "Ċ");
  EXPECT_EQ(bytes_to_unicode("A!~"), "A!~");
  EXPECT_EQ(bytes_to_unicode(std::string(1, '\0')), "Ā");
  std::string all, back;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  ASSERT_TRUE(unicode_to_bytes(bytes_to_unicode(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(unicode_to_bytes("€", &back));  // not a character of the map
}

// A vocabulary small enough to work out by hand: the 256 bytes (ids = byte values) and three merges.
Tokenizer hand_made() {
  Tokenizer::Spelled s;
  for (int b = 0; b < 256; ++b) s.vocab.emplace_back(bytes_to_unicode(std::string(1, static_cast<char>(b))), b);
  s.vocab.emplace_back("ab", 256);
  s.vocab.emplace_back("abc", 257);
  s.vocab.emplace_back("Ġa", 258);
  s.vocab.emplace_back("aa", 259);
  s.merges = {{"a", "b"}, {"ab", "c"}, {"Ġ", "a"}, {"a", "a"}};
  s.specials = {{kEndOfText, 260}};
  return Tokenizer::from_spelled(std::move(s), "hand-made", nullptr);
}

TEST(Tokenizer, HandMadeMergesByRank) {
  const Tokenizer t = hand_made();
  EXPECT_EQ(t.vocab_size(), 261);
  EXPECT_EQ(t.merge_count(), 4u);
  // "abc": a b c -> (a,b) rank 0 -> ab c -> (ab,c) rank 1 -> abc.
  // " abc": Ġ a b c; (a,b) ranks before (Ġ,a), so Ġ ab c -> Ġ abc (Ġa never forms).
  // " ab": Ġ a b -> Ġ ab.   " a": Ġ a -> Ġa.   "aaa": (a,a) left to right -> aa a.
  const int G = ' ';
  EXPECT_EQ(t.encode("abc abc ab a"), (std::vector<int32_t>{257, G, 257, G, 256, 258}));
  EXPECT_EQ(t.encode("aaa"), (std::vector<int32_t>{259, 'a'}));
  EXPECT_EQ(t.encode("aaaa"), (std::vector<int32_t>{259, 259}));
  EXPECT_EQ(t.encode("x<|endoftext|>ab"), (std::vector<int32_t>{'x', 260, 256}));
  EXPECT_EQ(t.encode("x<|endoftext|>", false).size(), 14u);  // as text: 14 bytes, none of them merged
  EXPECT_EQ(t.decode(std::vector<int32_t>{257, G, 260}), "abc <|endoftext|>");
  EXPECT_THROW(t.decode(std::vector<int32_t>{261}), Error);
}

// Later merges ranked below earlier ones can apply first in GPT-2's loop only once every
// occurrence of the current pair is merged; the heap-based merge must give the same result.
TEST(Tokenizer, MergeRoundsMatchGpt2Loop) {
  Tokenizer::Spelled s;
  for (int b = 0; b < 256; ++b) s.vocab.emplace_back(bytes_to_unicode(std::string(1, static_cast<char>(b))), b);
  s.vocab.emplace_back("ab", 256);
  s.vocab.emplace_back("abx", 257);
  s.merges = {{"a", "b"}, {"ab", "x"}};
  const Tokenizer t = Tokenizer::from_spelled(std::move(s), "t", nullptr);
  EXPECT_EQ(t.encode("abxab"), (std::vector<int32_t>{257, 256}));
  EXPECT_EQ(t.encode("ababx"), (std::vector<int32_t>{256, 257}));
  // Past 16 bytes a piece takes the heap-based path: the same result.
  std::vector<int32_t> expected(6, 257);
  expected.push_back(256);
  EXPECT_EQ(t.encode("abxabxabxabxabxabxab"), expected);
}

// GPT-2's loop written plainly (ids of a trained tokenizer: byte b is id b).
std::vector<int32_t> reference_bpe(const Tokenizer& t, std::string_view piece) {
  std::map<std::pair<int32_t, int32_t>, size_t> rank;
  for (size_t r = 0; r < t.merge_count(); ++r) rank.emplace(std::pair{t.merge(r).left, t.merge(r).right}, r);
  std::vector<int32_t> sym(piece.begin(), piece.end());
  for (;;) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      if (auto it = rank.find({sym[i], sym[i + 1]}); it != rank.end()) best = std::min(best, it->second);
    if (best == SIZE_MAX) return sym;
    const Tokenizer::Merge m = t.merge(best);
    std::vector<int32_t> next;
    for (size_t i = 0; i < sym.size();) {
      if (i + 1 < sym.size() && sym[i] == m.left && sym[i + 1] == m.right) {
        next.push_back(m.result);
        i += 2;
      } else {
        next.push_back(sym[i++]);
      }
    }
    sym = next;
  }
}

// Short pieces take GPT-2's loop, long ones the heap: both must be GPT-2's result.
TEST(Tokenizer, MergesOfShortAndLongPiecesMatchGpt2Loop) {
  BpeTrainOptions opt;
  opt.vocab_size = 700;
  const Tokenizer t = train_bpe(test::synthetic_text(60000, 5), opt);
  std::mt19937 rng(3);
  const std::string letters = "theqkingandusofhlp";
  for (int i = 0; i < 3000; ++i) {
    std::string piece(1 + rng() % 80, 'a');
    for (char& c : piece) c = letters[rng() % letters.size()];  // one piece: a run of letters
    ASSERT_EQ(t.encode(piece), reference_bpe(t, piece)) << piece;
  }
}

// Random byte strings: mostly ASCII words, some UTF-8 characters, some bytes of any value.
std::string random_bytes(std::mt19937& rng, size_t max_len) {
  static const char* parts[] = {"the", " ", "  ", "\n", "'s", "é", "日本", "😀", "12", "!?", "\t", "\xe2\x82", "\xff"};
  std::string s;
  const size_t n = rng() % max_len;
  while (s.size() < n) {
    if (rng() % 4 == 0)
      s += static_cast<char>(rng() % 256);
    else
      s += parts[rng() % (sizeof(parts) / sizeof(*parts))];
  }
  return s;
}

TEST(Tokenizer, ArbitraryBytesRoundTrip) {
  const Tokenizer bytes, hand = hand_made();
  BpeTrainOptions opt;
  opt.vocab_size = 600;
  const Tokenizer trained = train_bpe(test::synthetic_text(20000) + "déjà vu 日本語 😀 \xff\xfe", opt);
  std::mt19937 rng(1);
  for (int i = 0; i < 2000; ++i) {
    const std::string x = random_bytes(rng, 200);
    for (const Tokenizer* t : {&bytes, &hand, &trained}) {
      const std::vector<int32_t> ids = t->encode(x);
      ASSERT_EQ(t->decode(ids), x) << "case " << i;
      for (int32_t id : ids) ASSERT_TRUE(t->has_token(id));
    }
  }
  EXPECT_EQ(bytes.encode("A\xff"), (std::vector<int32_t>{65, 255}));
  EXPECT_TRUE(bytes.is_bytes());
  EXPECT_EQ(bytes.vocab_size(), 256);
}

TEST(Tokenizer, StreamingDecodeHoldsBackIncompleteUtf8) {
  const Tokenizer t;  // bytes: a multi-byte character arrives one token at a time
  TokenStreamDecoder d(t);
  const std::string euro = "€";  // e2 82 ac
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xe2), "");
  EXPECT_EQ(d.push(0x82), "");
  EXPECT_EQ(d.push(0xac), euro);
  EXPECT_EQ(d.push(0xf0), "");  // 😀 = f0 9f 98 80
  EXPECT_EQ(d.push(0x9f), "");
  EXPECT_EQ(d.push(0x98), "");
  EXPECT_EQ(d.push(0x80), "😀");
  // Bytes that can never become a character are passed on at once.
  EXPECT_EQ(d.push(0xff), "\xff");
  EXPECT_EQ(d.push(0xe0), "");
  EXPECT_EQ(d.push(0x80), "\xe0\x80");  // E0 must be followed by A0..BF
  EXPECT_EQ(d.push(0xe2), "");
  EXPECT_EQ(d.push('x'), "\xe2x");  // interrupted
  EXPECT_EQ(d.push(0xc3), "");
  EXPECT_EQ(d.finish(), "\xc3");  // the end of the stream releases what is held
  // Whatever the tokens, the pieces put together are the decoded text.
  const Tokenizer hand = hand_made();
  std::mt19937 rng(2);
  for (int i = 0; i < 300; ++i) {
    const std::string x = random_bytes(rng, 100);
    TokenStreamDecoder s(hand);
    std::string out;
    for (int32_t id : hand.encode(x)) out += s.push(id);
    out += s.finish();
    ASSERT_EQ(out, x);
  }
}

TEST(Tokenizer, JsonRoundTrip) {
  BpeTrainOptions opt;
  opt.vocab_size = 400;
  const Tokenizer t = train_bpe(test::synthetic_text(30000), opt);
  const Tokenizer back = tokenizer_from_json(t.to_json(), "t.json");
  EXPECT_EQ(back.vocab_size(), t.vocab_size());
  EXPECT_EQ(back.merge_count(), t.merge_count());
  EXPECT_EQ(back.special_id(kEndOfText), t.vocab_size() - 1);
  EXPECT_EQ(back.to_json(), t.to_json());
  const std::string text = test::synthetic_text(5000, 3) + "<|endoftext|>x";
  EXPECT_EQ(back.encode(text), t.encode(text));
  // The byte-level tokenizer is the BPE one with no merges, in the same format.
  EXPECT_TRUE(tokenizer_from_json(Tokenizer().to_json(), "bytes.json").is_bytes());
}

TEST(Tokenizer, ReadsVocabAndMerges) {
  TempDir dir;
  const Tokenizer t = hand_made();
  nlohmann::json vocab;
  for (int32_t id = 0; id < t.vocab_size(); ++id) vocab[t.token_spelling(id)] = id;
  test::write(dir.file("vocab.json"), vocab.dump());
  test::write(dir.file("merges.txt"), "#version: 0.2\r\na b\nab c\r\nĠ a\na a\n\n");
  const Tokenizer r = load_tokenizer(dir.path.string());
  EXPECT_EQ(r.encode("abc abc ab a"), t.encode("abc abc ab a"));
  EXPECT_EQ(r.special_id(kEndOfText), 260);  // <|endoftext|> is special by name in GPT-2's files
  // OpenAI's names for the same two files.
  TempDir openai;
  std::filesystem::copy_file(dir.file("vocab.json"), openai.file("encoder.json"));
  std::filesystem::copy_file(dir.file("merges.txt"), openai.file("vocab.bpe"));
  EXPECT_EQ(load_tokenizer(openai.path.string()).encode("abc abc"), t.encode("abc abc"));
}

// The message of the error a load gives, or "" if it loads.
std::string load_error(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Tokenizer, MalformedFilesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::string good = hand_made().to_json();
  const auto json_case = [&](const std::string& name, const std::string& text, const std::string& phrase) {
    const std::string f = dir.file(name);
    test::write(f, text);
    const std::string e = load_error(f);
    EXPECT_NE(e.find(f + ": "), std::string::npos) << e;
    EXPECT_NE(e.find(phrase), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  const auto edited = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::parse(good);
    f(j);
    return j.dump();
  };
  json_case("a.json", "{\"model\": ", "not valid JSON");
  json_case("b.json", "[1, 2]", "not a tokenizer.json");
  json_case("c.json", edited([](auto& j) { j["model"]["merges"].push_back("a zz"); }),
            "model.merges[4]: its right part 'zz' is not in the vocabulary");
  json_case("d.json", edited([](auto& j) { j["model"]["merges"].push_back("ab"); }), "one space");
  json_case("e.json", edited([](auto& j) { j["model"]["vocab"].erase("Ġ"); }), "no token for byte 0x20");
  json_case("f.json", edited([](auto& j) { j["model"]["vocab"]["zz"] = 1000000000000LL; }), "outside 0..");
  json_case("g.json", edited([](auto& j) { j["model"]["vocab"]["zz"] = 5; }), "id 5 is given to both");
  json_case("h.json", edited([](auto& j) { j["model"]["vocab"]["zz"] = "x"; }), "not a whole number");
  json_case("i.json", edited([](auto& j) { j["normalizer"] = {{"type", "NFC"}}; }), "normalizer");
  json_case("j.json", edited([](auto& j) { j["model"]["type"] = "WordPiece"; }), "model.type \"WordPiece\"");
  json_case("k.json", edited([](auto& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }), "add_prefix_space");
  json_case("l.json", edited([](auto& j) { j["added_tokens"][0]["lstrip"] = true; }), "lstrip");
  json_case("m.json", edited([](auto& j) { j["model"]["merges"].push_back("a b"); }), "repeats model.merges[0]");
  json_case("n.json", edited([](auto& j) { j["added_tokens"][0]["id"] = 3; }), "which is");
  json_case("o.json", edited([](auto& j) { j["model"]["merges"] = 7; }), "model.merges must be an array");
  json_case("p.json", "\xff\xfe{}", "not valid JSON");
  // A special token's text in the vocabulary under another id (found by fuzz_tokenizer: the text was
  // written twice into the vocabulary and read back as one of them).
  json_case("q.json", edited([](auto& j) { j["model"]["vocab"][j["added_tokens"][0]["content"]] = 1000; }),
            "but the vocabulary gives it the id 1000");

  // merges.txt problems name merges.txt and its line.
  TempDir folder;
  nlohmann::json vocab;
  const Tokenizer t = hand_made();
  for (int32_t id = 0; id < 256; ++id) vocab[t.token_spelling(id)] = id;
  test::write(folder.file("vocab.json"), vocab.dump());
  test::write(folder.file("merges.txt"), "#version: 0.2\na b\n");
  std::string e = load_error(folder.path.string());
  EXPECT_NE(e.find(folder.file("merges.txt") + " line 2: its result 'ab' is not in the vocabulary"), std::string::npos)
      << e;
  test::write(folder.file("merges.txt"), "#version: 0.2\na b c\n");
  e = load_error(folder.path.string());
  EXPECT_NE(e.find(folder.file("merges.txt") + " line 2"), std::string::npos) << e;
  std::filesystem::remove(folder.file("merges.txt"));
  EXPECT_NE(load_error(folder.path.string()).find("has vocab.json but no merges.txt"), std::string::npos);

  TempDir empty;
  EXPECT_NE(load_error(empty.path.string()).find("no tokenizer.json"), std::string::npos);
  EXPECT_NE(load_error(dir.file("missing.json")).find("no such tokenizer file"), std::string::npos);
  test::write(dir.file("model.tinygpt"), "x");
  // A checkpoint is read for the tokenizer it records; a broken one is named in the message.
  EXPECT_NE(load_error(dir.file("model.tinygpt")).find(dir.file("model.tinygpt")), std::string::npos);
}

TEST(BpeTrainer, DeterministicAndExactSize) {
  const std::string text = test::synthetic_text(50000) + "<|endoftext|>" + test::synthetic_text(20000, 9);
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  BpeTrainStats st;
  const Tokenizer a = train_bpe(text, opt, &st);
  const Tokenizer b = train_bpe(text, opt);
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(a.vocab_size(), 300);
  EXPECT_EQ(st.vocab_size, 300);
  EXPECT_EQ(a.special_id(kEndOfText), 299);
  // The most frequent pair of the text is merged first: in this text "e" + " " ("the ", "queen ").
  EXPECT_GT(st.merges, 0);
  // The special token is cut out, never learnt, and encodes as itself.
  for (int32_t id = 256; id < 299; ++id) EXPECT_EQ(a.token_bytes(id).find("<|"), std::string::npos);
  const std::vector<int32_t> ids = a.encode(text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 299), 1);
  EXPECT_EQ(a.decode(ids), text);
  // More merges, fewer tokens.
  opt.vocab_size = 257;
  const Tokenizer none = train_bpe(text, opt);
  EXPECT_EQ(none.merge_count(), 0u);
  EXPECT_EQ(none.encode(text).size(), text.size() - std::string("<|endoftext|>").size() + 1);
  EXPECT_LT(ids.size(), text.size() / 2);
}

TEST(BpeTrainer, TiesGoToTheSmallerPair) {
  // "ab" and "cd" occur equally often: (a,b) < (c,d) by id, so "ab" is id 256.
  BpeTrainOptions opt;
  opt.vocab_size = 258;
  const Tokenizer t = train_bpe("cd\nab\ncd\nab", opt);
  EXPECT_EQ(t.token_bytes(256), "ab");
  EXPECT_EQ(t.merge(0).left, 'a');
}

TEST(BpeTrainer, StopsWhenPairsRunOut) {
  BpeTrainOptions opt;
  opt.vocab_size = 5000;
  BpeTrainStats st;
  const Tokenizer t = train_bpe("abcabc", opt, &st);
  // Only one piece, "abcabc": 3 merges (ab, abc, abcabc) join it into one token.
  EXPECT_EQ(t.encode("abcabc").size(), 1u);
  EXPECT_LT(st.vocab_size, 5000);
  EXPECT_EQ(t.vocab_size(), st.vocab_size);
  opt.vocab_size = 256;
  EXPECT_THROW(train_bpe("x", opt), Error);
  opt.vocab_size = 65537;
  EXPECT_THROW(train_bpe("x", opt), Error);
}

TEST(TokenizerCli, TrainEncodeDecodeInfo) {
  TempDir dir;
  test::write(dir.file("text.txt"), test::synthetic_text(30000) + "déjà \xff");
  test::CliRun r = test::ptl_cli("tokenizer train --data text.txt --vocab-size 300 --out tok.json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("300-token vocabulary"), std::string::npos) << r.err;
  r = test::ptl_cli("tokenizer info tok.json --json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["vocab_size"], 300);
  EXPECT_EQ(info["type"], "bpe");
  r = test::ptl_cli("tokenizer encode --tokenizer tok.json --data text.txt --json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto enc = nlohmann::json::parse(r.out);
  EXPECT_EQ(enc["bytes"], 30000 + 8);
  EXPECT_EQ(enc["tokens"], enc["ids"].size());
  r = test::ptl_cli("tokenizer encode --tokenizer tok.json --data text.txt > ids.txt && " + test::ptl_command() +
                        " tokenizer decode --tokenizer tok.json < ids.txt > back.txt && cmp back.txt text.txt",
                    dir);
  EXPECT_EQ(r.code, 0) << r.err;
  test::expect_error(test::ptl_cli("tokenizer decode --tokenizer tok.json --ids nope.txt", dir), "no such file");
  test::write(dir.file("bad_ids.txt"), "1 2 x3");
  test::expect_error(test::ptl_cli("tokenizer decode --tokenizer tok.json --ids bad_ids.txt", dir),
                     "bad_ids.txt: 'x3' is not a token id");
  test::write(dir.file("big_ids.txt"), "1 300");
  test::expect_error(test::ptl_cli("tokenizer decode --tokenizer tok.json --ids big_ids.txt", dir),
                     "token id 300 is not in the vocabulary (size 300)");
  test::write(dir.file("broken.json"), "{");
  test::expect_error(test::ptl_cli("tokenizer info broken.json", dir), "broken.json: not valid JSON");
}

}  // namespace
}  // namespace ptl
