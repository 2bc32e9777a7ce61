// The safetensors container: bitwise round trips, the exact byte layout, every kind of corrupt
// file (each must throw ptl::Error with a readable message, never crash), atomic writes, and
// compatibility with an independent reader/writer in Python (struct + json only).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using ptl::DType;
using ptl::SafeTensors;
using ptl::test::TempDir;

namespace {

// Runs fn, expects a ptl::Error whose message contains `phrase`, and returns the message.
std::string expect_error(const std::function<void()>& fn, const std::string& phrase) {
  try {
    fn();
  } catch (const ptl::Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos)
        << "message \"" << e.what() << "\" lacks \"" << phrase << "\"";
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ptl::Error containing \"" << phrase << "\", got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ptl::Error containing \"" << phrase << "\", nothing was thrown";
  return "";
}

std::vector<uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A file with the given header text (padded to 8 unless told otherwise) and data area.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data = {}, bool pad = true) {
  std::string h = header;
  if (pad) h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t n = h.size();
  std::vector<uint8_t> out(8 + h.size() + data.size());
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, h.data(), h.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + h.size(), data.data(), data.size());
  return out;
}

SafeTensors decode(const std::vector<uint8_t>& bytes, const std::string& what = "x.tinygpt") {
  return ptl::decode_safetensors(bytes.data(), bytes.size(), what);
}

uint64_t header_len(const std::vector<uint8_t>& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  return n;
}

SafeTensors sample() {
  SafeTensors st;
  st.metadata["format"] = "tinygpt";
  st.metadata["model_config"] = R"({"vocab_size":256,"n_layers":3})";
  st.metadata["note"] = "quotes \" backslash \\ newline \n unicode \xc3\xa9";
  std::vector<float> w(6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.25f;
  w[5] = -0.0f;
  st.add("blocks.0.attn.q_proj.weight", DType::f32, {2, 3}, w.data());
  std::vector<int32_t> ids = {0, -1, 2147483647, -2147483647 - 1};
  st.add("tokens", DType::i32, {4}, ids.data());
  float scalar = 3.5f;
  st.add("scalar", DType::f32, {}, &scalar);
  st.add("empty", DType::f32, {0}, nullptr);
  st.add("empty2d", DType::i32, {3, 0}, nullptr);
  float nan_bits;
  uint32_t payload = 0x7fc00123u;  // a NaN with a payload must survive bit-for-bit
  std::memcpy(&nan_bits, &payload, 4);
  st.add("caf\xc3\xa9.bias", DType::f32, {1}, &nan_bits);
  return st;
}

}  // namespace

TEST(SafeTensors, RoundTripIsBitwise) {
  const SafeTensors st = sample();
  const auto bytes = ptl::encode_safetensors(st);
  const SafeTensors back = decode(bytes);
  EXPECT_EQ(back.metadata, st.metadata);
  ASSERT_EQ(back.tensors.size(), st.tensors.size());
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    const auto& a = st.tensors[i];
    const auto& b = back.tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dtype, b.dtype) << a.name;
    EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(a.data, b.data) << a.name;
  }
  EXPECT_EQ(ptl::encode_safetensors(back), bytes);

  const auto* scalar = back.find("scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->numel(), 1);
  EXPECT_EQ(scalar->f32()[0], 3.5f);
  const auto* empty = back.find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->numel(), 0);
  EXPECT_TRUE(empty->data.empty());
  EXPECT_EQ(back.find("empty2d")->shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(back.find("missing"), nullptr);
}

TEST(SafeTensors, EmptyContainerRoundTrips) {
  SafeTensors st;
  const auto bytes = ptl::encode_safetensors(st);
  EXPECT_EQ(bytes, make_file("{}"));  // no "__metadata__" when there is none
  const SafeTensors back = decode(bytes);
  EXPECT_TRUE(back.tensors.empty());
  EXPECT_TRUE(back.metadata.empty());
}

