// The engine's bulk fp16 and bf16 conversions (store_16bit, load_16bit, round_to_16bit, the
// strided *_16bit_rows and the inline *_16bit_serial they share), which use the CPU's AVX-512
// and F16C instructions where the build targets them, give the bits of the scalar functions
// (float_to_fp16 and fp16_to_float, float_to_bf16 and bf16_to_float) for every code, every
// rounding boundary between two codes, overflow, subnormals, infinities and NaNs with their
// payloads; so a run's bits do not depend on which values fell into a vector of sixteen, one of
// eight or the scalar tail.
#include <QtTest>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "parallel/worker_team.hpp"
#include "precision/half_float.hpp"

using namespace trainbench;

namespace {

// Every finite fp16 value, the midpoints to its neighbours and one float either side of them,
// then the edges: overflow past 65504, subnormal steps, infinities, NaNs quiet and signalling.
std::vector<float> boundary_floats() {
    std::vector<float> values;
    for (uint32_t h = 0; h < 0x7c00; ++h) {
        for (uint32_t sign : {0u, 0x8000u}) {
            const float v = fp16_to_float(static_cast<uint16_t>(h | sign));
            const float next = fp16_to_float(static_cast<uint16_t>((h + 1) | sign));
            const float middle = bits_float((float_bits(v) + float_bits(next)) / 2);  // same sign and binade, or the edge
            values.insert(values.end(), {v, middle, std::nextafter(middle, 0.0f), std::nextafter(middle, 2 * next)});
        }
    }
    for (float edge : {65504.0f, 65519.99f, 65520.0f, 1e6f, 3.4e38f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-10f, 0.0f, -0.0f})
        values.insert(values.end(), {edge, -edge});
    values.push_back(std::numeric_limits<float>::infinity());
    values.push_back(-std::numeric_limits<float>::infinity());
    for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fa5a5a5u, 0xffc01234u, 0xff812345u, 0x7fffe000u})
        values.push_back(bits_float(nan));
    std::mt19937 rng(3);
    std::uniform_int_distribution<uint32_t> any_bits;
    for (int i = 0; i < 100000; ++i) values.push_back(bits_float(any_bits(rng)));
    return values;
}

bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

}  // namespace

