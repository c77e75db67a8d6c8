// Adasum (adasum_allreduce.h) over threads as ranks: the pairwise formula
// against a plain double-precision one, the pairing order against a
// sequential reference built from it, the properties that define Adasum
// (orthogonal inputs add up, identical inputs give the input, a zero vector
// contributes nothing), every tensor of a fused buffer on its own, and the
// dtypes it rejects.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cc/core/collectives/adasum_allreduce.h"
#include "cc/core/numeric/half.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::DataType;
using tfdist::InProcessFabric;
using tfdist::InProcessSendMode;
using tfdist::Status;
using tfdist::StatusCode;
using tfdist::Transport;

using Vector = std::vector<double>;

// The paper's formula, written out independently of the library.
Vector Textbook(const Vector& a, const Vector& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  Vector out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double ca = aa == 0 ? 1 : 1 - dot / (2 * aa);
    const double cb = bb == 0 ? 1 : 1 - dot / (2 * bb);
    out[i] = ca * a[i] + cb * b[i];
  }
  return out;
}

// The documented pairing order: fold the first 2r ranks in pairs, then the
// balanced binary tree over the p2 virtual ranks.
Vector TextbookTree(const std::vector<Vector>& x) {
  const int size = static_cast<int>(x.size());
  int p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  const int r = size - p2;
  std::vector<Vector> u;
  for (int i = 0; i < r; ++i) u.push_back(Textbook(x[2 * i], x[2 * i + 1]));
  for (int j = 2 * r; j < size; ++j) u.push_back(x[j]);
  while (u.size() > 1) {
    std::vector<Vector> next;
    for (size_t i = 0; i < u.size(); i += 2) next.push_back(Textbook(u[i], u[i + 1]));
    u = next;
  }
  return u[0];
}

void Store(DataType dtype, double value, unsigned char* element) {
  switch (dtype) {
    case DataType::kFloat16: {
      const uint16_t h = tfdist::FloatToHalf(static_cast<float>(value));
      std::memcpy(element, &h, 2);
      return;
    }
    case DataType::kBFloat16: {
      const uint16_t h = tfdist::FloatToBFloat16(static_cast<float>(value));
      std::memcpy(element, &h, 2);
      return;
    }
    case DataType::kFloat32: {
      const float f = static_cast<float>(value);
      std::memcpy(element, &f, 4);
      return;
    }
    default:
      std::memcpy(element, &value, 8);
  }
}

double Load(DataType dtype, const unsigned char* element) {
  switch (dtype) {
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, element, 2);
      return tfdist::HalfToFloat(h);
    }
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, element, 2);
      return tfdist::BFloat16ToFloat(h);
    }
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, element, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, element, 8);
      return d;
    }
  }
}

Bytes Encode(DataType dtype, const Vector& values) {
  const size_t element = tfdist::DataTypeSize(dtype);
  Bytes bytes(values.size() * element);
  for (size_t i = 0; i < values.size(); ++i) Store(dtype, values[i], &bytes[i * element]);
  return bytes;
}

Vector Decode(DataType dtype, const Bytes& bytes) {
  const size_t element = tfdist::DataTypeSize(dtype);
  Vector values(bytes.size() / element);
  for (size_t i = 0; i < values.size(); ++i) values[i] = Load(dtype, &bytes[i * element]);
  return values;
}

// Each rank's buffer holds the tensors of `counts` back to back; returns the
// buffers after the allreduce (all statuses checked).
std::vector<Bytes> RunAdasum(const std::vector<Bytes>& inputs, const std::vector<size_t>& counts,
                             DataType dtype, InProcessSendMode mode) {
  const int size = static_cast<int>(inputs.size());
  std::vector<Bytes> buffers = inputs;
  InProcessFabric fabric(size, FabricOptions(mode));
  const std::vector<Status> statuses = tfdist::RunOnThreads(fabric, [&](Transport& t) {
    return tfdist::AdasumAllreduce(t, buffers[t.rank()].data(), counts, dtype);
  });
  for (const Status& s : statuses) CHECK_OK(s);
  return buffers;
}

double Tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return 2e-2;
    case DataType::kBFloat16: return 1e-1;
    case DataType::kFloat32: return 1e-5;
    default: return 1e-12;
  }
}

const DataType kFloating[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                              DataType::kFloat64};

TFDIST_TEST(AdasumCombineIsThePapersFormula) {
  std::mt19937 random(7);
  std::normal_distribution<double> normal;
  for (size_t n : {1u, 3u, 100u}) {
    Vector a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = normal(random);
      b[i] = normal(random);
    }
    Bytes buffer = Encode(DataType::kFloat64, a);
    const Bytes other = Encode(DataType::kFloat64, b);
    tfdist::AdasumCombine(buffer.data(), other.data(), n, DataType::kFloat64);
    const Vector got = Decode(DataType::kFloat64, buffer);
    const Vector want = Textbook(a, b);
    for (size_t i = 0; i < n; ++i) CHECK(std::fabs(got[i] - want[i]) < 1e-12);
  }
}