TEST(SafeTensors, ExactByteLayout) {
  SafeTensors st;
  st.metadata["k"] = "v";
  float a[2] = {1.0f, -2.0f};
  int32_t b[1] = {7};
  st.add("a", DType::f32, {2}, a);
  st.add("b", DType::i32, {1, 1}, b);
  const auto bytes = ptl::encode_safetensors(st);
  const std::string header = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"I32","shape":[1,1],"data_offsets":[8,12]}})";
  std::vector<uint8_t> data = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x07, 0x00, 0x00, 0x00};
  EXPECT_EQ(bytes, make_file(header, data));
}

TEST(SafeTensors, HeaderIsPaddedToEightBytes) {
  for (int len = 0; len < 24; ++len) {
    SafeTensors st;
    st.metadata["m"] = std::string(len, 'x');
    float v = 1.0f;
    st.add("w", DType::f32, {1}, &v);
    const auto bytes = ptl::encode_safetensors(st);
    const uint64_t n = header_len(bytes);
    EXPECT_EQ((8 + n) % 8, 0u) << len;
    EXPECT_EQ(bytes.size(), 8 + n + 4);
    // The padding is spaces after the closing brace, never more than 7.
    std::string h(bytes.begin() + 8, bytes.begin() + 8 + static_cast<ptrdiff_t>(n));
    size_t close = h.find_last_of('}');
    EXPECT_LT(h.size() - close - 1, 8u);
    EXPECT_EQ(h.find_first_not_of(' ', close + 1), std::string::npos);
  }
}

TEST(SafeTensors, AddCopiesAndValidates) {
  SafeTensors st;
  std::vector<float> v = {1, 2, 3};
  st.add("v", DType::f32, {3}, v.data());
  v[0] = 99;
  EXPECT_EQ(st.find("v")->f32()[0], 1.0f);
  expect_error([&] { st.add("v", DType::f32, {3}, v.data()); }, "duplicate tensor name 'v'");
  expect_error([&] { st.add("__metadata__", DType::f32, {3}, v.data()); }, "reserved");
  expect_error([&] { st.add("neg", DType::f32, {-1}, v.data()); }, "invalid shape");
}

TEST(SafeTensors, EncodeRejectsInconsistentTensors) {
  SafeTensors st;
  ptl::StoredTensor t;
  t.name = "w";
  t.shape = {2, 2};
  t.data.resize(12);
  st.tensors.push_back(t);
  expect_error([&] { ptl::encode_safetensors(st); }, "holds 12 bytes");
  st.tensors[0].data.resize(16);
  st.tensors.push_back(st.tensors[0]);
  expect_error([&] { ptl::encode_safetensors(st); }, "duplicate tensor name 'w'");
}

