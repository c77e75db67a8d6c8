// Inputs and sequential references shared by the collective tests.
#ifndef TFDIST_CC_TESTS_TEST_DATA_H_
#define TFDIST_CC_TESTS_TEST_DATA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/testing/in_process_transport.h"

namespace tfdist_test {

using Bytes = std::vector<unsigned char>;

// The group sizes every collective is swept over: 1..9, 13, 16 (fewer under
// ThreadSanitizer, test_harness.h).
const std::vector<int>& SweepGroupSizes();
const std::vector<tfdist::DataType>& ReducibleDataTypes();
const std::vector<tfdist::ReduceOp>& AllReduceOps();

// Writes the integer `value` as one element of `dtype` (integers wrap;
// floating types get the exactly representable small integers the tests use).
void StoreInteger(tfdist::DataType dtype, int64_t value, void* element);

// Rank `rank`'s input for an allreduce of `count` elements. Elements depend on
// rank and index, and are chosen so that every partial result is exact in
// every dtype (small integers for Sum, values in {+-1, +-2} with at most one
// 2 per element for Product), so any reduction order gives the same bits.
Bytes MakeRankInput(tfdist::DataType dtype, tfdist::ReduceOp op, int rank,
                    int size, size_t count);

// Reduces inputs[0] .. inputs[P-1] in rank order with ReduceInto.
Bytes SequentialReduce(const std::vector<Bytes>& inputs, size_t count,
                       tfdist::DataType dtype, tfdist::ReduceOp op);

// Byte-pattern block for the data-movement collectives: differs per
// (a, b, index) so a block landing in the wrong place is caught.
Bytes PatternBlock(int a, int b, size_t bytes);

// Index of the first differing element, or -1 when equal.
long long FirstMismatch(const Bytes& actual, const Bytes& expected,
                        size_t element_size);

tfdist::InProcessFabricOptions FabricOptions(tfdist::InProcessSendMode mode);
const char* SendModeName(tfdist::InProcessSendMode mode);

}  // namespace tfdist_test

#endif  // TFDIST_CC_TESTS_TEST_DATA_H_