TFDIST_TEST(AdasumZeroVectorContributesNothing) {
  const Vector zero(4, 0.0), b = {1, -2, 3, 0.5};
  for (const auto& [first, second] : {std::make_pair(zero, b), std::make_pair(b, zero)}) {
    Bytes buffer = Encode(DataType::kFloat32, first);
    const Bytes other = Encode(DataType::kFloat32, second);
    tfdist::AdasumCombine(buffer.data(), other.data(), 4, DataType::kFloat32);
    const Vector got = Decode(DataType::kFloat32, buffer);
    for (size_t i = 0; i < 4; ++i) CHECK_EQ(got[i], b[i]);
  }
  Bytes both = Encode(DataType::kFloat32, zero);
  const Bytes other = Encode(DataType::kFloat32, zero);
  tfdist::AdasumCombine(both.data(), other.data(), 4, DataType::kFloat32);
  for (double v : Decode(DataType::kFloat32, both)) CHECK_EQ(v, 0.0);
}

// Random inputs of several tensors per buffer, every P of 1..6, every
// floating dtype: each rank ends with the same bits, within the dtype's
// rounding of the textbook tree computed tensor by tensor.
TFDIST_TEST(AdasumMatchesTheTextbookTreePerTensor) {
  const std::vector<std::vector<size_t>> layouts = {
      {0}, {1}, {3}, {7}, {LargeTestCount(20001)}, {5, 0, 1, 17}, {2, LargeTestCount(4099)}};
  for (int size = 1; size <= 6; ++size) {
    for (DataType dtype : kFloating) {
      for (const std::vector<size_t>& counts : layouts) {
        size_t total = 0;
        for (size_t c : counts) total += c;
        std::mt19937 random(size * 100 + static_cast<int>(dtype));
        std::normal_distribution<double> normal;
        std::vector<Vector> values(size, Vector(total));
        std::vector<Bytes> inputs;
        for (int r = 0; r < size; ++r) {
          // Tensor t of rank r leans towards a shared direction by a
          // different amount, so that the tensors' coefficients differ.
          for (size_t i = 0; i < total; ++i) values[r][i] = normal(random) + 0.5 * (i % 3);
          inputs.push_back(Encode(dtype, values[r]));
          values[r] = Decode(dtype, inputs.back());  // what the rank really holds
        }
        for (InProcessSendMode mode : {InProcessSendMode::kBuffered,
                                       InProcessSendMode::kRendezvous}) {
          const std::vector<Bytes> out = RunAdasum(inputs, counts, dtype, mode);
          const std::string where = "P=" + std::to_string(size) + " " +
                                    tfdist::DataTypeName(dtype) + " tensors=" +
                                    std::to_string(counts.size()) + " total=" +
                                    std::to_string(total);
          for (int r = 1; r < size; ++r) CHECK_EQ_MSG(FirstMismatch(out[r], out[0], 1), -1, where);
          const Vector got = Decode(dtype, out[0]);
          size_t offset = 0;
          for (size_t count : counts) {
            std::vector<Vector> tensor(size);
            for (int r = 0; r < size; ++r) {
              tensor[r].assign(values[r].begin() + offset, values[r].begin() + offset + count);
            }
            const Vector want = count ? TextbookTree(tensor) : Vector();
            double scale = 1e-30, error = 0;
            for (size_t i = 0; i < count; ++i) {
              scale = std::max(scale, std::fabs(want[i]));
              error = std::max(error, std::fabs(got[offset + i] - want[i]));
            }
            CHECK_EQ_MSG(error <= Tolerance(dtype) * scale * size, true,
                         where << " error " << error << " scale " << scale);
            offset += count;
          }
        }
      }
    }
  }
}

TFDIST_TEST(AdasumOfOrthogonalInputsIsTheSumAndOfIdenticalInputsTheInput) {
  for (int size = 1; size <= 6; ++size) {
    const size_t n = 8;
    std::vector<Bytes> orthogonal, identical;
    Vector sum(n, 0.0);
    const Vector same = {0.5, -1, 2, 0, 3, -0.25, 1, 4};
    for (int r = 0; r < size; ++r) {
      Vector v(n, 0.0);
      v[r] = r + 1.0;  // rank r's vector lies along axis r
      sum[r] = r + 1.0;
      orthogonal.push_back(Encode(DataType::kFloat32, v));
      identical.push_back(Encode(DataType::kFloat32, same));
    }
    const std::vector<Bytes> o = RunAdasum(orthogonal, {n}, DataType::kFloat32,
                                           InProcessSendMode::kBuffered);
    const std::vector<Bytes> s = RunAdasum(identical, {n}, DataType::kFloat32,
                                           InProcessSendMode::kBuffered);
    for (int r = 0; r < size; ++r) {
      const Vector got_sum = Decode(DataType::kFloat32, o[r]);
      const Vector got_same = Decode(DataType::kFloat32, s[r]);
      for (size_t i = 0; i < n; ++i) {
        CHECK_EQ_MSG(got_sum[i], sum[i], "P=" << size << " i=" << i);
        CHECK_EQ_MSG(got_same[i], same[i], "P=" << size << " i=" << i);
      }
    }
  }
}

TFDIST_TEST(AdasumRejectsIntegersNamingTheDtype) {
  for (DataType dtype : {DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kInt8}) {
    const std::vector<Status> statuses = tfdist::RunOnThreads(2, [&](Transport& t) {
      int64_t buffer[2] = {1, 2};
      return tfdist::AdasumAllreduce(t, buffer, {1}, dtype);
    });
    for (const Status& s : statuses) {
      CHECK(s.code() == StatusCode::kInvalidArgument);
      CHECK(s.message().find("Adasum") != std::string::npos);
      CHECK(s.message().find(tfdist::DataTypeName(dtype)) != std::string::npos);
    }
  }
}

}  // namespace
}  // namespace tfdist_test