TEST(SafeTensors, CorruptHeaders) {
  const std::vector<uint8_t> d120(120, 0);
  const std::string ok_x = R"("x":{"dtype":"F32","shape":[5,6],"data_offsets":[0,120]})";

  // Sanity: the baseline decodes.
  EXPECT_EQ(decode(make_file("{" + ok_x + "}", d120)).tensors.size(), 1u);

  // Messages name the source.
  std::string msg = expect_error([] { decode({}, "model.tinygpt"); }, "empty file");
  EXPECT_EQ(msg.rfind("model.tinygpt: ", 0), 0u) << msg;

  expect_error([] { decode(as_bytes("abcde")); }, "too short");
  {
    std::vector<uint8_t> f(120, 0);
    uint64_t n = 4000;
    std::memcpy(f.data(), &n, 8);
    expect_error([&] { decode(f, "model.tinygpt"); },
                 "model.tinygpt: truncated file (header says 4000 bytes of header, file has 120)");
  }
  {
    // A text file: its first 8 bytes read as a huge length.
    std::vector<uint8_t> f = as_bytes("Once upon a time, there was a tiny model.");
    expect_error([&] { decode(f); }, "not a safetensors file (header length");
    expect_error([&] { decode(f); }, "larger than the file");
  }
  expect_error([] { decode(make_file("{\"x\": ")); }, "header is not valid JSON");
  expect_error([] { decode(make_file("")); }, "header is not valid JSON");
  expect_error([] { decode(make_file("{} trailing")); }, "header is not valid JSON");
  expect_error([] { decode(make_file("{\"a\xff\":1}")); }, "header is not valid JSON");  // invalid UTF-8
  expect_error([] { decode(make_file("[1,2,3]")); }, "header is not a JSON object");
  expect_error([] { decode(make_file("\"str\"")); }, "header is not a JSON object");
  expect_error([] { decode(make_file(R"({"__metadata__":[1]})")); }, "__metadata__ is not a JSON object");
  expect_error([] { decode(make_file(R"({"__metadata__":{"a":"b","step":3}})")); },
               "__metadata__ value for key 'step' is not a string");
  expect_error([] { decode(make_file(R"({"__metadata__":{"a":null}})")); }, "is not a string");
  expect_error([] { decode(make_file(R"({"x":[1]})")); }, "tensor 'x' entry is not a JSON object");
  expect_error(
      [&] {
        decode(make_file(R"({"blocks.0.ln1.weight":{"dtype":"F64","shape":[15],"data_offsets":[0,120]}})", d120));
      },
      "tensor 'blocks.0.ln1.weight' has dtype F64; only F32, F16, BF16 and I32 are supported");
  expect_error([&] { decode(make_file(R"({"x":{"shape":[30],"data_offsets":[0,120]}})", d120)); }, "no dtype");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","data_offsets":[0,120]}})", d120)); }, "no shape");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[-5,-6],"data_offsets":[0,120]}})", d120)); },
               "non-negative integers");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[30.0],"data_offsets":[0,120]}})", d120)); },
               "non-negative integers");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[30]}})", d120)); }, "no data_offsets");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[30],"data_offsets":[0]}})", d120)); },
               "no data_offsets");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[30],"data_offsets":[120,0]}})", d120)); },
               "end before they begin");
  expect_error(
      [&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[30],"data_offsets":[0,120],"extra":1}})", d120)); },
      "tensor 'x' has unknown field 'extra'");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[5,6],"data_offsets":[0,100]}})", d120)); },
               "tensor 'x' data_offsets [0, 100] do not match dtype F32 x shape [5,6] (120 bytes)");
  expect_error(
      [&] {
        decode(make_file(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,120]}})", d120));
      },
      "do not match");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[5,6],"data_offsets":[8,128]}})", d120)); },
               "tensor 'x' offsets lie outside the data area");
  expect_error(
      [&] {
        decode(make_file(R"({"a":{"dtype":"F32","shape":[20],"data_offsets":[0,80]},)"
                         R"("b":{"dtype":"F32","shape":[20],"data_offsets":[40,120]}})",
                         d120));
      },
      "overlap");
  expect_error(
      [&] {
        decode(make_file(R"({"a":{"dtype":"F32","shape":[20],"data_offsets":[0,80]},)"
                         R"("z":{"dtype":"F32","shape":[0],"data_offsets":[40,40]},)"
                         R"("b":{"dtype":"F32","shape":[10],"data_offsets":[80,120]}})",
                         d120));
      },
      "overlap");
  expect_error(
      [&] {
        decode(make_file(R"({"a":{"dtype":"F32","shape":[10],"data_offsets":[0,40]},)"
                         R"("b":{"dtype":"F32","shape":[10],"data_offsets":[80,120]}})",
                         d120));
      },
      "gap in the data area before tensor 'b'");
  expect_error([&] { decode(make_file(R"({"x":{"dtype":"F32","shape":[20],"data_offsets":[0,80]}})", d120)); },
               "40 trailing bytes");
  expect_error([&] { decode(make_file("{" + ok_x + "," + ok_x + "}", d120)); }, "header names 'x' twice");
  expect_error([] { decode(make_file(std::string(1000, '[') + std::string(1000, ']'))); }, "nested too deeply");
}

TEST(SafeTensors, AcceptsForeignButValidLayouts) {
  // Unpadded header, whitespace, keys in another order than the data: still valid safetensors.
  std::vector<uint8_t> data(12, 0);
  data[0] = 1;
  data[8] = 2;
  const auto f = make_file(
      R"( { "b" : {"data_offsets":[8,12],"shape":[1],"dtype":"I32"}, "a": {"shape":[2],"dtype":"F32","data_offsets":[0,8]},
           "__metadata__": {} } )",
      data, /*pad=*/false);
  const SafeTensors st = decode(f);
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.tensors[0].name, "a");  // file (offset) order
  EXPECT_EQ(st.tensors[1].name, "b");
  EXPECT_EQ(st.tensors[1].dtype, DType::i32);
  EXPECT_EQ(st.tensors[1].data[0], 2);
}

