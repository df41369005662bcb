// QLoRA's NF4 with double quantization (precision/nf4.hpp) against the paper's 16 values and
// bitsandbytes' algorithm written out in torch (tests/fixtures/make_nf4_fixtures.py): the code
// tables, quantization (codes exactly; the offset, a float32 mean, within its last bits), and
// dequantization of the reference's own quantized state bit for bit, so a base quantized by
// either dequantizes to the same values in both. Then NF4's error bound, the 16-bit outputs,
// partial ranges and the storage's bits per weight.
#include <QtTest>

#include <cmath>
#include <vector>

#include "core/torch_fixtures.hpp"
#include "precision/half_float.hpp"
#include "precision/nf4.hpp"

using namespace trainbench;

namespace {

const std::string kPath = std::string(TRAINBENCH_FIXTURES_DIR) + "/nf4/nf4_reference.safetensors";

// A quantized tensor with its own storage.
struct OwnedNf4 {
    std::vector<float> storage;  // floats keep the parts 4-byte aligned
    Nf4Tensor q;
    explicit OwnedNf4(int64_t elements)
        : storage(static_cast<size_t>((nf4_sizes(elements).total_bytes() + 3) / 4)),
          q(nf4_tensor(storage.data(), elements)) {}
};

std::vector<float> dequantized(const Nf4Tensor& q) {
    std::vector<float> out(static_cast<size_t>(q.sizes.elements));
    dequantize_nf4(q, 0, q.sizes.elements, Precision::fp32, out.data());
    return out;
}

}  // namespace

class TestNf4 : public QObject {
    Q_OBJECT

private slots:
    void codeTablesAreThePapersAndBitsandbytes() {
        const auto fixture = testing::read_fixture_tensors(kPath);
        const std::vector<float>& nf4 = fixture.at("nf4_values").data;
        for (size_t i = 0; i < 16; ++i) QCOMPARE(nf4_code_values()[i], nf4[i]);
        QCOMPARE(nf4_code_values()[7], 0.0f);
        QCOMPARE(nf4_code_values()[0], -1.0f);
        QCOMPARE(nf4_code_values()[15], 1.0f);
        const std::vector<float>& map = fixture.at("dynamic_map").data;
        for (size_t i = 0; i < 256; ++i)
            QVERIFY2(dynamic_map_values()[i] == map[i],
                     qPrintable(QString("dynamic map value %1: %2, torch %3").arg(i).arg(dynamic_map_values()[i], 0, 'g', 9).arg(map[i], 0, 'g', 9)));
    }

    void nearestCodesTieLowAndSaturate() {
        const auto& v = nf4_code_values();
        for (uint8_t k = 0; k < 16; ++k) QCOMPARE(nearest_nf4_code(v[k]), k);
        const float midpoint = static_cast<float>((double(v[7]) + double(v[8])) / 2.0);
        QCOMPARE(nearest_nf4_code(midpoint), uint8_t{7});
        QCOMPARE(nearest_nf4_code(std::nextafter(midpoint, 1.0f)), uint8_t{8});
        QCOMPARE(nearest_nf4_code(-3.0f), uint8_t{0});
        QCOMPARE(nearest_nf4_code(3.0f), uint8_t{15});
        const auto& map = dynamic_map_values();
        for (int k = 0; k < 256; ++k) QCOMPARE(int(nearest_dynamic_map_code(map[static_cast<size_t>(k)])), k);
    }

    void quantizesAsTheReference() {
        const auto fixture = testing::read_fixture_tensors(kPath);
        const std::vector<float>& input = fixture.at("input").data;
        OwnedNf4 mine(static_cast<int64_t>(input.size()));
        quantize_nf4(input.data(), mine.q);
        const Nf4Sizes& s = mine.q.sizes;
        QCOMPARE(s.blocks, int64_t(fixture.at("absmax_codes").data.size()));
        QCOMPARE(s.scale_blocks, int64_t(fixture.at("scales").data.size()));
        QCOMPARE(s.code_bytes, int64_t(fixture.at("codes").data.size()));
        for (int64_t i = 0; i < s.code_bytes; ++i)
            QVERIFY2(float(mine.q.codes[i]) == fixture.at("codes").data[static_cast<size_t>(i)], qPrintable(QString("code byte %1").arg(i)));
        for (int64_t b = 0; b < s.blocks; ++b)
            QVERIFY2(float(mine.q.absmax_codes[b]) == fixture.at("absmax_codes").data[static_cast<size_t>(b)],
                     qPrintable(QString("absmax code %1").arg(b)));
        // The offset is a mean: torch's float32 sum and this double one may differ in the last bit.
        const float want_offset = fixture.at("offset").data[0];
        QVERIFY(std::fabs(*mine.q.offset - want_offset) <= 2e-7f * std::fabs(want_offset));
        for (int64_t c = 0; c < s.scale_blocks; ++c) {
            const float want = fixture.at("scales").data[static_cast<size_t>(c)];
            QVERIFY(std::fabs(mine.q.scales[c] - want) <= 4e-7f * want);
        }
        QVERIFY(testing::max_relative_error(dequantized(mine.q), fixture.at("dequantized").data) < 1e-6);
    }