class TestHalfFloat : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { WorkerTeam::shared().resize(2); }

    void every_fp16_code_widens_as_the_scalar_function() {
        std::vector<uint16_t> codes(65536);
        for (uint32_t h = 0; h < 65536; ++h) codes[h] = static_cast<uint16_t>(h);
        std::vector<float> bulk(codes.size()), scalar(codes.size());
        load_16bit(Precision::fp16, codes.data(), bulk.data(), int64_t(codes.size()));
        for (size_t h = 0; h < codes.size(); ++h) scalar[h] = fp16_to_float(codes[h]);
        for (size_t h = 0; h < codes.size(); ++h)
            QVERIFY2(same_bits(&bulk[h], &scalar[h], 4), qPrintable(QString("code 0x%1: %2 vs %3")
                                                                      .arg(h, 4, 16, QChar('0'))
                                                                      .arg(float_bits(bulk[h]), 8, 16)
                                                                      .arg(float_bits(scalar[h]), 8, 16)));
    }

    void every_boundary_rounds_as_the_scalar_function() {
        const std::vector<float> values = boundary_floats();
        std::vector<uint16_t> bulk(values.size());
        store_16bit(Precision::fp16, values.data(), bulk.data(), int64_t(values.size()));
        for (size_t i = 0; i < values.size(); ++i)
            QVERIFY2(bulk[i] == float_to_fp16(values[i]), qPrintable(QString("0x%1 -> 0x%2, scalar 0x%3")
                                                                         .arg(float_bits(values[i]), 8, 16)
                                                                         .arg(bulk[i], 4, 16)
                                                                         .arg(float_to_fp16(values[i]), 4, 16)));
        std::vector<float> rounded = values, copied(values.size());
        round_to_16bit(Precision::fp16, rounded.data(), int64_t(rounded.size()));
        round_to_16bit_serial(Precision::fp16, values.data(), copied.data(), int64_t(values.size()));  // into another array
        for (size_t i = 0; i < values.size(); ++i) {
            const float scalar = fp16_to_float(float_to_fp16(values[i]));
            QVERIFY2(same_bits(&rounded[i], &scalar, 4), qPrintable(QString("0x%1").arg(float_bits(values[i]), 8, 16)));
            QVERIFY2(same_bits(&copied[i], &scalar, 4), qPrintable(QString("0x%1 copied").arg(float_bits(values[i]), 8, 16)));
        }
    }

    // bf16 the same way: every code widened, every value of the boundary set rounded, as
    // bf16_to_float and float_to_bf16 do (in registers of sixteen where the build has AVX-512).
    void every_bf16_code_and_boundary_converts_as_the_scalar_functions() {
        std::vector<uint16_t> codes(65536);
        for (uint32_t h = 0; h < 65536; ++h) codes[h] = static_cast<uint16_t>(h);
        std::vector<float> widened(codes.size());
        load_16bit(Precision::bf16, codes.data(), widened.data(), int64_t(codes.size()));
        for (size_t h = 0; h < codes.size(); ++h) {
            const float scalar = bf16_to_float(codes[h]);
            QVERIFY2(same_bits(&widened[h], &scalar, 4), qPrintable(QString("code 0x%1").arg(h, 4, 16, QChar('0'))));
        }
        std::vector<float> values = boundary_floats();
        for (uint32_t h = 0; h < 65536; h += 3) {  // bf16's own midpoints, and the floats either side
            const float middle = bits_float((h << 16) | 0x8000u);
            values.insert(values.end(), {middle, std::nextafter(middle, 0.0f), std::nextafter(middle, INFINITY)});
        }
        std::vector<uint16_t> rounded(values.size());
        store_16bit(Precision::bf16, values.data(), rounded.data(), int64_t(values.size()));
        std::vector<float> copied(values.size());
        round_to_16bit_serial(Precision::bf16, values.data(), copied.data(), int64_t(values.size()));
        for (size_t i = 0; i < values.size(); ++i) {
            QVERIFY2(rounded[i] == float_to_bf16(values[i]), qPrintable(QString("0x%1 -> 0x%2, scalar 0x%3")
                                                                            .arg(float_bits(values[i]), 8, 16)
                                                                            .arg(rounded[i], 4, 16)
                                                                            .arg(float_to_bf16(values[i]), 4, 16)));
            const float scalar = bf16_to_float(float_to_bf16(values[i]));
            QVERIFY2(same_bits(&copied[i], &scalar, 4), qPrintable(QString("0x%1 copied").arg(float_bits(values[i]), 8, 16)));
        }
    }

    // load_16bit_rows and store_16bit_rows (a head's columns of a wider tensor): each row's
    // values converted as the scalar functions convert them, whatever its length (16-, 8-wide
    // vectors and a tail), and nothing written between the rows.
    void strided_rows_convert_as_the_scalar_functions() {
        const std::vector<float> values = boundary_floats();
        for (Precision precision : {Precision::fp16, Precision::bf16}) {
            auto to_code = [&](float v) { return precision == Precision::fp16 ? float_to_fp16(v) : float_to_bf16(v); };
            auto to_value = [&](uint16_t h) { return precision == Precision::fp16 ? fp16_to_float(h) : bf16_to_float(h); };
            for (int64_t columns : {1, 7, 8, 16, 32, 37}) {
                const int64_t rows = 5, wide = 3 * columns + 5, narrow = columns + 3;
                std::vector<uint16_t> codes(rows * wide, 0xabcd);
                std::vector<float> widened(rows * narrow, -7.0f);
                store_16bit_rows(precision, values.data(), narrow, codes.data() + 2, wide, rows, columns);
                load_16bit_rows(precision, codes.data() + 2, wide, widened.data(), narrow, rows, columns);
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < wide; ++c) {
                        const bool inside = c >= 2 && c < 2 + columns;
                        const uint16_t expected = inside ? to_code(values[size_t(r * narrow + c - 2)]) : uint16_t{0xabcd};
                        QVERIFY2(codes[size_t(r * wide + c)] == expected,
                                 qPrintable(QString("columns %1, row %2, column %3").arg(columns).arg(r).arg(c)));
                    }
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < narrow; ++c) {
                        const float expected = c < columns ? to_value(codes[size_t(r * wide + c + 2)]) : -7.0f;
                        QVERIFY2(same_bits(&widened[size_t(r * narrow + c)], &expected, 4),
                                 qPrintable(QString("columns %1, row %2, column %3").arg(columns).arg(r).arg(c)));
                    }
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestHalfFloat)
#include "test_half_float.moc"