TEST(SafeTensors, EveryTruncationThrows) {
  const auto bytes = ptl::encode_safetensors(sample());
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_THROW(decode(cut), ptl::Error) << "prefix of " << len << " bytes";
  }
  EXPECT_NO_THROW(decode(bytes));
  // Extra bytes at the end are rejected too.
  auto longer = bytes;
  longer.push_back(0);
  expect_error([&] { decode(longer); }, "trailing bytes");
}

TEST(SafeTensors, RandomHeaderCorruptionNeverCrashes) {
  const auto bytes = ptl::encode_safetensors(sample());
  const size_t header_end = 8 + static_cast<size_t>(header_len(bytes));
  std::mt19937 rng(1234);
  int decoded = 0, rejected = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    auto f = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < flips; ++i) {
      const size_t at = rng() % header_end;
      if (rng() % 2)
        f[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      else
        f[at] = static_cast<uint8_t>(rng());
    }
    try {
      const SafeTensors st = decode(f);
      ++decoded;
      // Whatever decodes is self-consistent and re-encodes.
      for (const auto& t : st.tensors) EXPECT_EQ(t.data.size(), static_cast<size_t>(t.numel()) * 4);
      EXPECT_NO_THROW(ptl::encode_safetensors(st));
    } catch (const ptl::Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(decoded, 0);  // e.g. flips inside metadata strings
}

TEST(SafeTensors, WriteFileAtomic) {
  TempDir dir;
  const std::string path = (dir.path / "model.tinygpt").string();
  const auto first = ptl::encode_safetensors(sample());
  ptl::write_file_atomic(path, first);
  EXPECT_EQ(ptl::read_file_bytes(path), first);
  EXPECT_EQ(dir.listing(), std::set<std::string>{"model.tinygpt"});

  const std::vector<uint8_t> second = {1, 2, 3};  // shorter: the old content must be gone entirely
  ptl::write_file_atomic(path, second);
  EXPECT_EQ(ptl::read_file_bytes(path), second);
  EXPECT_EQ(dir.listing(), std::set<std::string>{"model.tinygpt"});

  ptl::write_file_atomic(path, {});
  EXPECT_TRUE(ptl::read_file_bytes(path).empty());
}

TEST(SafeTensors, WriteRemovesTemporariesOfKilledWriters) {
  TempDir dir;
  const std::string path = (dir.path / "model.tinygpt").string();
  // A process that has exited: its pid names a writer killed mid-save.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  const std::string stale = "model.tinygpt.tmp-" + std::to_string(gone);
  // A live writer's temporary (this process's parent stands in for it) and other files stay.
  const std::string live = "model.tinygpt.tmp-" + std::to_string(::getppid());
  for (const std::string& name : {stale, live, std::string("metrics.jsonl.tmp-") + std::to_string(gone)})
    std::ofstream(dir.path / name) << "partial";
  ptl::write_file_atomic(path, {1, 2, 3});
  EXPECT_EQ(dir.listing(), (std::set<std::string>{"model.tinygpt", live, "metrics.jsonl.tmp-" + std::to_string(gone)}));
}

TEST(SafeTensors, FailedWriteLeavesNothing) {
  TempDir dir;
  const std::string missing = (dir.path / "no_such_dir" / "model.tinygpt").string();
  std::string msg = expect_error([&] { ptl::write_file_atomic(missing, {1, 2, 3}); }, "cannot write " + missing);
  EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;
  EXPECT_TRUE(dir.listing().empty());

  // The rename fails (target is a non-empty directory): the temp file must be cleaned up.
  fs::create_directories(dir.path / "taken" / "inner");
  const std::string taken = (dir.path / "taken").string();
  expect_error([&] { ptl::write_file_atomic(taken, {1, 2, 3}); }, "cannot write " + taken);
  EXPECT_EQ(dir.listing(), std::set<std::string>{"taken"});
}

TEST(SafeTensors, ReadFileErrors) {
  TempDir dir;
  const std::string missing = (dir.path / "nope.tinygpt").string();
  expect_error([&] { ptl::read_file_bytes(missing); }, "no such file: " + missing);
  expect_error([&] { ptl::read_file_bytes(dir.path.string()); }, "is a directory");
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = (dir.path / "locked").string();
    ptl::write_file_atomic(locked, {1});
    fs::permissions(locked, fs::perms::none);
    expect_error([&] { ptl::read_file_bytes(locked); }, "cannot read " + locked);
  }
}