    // The reference's own state (codes, absmax codes, scales, offset) dequantizes here to its
    // values bit for bit.
    void dequantizesTheReferencesStateBitForBit() {
        const auto fixture = testing::read_fixture_tensors(kPath);
        const int64_t n = static_cast<int64_t>(fixture.at("input").data.size());
        OwnedNf4 theirs(n);
        for (size_t i = 0; i < fixture.at("codes").data.size(); ++i)
            theirs.q.codes[i] = static_cast<uint8_t>(fixture.at("codes").data[i]);
        for (size_t b = 0; b < fixture.at("absmax_codes").data.size(); ++b)
            theirs.q.absmax_codes[b] = static_cast<uint8_t>(fixture.at("absmax_codes").data[b]);
        for (size_t c = 0; c < fixture.at("scales").data.size(); ++c) theirs.q.scales[c] = fixture.at("scales").data[c];
        *theirs.q.offset = fixture.at("offset").data[0];
        const std::vector<float> got = dequantized(theirs.q);
        const std::vector<float>& want = fixture.at("dequantized").data;
        for (int64_t i = 0; i < n; ++i)
            QVERIFY2(got[static_cast<size_t>(i)] == want[static_cast<size_t>(i)], qPrintable(QString("element %1").arg(i)));
    }

    // |x - dequantized| <= half NF4's widest gap of the block's absmax, plus what double
    // quantization moved that absmax (at most half the 8-bit map's widest gap of its scale).
    void errorWithinNf4sBound() {
        const auto fixture = testing::read_fixture_tensors(kPath);
        const std::vector<float>& x = fixture.at("input").data;
        OwnedNf4 mine(static_cast<int64_t>(x.size()));
        quantize_nf4(x.data(), mine.q);
        const std::vector<float> out = dequantized(mine.q);
        const auto& v = nf4_code_values();
        const auto& map = dynamic_map_values();
        float nf4_gap = 0.0f, map_gap = 0.0f;
        for (size_t k = 0; k + 1 < v.size(); ++k) nf4_gap = std::max(nf4_gap, (v[k + 1] - v[k]) / 2);
        for (size_t k = 0; k + 1 < map.size(); ++k) map_gap = std::max(map_gap, (map[k + 1] - map[k]) / 2);
        for (int64_t b = 0; b < mine.q.sizes.blocks; ++b) {
            const size_t begin = static_cast<size_t>(b * kNf4BlockSize);
            const size_t end = std::min(begin + kNf4BlockSize, x.size());
            float absmax = 0.0f, err = 0.0f;
            for (size_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(x[i]));
            for (size_t i = begin; i < end; ++i) err = std::max(err, std::fabs(x[i] - out[i]));
            const float moved = std::fabs(nf4_block_absmax(mine.q, b) - absmax);
            QVERIFY(moved <= mine.q.scales[b / kNf4ScaleBlockSize] * map_gap * 1.0001f);
            QVERIFY2(err <= absmax * nf4_gap + moved + 1e-7f, qPrintable(QString("block %1").arg(b)));
        }
    }

    void allZeroBlockStaysZero() {
        std::vector<float> x(200, 0.0f);
        x[150] = 0.5f;
        OwnedNf4 mine(200);
        quantize_nf4(x.data(), mine.q);
        const std::vector<float> out = dequantized(mine.q);
        for (int i = 0; i < 128; ++i) QCOMPARE(out[static_cast<size_t>(i)], 0.0f);
        QVERIFY(std::fabs(out[150] - 0.5f) < 0.01f);
    }

    // A range dequantizes to the same values as the whole; 16-bit outputs are the fp32 values
    // rounded once.
    void rangesAndSixteenBitOutputs() {
        const auto fixture = testing::read_fixture_tensors(kPath);
        const std::vector<float>& x = fixture.at("input").data;
        const int64_t n = static_cast<int64_t>(x.size());
        OwnedNf4 mine(n);
        quantize_nf4(x.data(), mine.q);
        const std::vector<float> whole = dequantized(mine.q);
        std::vector<float> parts(static_cast<size_t>(n));
        for (int64_t begin : {int64_t{0}, int64_t{33}, int64_t{1000}, int64_t{20001}}) {
            const int64_t end = std::min(n, begin + 9999);
            dequantize_nf4(mine.q, begin, end, Precision::fp32, parts.data());
            for (int64_t i = begin; i < end; ++i) QCOMPARE(parts[static_cast<size_t>(i)], whole[static_cast<size_t>(i)]);
        }
        std::vector<uint16_t> codes(static_cast<size_t>(n));
        dequantize_nf4(mine.q, 0, n, Precision::bf16, codes.data());
        for (int64_t i = 0; i < n; ++i) QCOMPARE(codes[static_cast<size_t>(i)], float_to_bf16(whole[static_cast<size_t>(i)]));
        dequantize_nf4(mine.q, 0, n, Precision::fp16, codes.data());
        for (int64_t i = 0; i < n; ++i) QCOMPARE(codes[static_cast<size_t>(i)], float_to_fp16(whole[static_cast<size_t>(i)]));
    }

    // The storage of a GPT-sized weight: 4 bits a weight, 8 per block of 64, 32 per 16,384 and
    // the offset, about 4.127 bits a weight.
    void storageBitsPerWeight() {
        const Nf4Sizes s = nf4_sizes(768 * 3072);
        QCOMPARE(s.code_bytes, int64_t{768 * 3072 / 2});
        QCOMPARE(s.blocks, int64_t{768 * 3072 / 64});
        QCOMPARE(s.scale_blocks, int64_t{768 * 3072 / 64 / 256});
        const double bits = 8.0 * static_cast<double>(s.total_bytes()) / (768.0 * 3072.0);
        QVERIFY2(bits > 4.12 && bits < 4.13, qPrintable(QString::number(bits)));
        const Nf4Sizes odd = nf4_sizes(65);
        QCOMPARE(odd.code_bytes, int64_t{33});
        QCOMPARE(odd.blocks, int64_t{2});
        QCOMPARE(odd.scale_blocks, int64_t{1});
        QCOMPARE(odd.scales_offset() % 4, int64_t{0});
    }
};

QTEST_APPLESS_MAIN(TestNf4)
#include "test_nf4.moc"
