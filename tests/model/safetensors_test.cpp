#include "model/safetensors.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>

#include "model/checkpoint.hpp"
#include "support/temp_dir.hpp"

using namespace brigade;
using namespace brigade::model;

namespace {

tensor_to_write f32_tensor(const std::string& name, std::vector<int64_t> shape, float start) {
  tensor_to_write t;
  t.name = name;
  t.type = st_dtype::f32;
  t.shape = shape;
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  t.bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = start + static_cast<float>(i);
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  return t;
}

// Writes a file whose header is `header` (raw JSON text) followed by `data_bytes` zero bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes,
               uint64_t declared_len = UINT64_MAX) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = declared_len == UINT64_MAX ? header.size() : declared_len;
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>(len >> (8 * i)));
  out << header;
  out << std::string(data_bytes, '\0');
}

std::string open_error(const std::string& path) {
  auto f = safetensors_file::open(path);
  REQUIRE_FALSE(f.ok());
  return f.err().message;
}

}  // namespace

TEST_CASE("safetensors round trip", "[safetensors]") {
  testing::temp_dir dir("st");
  const std::string path = dir.file("a.safetensors");
  REQUIRE(write_safetensors(path, {f32_tensor("w", {2, 3}, 1.0f), f32_tensor("b", {3}, 10.0f)},
                            {{"format", "pt"}})
              .ok());
  auto f = safetensors_file::open(path);
  REQUIRE(f.ok());
  const tensor_view* w = f.value()->find("w");
  REQUIRE(w);
  CHECK(w->shape == std::vector<int64_t>{2, 3});
  CHECK(w->type == st_dtype::f32);
  float v[6];
  std::memcpy(v, w->data, sizeof v);
  CHECK(v[0] == 1.0f);
  CHECK(v[5] == 6.0f);
  CHECK(f.value()->metadata().at("format") == "pt");
}

TEST_CASE("safetensors rejects malformed files with a message naming the problem",
          "[safetensors]") {
  testing::temp_dir dir("st-bad");
  const std::string p = dir.file("bad.safetensors");

  SECTION("shorter than the header length") {
    std::ofstream(p, std::ios::binary) << "abc";
    CHECK_THAT(open_error(p), Catch::Contains("truncated"));
  }
  SECTION("header length past the end") {
    write_raw(p, "{}", 0, 4096);
    CHECK_THAT(open_error(p), Catch::Contains("runs past the end"));
  }
  SECTION("oversized header length") {
    write_raw(p, "{}", 0, max_header_bytes + 1);
    CHECK_THAT(open_error(p), Catch::Contains("exceeds"));
  }
  SECTION("header is not JSON") {
    write_raw(p, "{\"w\": [", 0);
    CHECK_THAT(open_error(p), Catch::Contains("not valid JSON"));
  }
  SECTION("header is not an object") {
    write_raw(p, "[1, 2]", 0);
    CHECK_THAT(open_error(p), Catch::Contains("not a JSON object"));
  }
  SECTION("unknown dtype") {
    write_raw(p, R"({"w": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})", 16);
    const std::string e = open_error(p);
    CHECK_THAT(e, Catch::Contains("'w'") && Catch::Contains("F128"));
  }
  SECTION("shape and byte range disagree") {
    write_raw(p, R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 12);
    CHECK_THAT(open_error(p), Catch::Contains("'w'") && Catch::Contains("shape needs"));
  }
  SECTION("offsets outside the data") {
    write_raw(p, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);
    CHECK_THAT(open_error(p), Catch::Contains("'w'") && Catch::Contains("past the end"));
  }
  SECTION("offsets reversed") {
    write_raw(p, R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8);
    CHECK_THAT(open_error(p), Catch::Contains("begin after"));
  }
  SECTION("negative dimension") {
    write_raw(p, R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
    CHECK_THAT(open_error(p), Catch::Contains("non-negative"));
  }
  SECTION("missing fields") {
    write_raw(p, R"({"w": {"dtype": "F32", "shape": [1]}})", 4);
    CHECK_THAT(open_error(p), Catch::Contains("data_offsets"));
  }
  SECTION("overlapping tensors") {
    write_raw(p,
              R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
              12);
    CHECK_THAT(open_error(p), Catch::Contains("overlap"));
  }
  SECTION("a missing file") {
    auto f = safetensors_file::open(dir.file("nope.safetensors"));
    REQUIRE_FALSE(f.ok());
    CHECK(f.err().code == errc::not_found);
  }
}

TEST_CASE("checkpoint looks tensors up by name and checks shape and dtype", "[checkpoint]") {
  testing::temp_dir dir("ck");
  tensor_to_write ints;
  ints.name = "ids";
  ints.type = st_dtype::i32;
  ints.shape = {2};
  ints.bytes.resize(8);
  REQUIRE(write_safetensors(dir.file("model.safetensors"),
                            {f32_tensor("w", {2, 3}, 0.0f), f32_tensor("v", {3}, 0.0f), ints})
              .ok());
  auto ck = checkpoint::open(dir.path());
  REQUIRE(ck.ok());
  CHECK(ck.value()->matrix("w", 2, 3).ok());
  auto wrong = ck.value()->matrix("w", 3, 2);
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.err().message, Catch::Contains("'w'") && Catch::Contains("[2, 3]"));
  auto missing = ck.value()->matrix("x", 1, 1);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.err().message, Catch::Contains("'x'") && Catch::Contains("missing"));
  auto int_vec = ck.value()->vector("ids", 2);
  REQUIRE_FALSE(int_vec.ok());
  CHECK(int_vec.err().code == errc::unsupported);
  CHECK(ck.value()->vector("v", 3).ok());
}

TEST_CASE("sharded checkpoint with an index", "[checkpoint]") {
  testing::temp_dir dir("ck-shard");
  REQUIRE(write_safetensors(dir.file("a.safetensors"), {f32_tensor("w", {2, 2}, 0.0f)}).ok());
  REQUIRE(write_safetensors(dir.file("b.safetensors"), {f32_tensor("v", {2}, 5.0f)}).ok());
  SECTION("valid") {
    std::ofstream(dir.file("model.safetensors.index.json"))
        << R"({"metadata": {}, "weight_map": {"w": "a.safetensors", "v": "b.safetensors"}})";
    auto ck = checkpoint::open(dir.path());
    REQUIRE(ck.ok());
    auto v = ck.value()->vector("v", 2);
    REQUIRE(v.ok());
    CHECK(v.value()[1] == 6.0f);
  }
  SECTION("index names a tensor its shard lacks") {
    std::ofstream(dir.file("model.safetensors.index.json"))
        << R"({"weight_map": {"w": "b.safetensors"}})";
    auto ck = checkpoint::open(dir.path());
    REQUIRE_FALSE(ck.ok());
    CHECK_THAT(ck.err().message, Catch::Contains("'w'") && Catch::Contains("b.safetensors"));
  }
  SECTION("index names a missing shard") {
    std::ofstream(dir.file("model.safetensors.index.json"))
        << R"({"weight_map": {"w": "c.safetensors"}})";
    auto ck = checkpoint::open(dir.path());
    REQUIRE_FALSE(ck.ok());
    CHECK_THAT(ck.err().message, Catch::Contains("c.safetensors"));
  }
  SECTION("index escapes the directory") {
    std::ofstream(dir.file("model.safetensors.index.json"))
        << R"({"weight_map": {"w": "../a.safetensors"}})";
    auto ck = checkpoint::open(dir.path());
    REQUIRE_FALSE(ck.ok());
    CHECK_THAT(ck.err().message, Catch::Contains("bad file"));
  }
}