// An independent reader and writer in Python using only struct + json, as documented in
// docs/checkpoint-format.md.
TEST(SafeTensors, PythonStructJsonCompatibility) {
  const char* python = "/usr/bin/python3";
  if (!fs::exists(python)) GTEST_SKIP() << "no " << python;
  TempDir dir;
  const std::string ours = (dir.path / "ours.tinygpt").string();
  const std::string theirs = (dir.path / "theirs.safetensors").string();
  const std::string script = (dir.path / "check.py").string();
  ptl::write_file_atomic(ours, ptl::encode_safetensors(sample()));
  std::ofstream(script) << R"PY(
import json, math, struct, sys
ours, theirs = sys.argv[1], sys.argv[2]
raw = open(ours, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
assert (8 + n) % 8 == 0, n
header = json.loads(raw[8:8 + n].decode("utf-8"))
data = raw[8 + n:]
meta = header.pop("__metadata__")
assert meta["format"] == "tinygpt", meta
assert json.loads(meta["model_config"]) == {"vocab_size": 256, "n_layers": 3}
assert meta["note"] == 'quotes " backslash \\ newline \n unicode \u00e9', repr(meta["note"])
assert list(header) == ["blocks.0.attn.q_proj.weight", "tokens", "scalar", "empty", "empty2d", "caf\u00e9.bias"], list(header)
end = 0
def values(name):
    global end
    info = header[name]
    b, e = info["data_offsets"]
    assert b == end; end = e
    fmt = {"F32": "f", "I32": "i"}[info["dtype"]]
    count = math.prod(info["shape"])
    assert e - b == 4 * count
    return list(struct.unpack("<%d%s" % (count, fmt), data[b:e]))
w = values("blocks.0.attn.q_proj.weight")
assert header["blocks.0.attn.q_proj.weight"]["shape"] == [2, 3]
assert all(abs(w[i] - (0.1 * i - 0.25)) < 1e-6 for i in range(5)), w
assert w[5] == 0.0 and math.copysign(1, w[5]) < 0
assert values("tokens") == [0, -1, 2147483647, -2147483648]
assert values("scalar") == [3.5] and header["scalar"]["shape"] == []
assert values("empty") == [] and values("empty2d") == []
assert header["empty2d"]["shape"] == [3, 0]
assert len(values("caf\u00e9.bias")) == 1 and struct.unpack("<I", data[end - 4:end])[0] == 0x7fc00123
assert end == len(data)

# Write one the way another implementation might: sorted keys, unpadded header.
tensors = {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "i": ("I32", [3], struct.pack("<3i", -1, 0, 1))}
hdr, blob = {"__metadata__": {"from": "python"}}, b""
for name, (dt, shape, b) in tensors.items():
    hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(b)]}
    blob += b
h = json.dumps(hdr, sort_keys=True).encode("utf-8")
open(theirs, "wb").write(struct.pack("<Q", len(h)) + h + blob)
print("PYTHON_OK")
)PY";
  const std::string cmd = std::string(python) + " " + script + " " + ours + " " + theirs;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  const auto bytes = ptl::read_file_bytes(theirs);
  const SafeTensors st = decode(bytes, theirs);
  EXPECT_EQ(st.metadata.at("from"), "python");
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.tensors[0].name, "w");
  EXPECT_EQ(st.tensors[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(st.tensors[0].f32()[3], 4.0f);
  const auto* i = st.find("i");
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(i->dtype, DType::i32);
  int32_t v[3];
  std::memcpy(v, i->data.data(), 12);
  EXPECT_EQ(v[0], -1);
  EXPECT_EQ(v[2], 1);
}
