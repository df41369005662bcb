#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

#include "trainbench/error.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "model/param_layout.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;

namespace {

const std::string kFixtureStem = std::string(TRAINBENCH_FIXTURES_DIR) + "/safetensors/mlp_3_4_2";

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
}

// A file built by hand, so each test controls exactly which part is broken.
std::string safetensors_blob(const std::string& header, const std::string& data,
                             uint64_t claimed_header_size = UINT64_MAX) {
    const uint64_t size = claimed_header_size == UINT64_MAX ? header.size() : claimed_header_size;
    std::string blob;
    for (int i = 0; i < 8; ++i) blob.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
    return blob + header + data;
}

std::string float_bytes(std::initializer_list<float> values) {
    std::string out;
    for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
    return out;
}

// Runs `action` and returns the Error message; fails the test if nothing was thrown.
std::string error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

#define EXPECT_ERROR_CONTAINS(action, fragment)                                              \
    do {                                                                                     \
        const std::string message_ = error_of([&] { action; });                              \
        QVERIFY2(message_.find(fragment) != std::string::npos,                               \
                 ("expected '" + std::string(fragment) + "' in: " + message_).c_str());     \
    } while (0)

QJsonObject load_reference() {
    QFile file(QString::fromStdString(kFixtureStem + ".json"));
    if (!file.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(file.readAll()).object();
}

}  // namespace

class TestSafetensors : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

