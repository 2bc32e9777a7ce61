#include "engine/safetensors.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include "engine/error.h"
#include "engine/half.h"

namespace ptl {

// The format is little-endian (the header length and every tensor element). We copy tensor bytes
// and the length prefix straight between memory and the file, which is only correct on a
// little-endian machine; every target we build for (x86-64, arm64, wasm32) is one.
static_assert(std::endian::native == std::endian::little,
              "safetensors.cpp copies little-endian file bytes verbatim; big-endian hosts need byte swaps");

namespace {

// Rejects garbage quickly: a real header is a few KB per thousand tensors.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

// Local names so this file does not depend on program.cpp.
const char* dtype_name(DType d, Encoding e = Encoding::as_dtype) {
  if (e == Encoding::f16) return "F16";
  if (e == Encoding::bf16) return "BF16";
  switch (d) {
    case DType::f32:
      return "F32";
    case DType::i32:
      return "I32";
  }
  return "?";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Bytes of numel elements of `size` bytes; false for a negative dimension or a size above `limit`.
bool element_bytes(const std::vector<int64_t>& shape, uint64_t limit, uint64_t* out, uint64_t size = 4) {
  for (int64_t d : shape)
    if (d < 0) return false;
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) {
    *out = 0;
    return true;
  }
  uint64_t n = size;
  for (int64_t d : shape) {
    const uint64_t u = static_cast<uint64_t>(d);
    if (n > limit / u) return false;
    n *= u;
  }
  *out = n;
  return true;
}

// A JSON number as a non-negative integer, or nothing.
bool as_index(const nlohmann::ordered_json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

std::string quote(const std::string& name) { return "'" + name + "'"; }

}  // namespace

int64_t StoredTensor::numel() const {
  // A zero dimension first: [2^62, 2^62, 0] is a valid empty tensor whose other dimensions
  // multiply past int64. Without one, decoding bounded the product by the file's size.
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const StoredTensor* SafeTensors::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

void SafeTensors::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data) {
  check(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
  check(find(name) == nullptr, "safetensors: duplicate tensor name " + quote(name));
  uint64_t bytes = 0;
  check(element_bytes(shape, std::numeric_limits<size_t>::max(), &bytes),
        "safetensors: tensor " + quote(name) + " has invalid shape " + shape_string(shape));
  check(bytes == 0 || data != nullptr, "safetensors: tensor " + quote(name) + " has no data");
  StoredTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.resize(static_cast<size_t>(bytes));
  if (bytes) std::memcpy(t.data.data(), data, static_cast<size_t>(bytes));
  tensors.push_back(std::move(t));
}

std::vector<uint8_t> encode_safetensors(const SafeTensors& st) {
  // ordered_json keeps "__metadata__" first and the tensors in the order of st.tensors, which is
  // also the order of their bytes in the data area.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!st.metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : st.metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& t : st.tensors) {
    check(t.name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    check(seen.insert(t.name).second, "safetensors: duplicate tensor name " + quote(t.name));
    uint64_t bytes = 0;
    check(element_bytes(t.shape, std::numeric_limits<uint64_t>::max(), &bytes),
          "safetensors: tensor " + quote(t.name) + " has invalid shape " + shape_string(t.shape));
    check(bytes == t.data.size(), "safetensors: tensor " + quote(t.name) + " holds " + std::to_string(t.data.size()) +
                                      " bytes but dtype " + dtype_name(t.dtype) + " x shape " + shape_string(t.shape) +
                                      " needs " + std::to_string(bytes));
    const bool half = t.encoding != Encoding::as_dtype;
    check(!half || t.dtype == DType::f32, "safetensors: tensor " + quote(t.name) + " is " + dtype_name(t.dtype) +
                                              " and cannot be stored as " + dtype_name(t.dtype, t.encoding) +
                                              " (only F32 tensors can)");
    const uint64_t file_bytes = half ? bytes / 2 : bytes;
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = dtype_name(t.dtype, t.encoding);
    info["shape"] = t.shape;
    info["data_offsets"] = {offset, offset + file_bytes};
    header[t.name] = std::move(info);
    offset += file_bytes;
  }
  std::string text;
  try {
    text = header.dump();  // compact; throws on names or metadata that are not valid UTF-8
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("safetensors: a tensor name or metadata string is not valid UTF-8 (") + e.what() + ")");
  }
  // Pad with spaces so the data area starts 8-byte aligned (8 + header length is a multiple of 8),
  // as the reference implementation does. JSON parsers ignore trailing whitespace.
  text.append((8 - text.size() % 8) % 8, ' ');

  // Sized once and filled by memcpy (every tensor's size was checked against offset above).
  // (Appending with insert() after reserve() made GCC 12 at -O3 warn of a memmove overflow that
  // cannot happen.)
  std::vector<uint8_t> out(8 + text.size() + static_cast<size_t>(offset));
  uint8_t* o = out.data();
  const uint64_t n = text.size();
  std::memcpy(o, &n, 8);  // little-endian (see static_assert above)
  std::memcpy(o + 8, text.data(), text.size());
  o += 8 + text.size();
  for (const auto& t : st.tensors) {
    if (t.encoding == Encoding::as_dtype) {
      if (!t.data.empty()) std::memcpy(o, t.data.data(), t.data.size());
      o += t.data.size();
      continue;
    }
    const float* x = t.f32();
    const size_t n = t.data.size() / 4;
    for (size_t i = 0; i < n; ++i, o += 2) {
      const uint16_t h = t.encoding == Encoding::f16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(o, &h, 2);  // little-endian
    }
  }
  return out;
}

SafeTensors decode_safetensors(const uint8_t* bytes, size_t size, const std::string& what,
                               const std::function<bool(const std::string&)>& skip) {
  const std::string src = what + ": ";
  check(size != 0, src + "empty file");
  check(size >= 8,
        src + "not a safetensors file (" + std::to_string(size) + " bytes, too short for the 8-byte header length)");
  uint64_t n = 0;
  std::memcpy(&n, bytes, 8);  // little-endian (see static_assert above)
  const uint64_t rest = size - 8;
  if (n > kMaxHeaderBytes) {
    if (n > rest) fail(src + "not a safetensors file (header length " + std::to_string(n) + " larger than the file)");
    fail(src + "not a safetensors file (header length " + std::to_string(n) + " exceeds the 100 MB limit)");
  }
  check(n <= rest, src + "truncated file (header says " + std::to_string(n) + " bytes of header, file has " +
                       std::to_string(size) + ")");

  const char* text = reinterpret_cast<const char*>(bytes + 8);
  const uint8_t* data = bytes + 8 + n;
  const uint64_t data_size = rest - n;

  // Track top-level keys while parsing: nlohmann keeps only the last of duplicate keys, and a
  // file whose meaning depends on which duplicate a reader keeps must be rejected. A real header
  // nests 3 deep; refusing deep nesting keeps a hostile "[[[[..." header from eating memory.
  // ordered_json keeps the header's key order, which breaks ties between empty tensors below.
  using Json = nlohmann::ordered_json;
  std::string duplicate;
  std::set<std::string> keys;
  auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > 16) fail(src + "header JSON is nested too deeply for a safetensors header");
    if (event == Json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, text + n, on_event);
  } catch (const Json::exception& e) {
    // nlohmann's messages start with their own tag ("[json.exception.parse_error.101] "): drop it.
    std::string why = e.what();
    if (why.starts_with("[json.exception.")) why.erase(0, why.find("] ") == std::string::npos ? 0 : why.find("] ") + 2);
    fail(src + "header is not valid JSON (" + why + ")");
  }
  check(header.is_object(), src + "header is not a JSON object");
  check(duplicate.empty(), src + "header names " + quote(duplicate) + " twice");

