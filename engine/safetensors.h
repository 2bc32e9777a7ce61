#pragma once
// The safetensors container: u64 little-endian header length, a JSON header
// {"__metadata__": {str: str}, "<name>": {"dtype", "shape", "data_offsets": [begin, end]}},
// then the raw little-endian tensor bytes. This file knows nothing about GPTs; the meaning of
// the tensors and metadata (model checkpoints, LoRA adapters) lives in checkpoint.h.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/program.h"

namespace ptl {

// How a tensor's elements lie in the file. In memory every tensor is F32 or I32 (4-byte elements
// in `data`); F16 and BF16 are file encodings of an F32 tensor, for half-size weight files.
// Decoding widens them to F32, exactly, and records the encoding here; encoding an F32 tensor
// marked f16 or bf16 narrows it, rounding to nearest even (engine/half.h).
enum class Encoding { as_dtype, f16, bf16 };

struct StoredTensor {
  std::string name;
  DType dtype = DType::f32;  // stored as "F32" / "I32", unless `encoding` says F16 or BF16
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // little-endian bytes, numel * 4 (F16 and BF16 widened to F32)
  Encoding encoding = Encoding::as_dtype;

  int64_t numel() const;
  const float* f32() const { return reinterpret_cast<const float*>(data.data()); }
};

struct SafeTensors {
  std::map<std::string, std::string> metadata;  // "__metadata__": string values only (as the format requires)
  std::vector<StoredTensor> tensors;            // written in this order

  const StoredTensor* find(const std::string& name) const;  // nullptr when absent
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
};

// Encode to bytes. Tensors are laid out in order, 8-byte aligned header per the format; F32 tensors
// with an f16 or bf16 `encoding` are narrowed to 2-byte elements.
std::vector<uint8_t> encode_safetensors(const SafeTensors&);
// Decode, validating everything: header length within the file, valid JSON, known dtypes (F32,
// I32, and F16 / BF16, which arrive widened to F32), offsets
// that lie inside the data area, don't overlap and match dtype x shape. Throws ptl::Error naming
// the problem (`what` names the source, e.g. the file path, for the message).
// `skip`, for files written by other tools: the tensors it names are checked for their place in the
// data area only, whatever dtype the format defines they hold (BOOL, U8, F64, ...), and left out.
SafeTensors decode_safetensors(const uint8_t* bytes, size_t size, const std::string& what = "checkpoint",
                               const std::function<bool(const std::string&)>& skip = {});

std::vector<uint8_t> read_file_bytes(const std::string& path);  // throws ptl::Error (missing, unreadable)
// Write to `path.tmp-<pid>` in the same folder, flush, then rename over `path`, so a crash never
// leaves a half-written file under the real name. Temporaries of `path` left by writers that were
// killed (their process is gone) are removed first.
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);
// A folder's files as (name, bytes), e.g. a Hugging Face folder to write or hand to a browser.
using NamedFiles = std::vector<std::pair<std::string, std::vector<uint8_t>>>;
// Writes `files` (name, bytes) as the folder `dir` in one step: they go to `dir.tmp-<pid>` beside
// it, which then takes `dir`'s name, so a failure leaves `dir` as it was. `dir` may be new, empty,
// or an earlier write (holding only files named in `ours`); anything else in it is refused before
// anything is written, the message naming `writer` ("export-hf").
void write_folder_atomic(const std::string& dir, const NamedFiles& files, const std::vector<std::string>& ours,
                         const std::string& writer);
// Removes `path.tmp-<pid>` files whose writer process no longer exists (killed mid-write).
void remove_stale_temporaries(const std::string& path);

}  // namespace ptl