private slots:
    void round_trip_keeps_names_shapes_values_and_metadata() {
        const std::vector<NamedTensor> tensors = {
            {"a.weight", {2, 3}, {1.f, -2.f, 3.5f, 1e-30f, -0.f, 65504.f}},
            {"scalar", {}, {42.f}},
            {"empty", {0, 4}, {}},
            {"b", {3}, {0.1f, 0.2f, 0.3f}},
        };
        const std::string file = path("round_trip.safetensors");
        write_safetensors(file, tensors, {{"note", "hello"}, {"format", "pt"}});

        std::map<std::string, std::string> metadata;
        const auto back = read_safetensors(file, &metadata);
        QCOMPARE(back.size(), tensors.size());
        for (size_t i = 0; i < tensors.size(); ++i) {
            QCOMPARE(back[i].name, tensors[i].name);
            QCOMPARE(back[i].shape, tensors[i].shape);
            QCOMPARE(back[i].data, tensors[i].data);
        }
        QCOMPARE(metadata.at("note"), std::string("hello"));
        QCOMPARE(metadata.at("format"), std::string("pt"));
        QVERIFY(!QFile::exists(QString::fromStdString(file + ".tmp")));

        const std::string bytes = read_bytes(file);
        uint64_t header_size = 0;
        for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | uint8_t(bytes[i]);
        QCOMPARE((8 + header_size) % 8, uint64_t(0));
    }

    // A language model's file carries its vocabulary; the header alone gives it back.
    void vocabulary_round_trips_through_the_metadata() {
        ModelWeights weights;
        weights.tensors = {{"w", {1}, {1.f}}};
        const std::vector<uint8_t> vocabulary = {'\n', ' ', 'A', 'z', 0xC3};
        weights.metadata[kVocabularyKey] = vocabulary_metadata(vocabulary);
        QCOMPARE(weights.metadata[kVocabularyKey], std::string("0a20417ac3"));
        const std::string file = path("vocabulary.safetensors");
        save_weights(file, weights);
        QCOMPARE(read_weights_vocabulary(file), vocabulary);
        QCOMPARE(load_weights(file).metadata.at("producer"), std::string("trainbench"));
        for (const char* bad : {"0a2", "zz", "200a"})
            EXPECT_ERROR_CONTAINS(parse_vocabulary_metadata(bad, file), "malformed \"vocabulary\"");
        weights.metadata.clear();
        save_weights(file, weights);
        QVERIFY(read_weights_vocabulary(file).empty());
    }

    // An empty tensor has no bytes and its vector's data() is null, which memcpy must never see,
    // even for 0 bytes (UBSan: "null pointer passed as argument 2, which is declared to never
    // be null" in append_floats_le). Only empty tensors, and empty ones around a full one.
    void empty_tensors_round_trip() {
        for (const std::vector<NamedTensor>& tensors :
             {std::vector<NamedTensor>{{"only", {0}, {}}},
              std::vector<NamedTensor>{{"first", {0, 3}, {}}, {"x", {1}, {3.f}}, {"last", {2, 0}, {}}}}) {
            const std::string file = path("empty.safetensors");
            write_safetensors(file, tensors);
            const auto back = read_safetensors(file);
            QCOMPARE(back.size(), tensors.size());
            for (size_t i = 0; i < tensors.size(); ++i) {
                QCOMPARE(back[i].shape, tensors[i].shape);
                QCOMPARE(back[i].data, tensors[i].data);
            }
        }
    }

    // The in-memory reader (what the fuzzer drives) agrees with the file reader, refusals too.
    void parse_from_memory_matches_the_file_reader() {
        const std::string bytes = read_bytes(kFixtureStem + ".safetensors");
        std::map<std::string, std::string> from_file_metadata, from_memory_metadata;
        const auto from_file = read_safetensors(kFixtureStem + ".safetensors", &from_file_metadata);
        const auto from_memory = parse_safetensors(bytes, "fixture", &from_memory_metadata);
        QCOMPARE(from_memory.size(), from_file.size());
        for (size_t i = 0; i < from_file.size(); ++i) {
            QCOMPARE(from_memory[i].name, from_file[i].name);
            QCOMPARE(from_memory[i].shape, from_file[i].shape);
            QCOMPARE(from_memory[i].data, from_file[i].data);
        }
        QCOMPARE(from_memory_metadata, from_file_metadata);
        EXPECT_ERROR_CONTAINS(parse_safetensors(bytes.substr(0, 5), "short"),
                              "'short' is not a valid safetensors file: it is 5 bytes long");
        EXPECT_ERROR_CONTAINS(parse_safetensors(bytes.substr(0, bytes.size() - 4), "cut"),
                              "outside the");
    }

    void writer_rejects_inconsistent_tensors() {
        EXPECT_ERROR_CONTAINS(write_safetensors(path("x.safetensors"), {{"w", {2, 2}, {1.f}}}),
                              "has shape [2, 2] but 1 values");
        EXPECT_ERROR_CONTAINS(
            write_safetensors(path("x.safetensors"), {{"w", {1}, {1.f}}, {"w", {1}, {2.f}}}),
            "appears twice");
        EXPECT_ERROR_CONTAINS(write_safetensors(path("no/such/dir/x.safetensors"), {}),
                              "no/such/dir/x.safetensors");
    }

    void overwriting_replaces_the_whole_file() {
        const std::string file = path("overwrite.safetensors");
        write_safetensors(file, {{"big", {1000}, std::vector<float>(1000, 1.f)}});
        write_safetensors(file, {{"small", {1}, {2.f}}});
        const auto back = read_safetensors(file);
        QCOMPARE(back.size(), size_t(1));
        QCOMPARE(back[0].name, std::string("small"));
    }

    void missing_file_names_the_path() {
        EXPECT_ERROR_CONTAINS(read_safetensors(path("absent.safetensors")),
                              "cannot open safetensors file '" + path("absent.safetensors") + "'");
    }

    void file_shorter_than_length_field_is_rejected() {
        const std::string file = path("short.safetensors");
        write_bytes(file, "abc");
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "3 bytes long, shorter than the 8-byte");
    }

    void header_longer_than_file_is_rejected() {
        const std::string file = path("long_header.safetensors");
        write_bytes(file, safetensors_blob("{}", "", 4096));
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "header claims 4096 bytes but only 2 follow");
    }

    void malformed_header_is_rejected() {
        const std::string file = path("malformed.safetensors");
        write_bytes(file, safetensors_blob("{\"w\": {\"dtype\": ", ""));
        const std::string message = error_of([&] { read_safetensors(file); });
        QVERIFY2(message.find("malformed JSON header") != std::string::npos, message.c_str());
        QVERIFY2(message.find(file) != std::string::npos, message.c_str());
        // A number beyond double is nlohmann's out_of_range, not a parse_error; it must be
        // refused the same way (the same escape fuzz/fuzz_config_json found in config JSON).
        write_bytes(file, safetensors_blob(R"({"w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 0]}})", ""));
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "malformed JSON header: number overflow parsing '1e999'");
    }

    void non_float32_dtype_is_rejected() {
        const std::string file = path("f16.safetensors");
        write_bytes(file, safetensors_blob(
                              R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})",
                              std::string(4, '\0')));
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "tensor 'w' has dtype F16");
    }

    void truncated_data_is_rejected() {
        const std::string file = path("truncated.safetensors");
        write_safetensors(file, {{"w", {4}, {1.f, 2.f, 3.f, 4.f}}});
        std::string bytes = read_bytes(file);
        bytes.resize(bytes.size() - 3);
        write_bytes(file, bytes);
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "outside the 13-byte data section");
    }

    void offsets_must_match_the_shape() {
        const std::string file = path("offsets.safetensors");
        write_bytes(file, safetensors_blob(
                              R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                              float_bytes({1.f, 2.f, 3.f})));
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "has shape [3] (12 bytes) but data_offsets span 8");

        write_bytes(file, safetensors_blob(
                              R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})",
                              float_bytes({1.f, 2.f, 3.f})));
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "data_offsets [8, 4]");

        write_bytes(file, safetensors_blob(R"({"w":{"dtype":"F32","shape":[1]}})",
                                           float_bytes({1.f})));
        EXPECT_ERROR_CONTAINS(read_safetensors(file), "needs dtype, shape and data_offsets");
    }

    void reads_the_pytorch_fixture() {
        const QJsonObject reference = load_reference();
        QVERIFY2(!reference.isEmpty(), "fixture JSON missing: run make_safetensors_fixture.py");
        const ModelWeights weights = load_weights(kFixtureStem + ".safetensors");
        check_weights_shape(weights, build_mlp({3, 4, 2}, Activation::relu, 2));

        const QJsonArray layers = reference["layers"].toArray();
        QCOMPARE(weights.tensors.size(), size_t(2 * layers.size()));
        for (int l = 0; l < layers.size(); ++l) {
            const NamedTensor& weight = weights.tensors[size_t(2 * l)];
            const NamedTensor& bias = weights.tensors[size_t(2 * l + 1)];
            QCOMPARE(weight.name, "layers." + std::to_string(l) + ".weight");
            const QJsonArray rows = layers[l].toObject()["weight"].toArray();
            const QJsonArray bias_values = layers[l].toObject()["bias"].toArray();
            const int64_t out = weight.shape[0], in = weight.shape[1];
            QCOMPARE(out, int64_t(rows.size()));
            for (int64_t o = 0; o < out; ++o) {
                const QJsonArray row = rows[int(o)].toArray();
                QCOMPARE(in, int64_t(row.size()));
                for (int64_t i = 0; i < in; ++i) QVERIFY(weight.data[o * in + i] == float(row[int(i)].toDouble()));
                QVERIFY(bias.data[o] == float(bias_values[int(o)].toDouble()));
            }
        }
    }

    // torch computes x @ W.T + b; matching its outputs proves the [out, in] row-major layout.
    void fixture_weights_reproduce_torch_forward_pass() {
        const QJsonObject reference = load_reference();
        const ModelWeights weights = load_weights(kFixtureStem + ".safetensors");
        const QJsonArray inputs = reference["inputs"].toArray();
        const QJsonArray outputs = reference["outputs"].toArray();
        QVERIFY(inputs.size() > 0);
        const size_t layer_count = weights.tensors.size() / 2;
        for (int s = 0; s < inputs.size(); ++s) {
            std::vector<double> x;
            for (const auto& v : inputs[s].toArray()) x.push_back(float(v.toDouble()));
            for (size_t l = 0; l < layer_count; ++l) {
                const NamedTensor& weight = weights.tensors[2 * l];
                const NamedTensor& bias = weights.tensors[2 * l + 1];
                const int64_t out = weight.shape[0], in = weight.shape[1];
                std::vector<double> y(out);
                for (int64_t o = 0; o < out; ++o) {
                    double sum = bias.data[o];
                    for (int64_t i = 0; i < in; ++i) sum += weight.data[o * in + i] * x[i];
                    y[o] = (l + 1 < layer_count) ? std::max(sum, 0.0) : sum;
                }
                x = std::move(y);
            }
            const QJsonArray want = outputs[s].toArray();
            QCOMPARE(x.size(), size_t(want.size()));
            for (size_t o = 0; o < x.size(); ++o)
                QVERIFY2(std::abs(x[o] - want[int(o)].toDouble()) < 1e-6,
                         qPrintable(QString("sample %1 output %2: %3 vs torch %4")
                                        .arg(s).arg(o).arg(x[o]).arg(want[int(o)].toDouble())));
        }
    }

    // The fixture was written by the Python reference writer; ours must produce the same bytes.
    void save_weights_matches_the_python_writer_byte_for_byte() {
        const ModelWeights weights = load_weights(kFixtureStem + ".safetensors");
        const std::string file = path("resaved.safetensors");
        save_weights(file, weights);
        QVERIFY(read_bytes(file) == read_bytes(kFixtureStem + ".safetensors"));

        const ModelWeights again = load_weights(file);
        QCOMPARE(again.tensors.size(), weights.tensors.size());
        for (size_t t = 0; t < again.tensors.size(); ++t) {
            QCOMPARE(again.tensors[t].name, weights.tensors[t].name);
            QCOMPARE(again.tensors[t].data, weights.tensors[t].data);
        }
    }

    void weights_that_do_not_fit_the_model_are_refused_naming_the_tensor() {
        const ModelDesc model = build_mlp({3, 2, 1}, Activation::relu, 0);
        const NamedTensor w0{"layers.0.weight", {2, 3}, std::vector<float>(6, 0.f)};
        const NamedTensor b0{"layers.0.bias", {2}, {0.f, 0.f}};
        const NamedTensor w1{"layers.1.weight", {1, 2}, {0.f, 0.f}};
        const NamedTensor b1{"layers.1.bias", {1}, {0.f}};
        check_weights_shape(ModelWeights{{w0, b0, w1, b1}}, model);

        EXPECT_ERROR_CONTAINS(check_weights_shape(ModelWeights{{w0, w1, b1}}, model),
                              "weights file has no tensor 'layers.0.bias' of shape [2]");
        EXPECT_ERROR_CONTAINS(check_weights_shape(ModelWeights{{w0, b0, w1, b1, {"layers.2.weight", {1, 1}, {0.f}}}}, model),
                              "weights file has tensor 'layers.2.weight' that MLP 3-2-1 does not have");
        EXPECT_ERROR_CONTAINS(check_weights_shape(ModelWeights{{w0, {"layers.0.bias", {3}, {0.f, 0.f, 0.f}}, w1, b1}}, model),
                              "weights file has 'layers.0.bias' of shape [3] but the model needs [2]");

        const std::string file = path("empty_model.safetensors");
        write_safetensors(file, {});
        EXPECT_ERROR_CONTAINS(load_weights(file), "holds no tensors");
    }

    void check_weights_shape_says_which_flag_to_change() {
        const ModelWeights weights =
            init_weights(build_mlp({2, 128, 3}, Activation::relu, 3), 1);
        check_weights_shape(weights, build_mlp({2, 128, 3}, Activation::relu, 3));

        EXPECT_ERROR_CONTAINS(check_weights_shape(weights, build_mlp({2, 64, 3}, Activation::relu, 3)),
                              "weights file has 'layers.0.weight' of shape [128, 2] but the model needs "
                              "[64, 2]: use the same --hidden");
        EXPECT_ERROR_CONTAINS(check_weights_shape(weights, build_mlp({2, 128, 128, 3}, Activation::relu, 3)),
                              "weights file has 'layers.1.weight' of shape [3, 128] but the model needs [128, 128]: "
                              "use the same --hidden as the run that saved it");
        EXPECT_ERROR_CONTAINS(check_weights_shape(weights, build_mlp({2, 128, 10}, Activation::relu, 10)),
                              "'layers.1.weight' of shape [3, 128] but the model needs [10, 128]: use the same "
                              "--hidden, and a dataset with the same features and outputs");
    }

    void gpt_weights_tie_the_lm_head_to_the_token_embedding() {
        GptShape shape;
        shape.n_layer = 1, shape.n_head = 2, shape.n_embd = 8, shape.block_size = 4, shape.vocab = 5;
        const ModelDesc model = build_gpt(shape);
        const ParamLayout layout = make_param_layout(model);
        ModelWeights weights = init_weights(model, 3);
        std::vector<float> store(static_cast<size_t>(layout.count));
        scatter_weights(model, layout, weights, store.data());
        const ModelWeights back = gather_weights(model, layout, store.data());
        QCOMPARE(back.tensors.back().name, std::string("lm_head.weight"));
        QCOMPARE(back.tensors.back().data, back.find("transformer.wte.weight")->data);
        check_weights_shape(back, model);  // both names, equal: accepted
        ModelWeights untied = back;
        untied.tensors.back().data[0] += 1.0f;
        EXPECT_ERROR_CONTAINS(check_weights_shape(untied, model), "'lm_head.weight' differs from 'transformer.wte.weight'");
    }
};

QTEST_APPLESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