  SafeTensors st;
  struct Span {
    uint64_t begin, end;
    size_t index;
    bool skipped;
  };
  std::vector<Span> spans;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      check(info.is_object(), src + "__metadata__ is not a JSON object");
      for (const auto& [k, v] : info.items()) {
        check(v.is_string(), src + "__metadata__ value for key " + quote(k) + " is not a string");
        st.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string tname = "tensor " + quote(name);
    check(info.is_object(), src + tname + " entry is not a JSON object");
    for (const auto& [field, unused] : info.items()) {
      (void)unused;
      check(field == "dtype" || field == "shape" || field == "data_offsets",
            src + tname + " has unknown field " + quote(field));
    }
    check(info.contains("dtype") && info.at("dtype").is_string(), src + tname + " has no dtype string");
    const std::string dtype = info.at("dtype").get<std::string>();
    StoredTensor t;
    t.name = name;
    const bool skipped = skip && skip(name);
    uint64_t element_size = 4;
    if (skipped) {
      // Any dtype of the format: only its size matters here.
      static const std::pair<const char*, uint64_t> kSizes[] = {
          {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
          {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
      element_size = 0;
      for (const auto& [known, bytes_each] : kSizes)
        if (dtype == known) element_size = bytes_each;
      check(element_size != 0, src + tname + " has dtype " + dtype + ", which safetensors does not define");
    } else {
      if (dtype == "F32" || dtype == "F16" || dtype == "BF16")
        t.dtype = DType::f32;
      else if (dtype == "I32")
        t.dtype = DType::i32;
      else
        fail(src + tname + " has dtype " + dtype + "; only F32, F16, BF16 and I32 are supported");
      if (dtype == "F16") t.encoding = Encoding::f16;
      if (dtype == "BF16") t.encoding = Encoding::bf16;
      element_size = t.encoding == Encoding::as_dtype ? 4 : 2;
    }

    check(info.contains("shape") && info.at("shape").is_array(), src + tname + " has no shape array");
    for (const auto& d : info.at("shape")) {
      uint64_t v = 0;
      check(as_index(d, &v) && v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
            src + tname + " shape " + info.at("shape").dump() + " is not a list of non-negative integers");
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const Json offs = info.contains("data_offsets") ? info.at("data_offsets") : Json();
    uint64_t begin = 0, end = 0;
    check(offs.is_array() && offs.size() == 2 && as_index(offs[0], &begin) && as_index(offs[1], &end),
          src + tname + " has no data_offsets [begin, end] of non-negative integers");
    const std::string offs_str = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
    check(begin <= end, src + tname + " data_offsets " + offs_str + " end before they begin");

    uint64_t expect = 0;
    const bool fits = element_bytes(t.shape, std::numeric_limits<uint64_t>::max(), &expect, element_size);
    check(fits && end - begin == expect, src + tname + " data_offsets " + offs_str + " do not match dtype " + dtype +
                                             " x shape " + shape_string(t.shape) + " (" +
                                             (fits ? std::to_string(expect) : std::string("too many")) + " bytes)");
    check(end <= data_size, src + tname + " offsets lie outside the data area (data_offsets " + offs_str +
                                ", data area has " + std::to_string(data_size) +
                                " bytes): the file is shorter than its header says (truncated?)");
    spans.push_back({begin, end, st.tensors.size(), skipped});
    st.tensors.push_back(std::move(t));
  }

  // The tensors must tile the data area exactly, as the reference implementation requires: no
  // overlap, no gaps, no trailing bytes.
  std::stable_sort(spans.begin(), spans.end(),
                   [](const Span& a, const Span& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t pos = 0;
  const StoredTensor* prev = nullptr;
  for (const auto& s : spans) {
    const StoredTensor& t = st.tensors[s.index];
    if (s.begin < pos)
      fail(src + "tensors " + quote(prev->name) + " and " + quote(t.name) + " overlap in the data area");
    check(s.begin == pos, src + "gap in the data area before tensor " + quote(t.name) + " (bytes " +
                              std::to_string(pos) + " to " + std::to_string(s.begin) + " belong to no tensor)");
    pos = s.end;
    if (s.end > s.begin) prev = &t;
  }
  check(pos == data_size,
        src + "data area has " + std::to_string(data_size - pos) + " trailing bytes that belong to no tensor");

  // Copy the bytes (F16 and BF16 widened to F32), and keep the tensors in file order (data_offsets)
  // rather than JSON key order.
  std::vector<StoredTensor> ordered;
  ordered.reserve(spans.size());
  for (const auto& s : spans) {
    if (s.skipped) continue;
    StoredTensor& t = st.tensors[s.index];
    if (t.encoding == Encoding::as_dtype) {
      t.data.assign(data + s.begin, data + s.end);
    } else {
      const size_t n = static_cast<size_t>((s.end - s.begin) / 2);
      t.data.resize(n * 4);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + s.begin + 2 * i, 2);  // little-endian
        const float x = t.encoding == Encoding::f16 ? f16_to_f32(h) : bf16_to_f32(h);
        std::memcpy(t.data.data() + 4 * i, &x, 4);
      }
    }
    ordered.push_back(std::move(t));
  }
  st.tensors = std::move(ordered);
  return st;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) fail("no such file: " + path);
  if (status.type() == std::filesystem::file_type::directory) fail(path + " is a directory, not a file");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot read " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> out;
  struct stat sb {};
  if (::fstat(::fileno(f), &sb) == 0 && sb.st_size > 0) out.reserve(static_cast<size_t>(sb.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    size_t got = std::fread(buf, 1, sizeof buf, f);
    out.insert(out.end(), buf, buf + got);
    if (got < sizeof buf) break;
  }
  const bool bad = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (bad) fail("cannot read " + path + ": " + std::strerror(err));
  return out;
}

// Without this, every kill during a save would leave a checkpoint-sized file behind.
void remove_stale_temporaries(const std::string& path) {
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp-";
  std::error_code ec;
  fs::directory_iterator it(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec);
  if (ec) return;
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix) || name.size() == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = pid_t(std::stol(digits));
    if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
#else
  (void)path;
#endif
}

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  // The rename below replaces whatever `path` names: a device such as /dev/full would become a
  // regular file (as root, for every program on the machine). Only regular files are replaced.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st))
    check(std::filesystem::is_regular_file(st),
          "cannot write " + path + ": it exists and is not a regular file" +
              std::string(std::filesystem::is_directory(st) ? " (a folder)" : ""));
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot write " + path + ": " + std::strerror(errno));
  auto give_up = [&](int err) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    fail("cannot write " + path + ": " + std::strerror(err));
  };
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) give_up(errno);
  if (std::fflush(f) != 0) give_up(errno);
  if (::fsync(::fileno(f)) != 0) give_up(errno);
  const int closed = std::fclose(f);
  f = nullptr;
  if (closed != 0) give_up(errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) give_up(errno);
#if defined(__linux__) || defined(__APPLE__)
  // Best effort: make the rename itself durable. Failure here loses nothing already written.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
#endif
}

void write_folder_atomic(const std::string& dir_arg,
                         const std::vector<std::pair<std::string, std::vector<uint8_t>>>& files,
                         const std::vector<std::string>& ours, const std::string& writer) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(dir_arg).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "out/" -> "out"
  const std::string where = "cannot write " + dir_arg;
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  const bool exists = fs::exists(st);
  if (exists) {
    check(fs::is_directory(st), where + ": it exists and is not a folder");
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      const bool known = std::find(ours.begin(), ours.end(), name) != ours.end();
      check(known && e.is_regular_file(ec),
            where + ": it holds " + name + ", which " + writer + " does not write (choose a new or an empty folder)");
    }
    check(!ec, where + ": " + ec.message());
  }
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  check(!ec, where + ": " + ec.message());
  const std::string pid = std::to_string(::getpid());
  const fs::path tmp = dir.string() + ".tmp-" + pid, old = dir.string() + ".old-" + pid;
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  check(!ec, where + ": " + ec.message());
  try {
    for (const auto& [name, bytes] : files) write_file_atomic((tmp / name).string(), bytes);
    if (exists) {
      // The earlier export steps aside, the new one takes its name, then the earlier one goes.
      fs::rename(dir, old);
      try {
        fs::rename(tmp, dir);
      } catch (...) {
        fs::rename(old, dir, ec);
        throw;
      }
      fs::remove_all(old, ec);
    } else {
      fs::rename(tmp, dir);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    fail(where + ": " + e.code().message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace ptl
