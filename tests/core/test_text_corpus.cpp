// The character-level text corpus of the GPT model: vocabulary and split, windows and their
// order, the errors of unusable files, and the King James Bible extracted from Debian's
// bible-kjv into the cache.
#include <sys/stat.h>
#include <zlib.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <functional>
#include <numeric>

#include "data/kjv_corpus.hpp"
#include "data/text_corpus.hpp"
#include "train/micro_batch_stream.hpp"
#include "core/error_expectations.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/error.hpp"

using namespace trainbench;
using namespace trainbench::data;

namespace {

const QString fixtures = QStringLiteral(TRAINBENCH_FIXTURES_DIR "/text/");

// "to be, or not to be: that is the question\n": 42 bytes, 16 distinct.
const std::string hamlet_path = (fixtures + "hamlet.txt").toStdString();
const std::string hamlet_vocabulary = "\n ,:abehinoqrstu";
const std::vector<uint8_t> hamlet_ids = {14, 10, 1, 5, 6, 2, 1, 10, 12, 1, 9, 10, 14, 1,
                                         14, 10, 1, 5, 6, 3, 1, 14, 7, 4, 14, 1, 8, 13,
                                         1, 14, 7, 6, 1, 11, 15, 6, 13, 14, 8, 10, 9, 0};


QByteArray read_file(const QString& path) {
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

void write_script(const QString& path, const QByteArray& body) {
    write_file(path, "#!/bin/sh\n" + body);
    QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
}

std::vector<uint8_t> concatenated(const TextCorpus& corpus) {
    std::vector<uint8_t> all = corpus.train;
    all.insert(all.end(), corpus.validation.begin(), corpus.validation.end());
    return all;
}

// Sets an environment variable for the lifetime of the guard, then restores it.
class EnvironmentGuard {
public:
    EnvironmentGuard(const char* name, const QByteArray& value)
        : name_(name), had_(qEnvironmentVariableIsSet(name)), old_(qgetenv(name)) {
        qputenv(name, value);
    }
    ~EnvironmentGuard() {
        if (had_) qputenv(name_, old_);
        else qunsetenv(name_);
    }

private:
    const char* name_;
    bool had_;
    QByteArray old_;
};

}  // namespace

class TestTextCorpus : public QObject {
    Q_OBJECT

private slots:
    void vocabulary_and_ids_of_a_small_text() {
        const TextCorpus corpus = load_text_corpus("text:" + hamlet_path, 4);
        QCOMPARE(corpus.name, "text:" + hamlet_path);
        QCOMPARE(corpus.path, hamlet_path);
        QCOMPARE(corpus.characters, int64_t(42));
        QCOMPARE(std::string(corpus.vocabulary.begin(), corpus.vocabulary.end()), hamlet_vocabulary);
        QCOMPARE(corpus.vocab_size(), int64_t(16));
        QCOMPARE(concatenated(corpus), hamlet_ids);
        QCOMPARE(printable_vocabulary(corpus), std::string("\\n ,:abehinoqrstu"));

        std::vector<int32_t> all(hamlet_ids.begin(), hamlet_ids.end());
        QCOMPARE(decode_tokens(corpus, all), std::string("to be, or not to be: that is the question\n"));
        QCOMPARE(encode_text(corpus, "to be,"), (std::vector<int32_t>{14, 10, 1, 5, 6, 2}));
        EXPECT_ERROR_CONTAINS(encode_text(corpus, "to bex"), "'x'");
        EXPECT_ERROR_CONTAINS(decode_tokens(corpus, std::vector<int32_t>{16}), "outside the vocabulary");
    }

    // A model fine-tuned on another text reads it with its own token ids: bytes it has no token
    // for are left out, the splits cut again, and the note names them.
    void another_text_takes_the_models_vocabulary() {
        TextCorpus corpus = corpus_from_text("to be, or not 2 be!\n", "other");
        const std::vector<uint8_t> model_vocabulary(hamlet_vocabulary.begin(), hamlet_vocabulary.end());
        const std::string note = adopt_vocabulary(corpus, model_vocabulary);
        QCOMPARE(corpus.vocabulary, model_vocabulary);
        QCOMPARE(corpus.characters, int64_t(18));  // "to be, or not  be\n"
        QCOMPARE(decode_tokens(corpus, std::vector<int32_t>(corpus.train.begin(), corpus.train.end())) +
                     decode_tokens(corpus, std::vector<int32_t>(corpus.validation.begin(), corpus.validation.end())),
                 std::string("to be, or not  be\n"));
        QCOMPARE(corpus.train.size(), size_t(16));
        QVERIFY2(note.find("left out 2 bytes of 2 symbols it lacks ('!', '2')") != std::string::npos, note.c_str());
        TextCorpus same = corpus_from_text("to be\n", "same");
        QCOMPARE(adopt_vocabulary(same, model_vocabulary), std::string());
        TextCorpus none = corpus_from_text("xyz", "none");
        EXPECT_ERROR_CONTAINS(adopt_vocabulary(none, model_vocabulary), "no character of the vocabulary");
    }

    void printable_symbols() {
        QCOMPARE(printable_symbol('a'), std::string("a"));
        QCOMPARE(printable_symbol(' '), std::string(" "));
        QCOMPARE(printable_symbol('\n'), std::string("\\n"));
        QCOMPARE(printable_symbol('\t'), std::string("\\t"));
        QCOMPARE(printable_symbol('\\'), std::string("\\\\"));
        QCOMPARE(printable_symbol(0xC3), std::string("\\xC3"));
        QCOMPARE(printable_symbol(0x7F), std::string("\\x7F"));
    }

    void split_is_first_90_percent_and_last_10() {
        const TextCorpus corpus = read_text_corpus(hamlet_path, "hamlet");
        QCOMPARE(corpus.train.size(), size_t(37));  // 42 * 9 / 10
        QCOMPARE(corpus.validation.size(), size_t(5));
        QCOMPARE(corpus.train, std::vector<uint8_t>(hamlet_ids.begin(), hamlet_ids.begin() + 37));
        QCOMPARE(corpus.validation, (std::vector<uint8_t>{14, 8, 10, 9, 0}));  // "tion\n"

        // n * 9 / 10 is nanoGPT's int(n * 0.9).
        for (int64_t n = 0; n < 200000; ++n)
            QCOMPARE(train_token_count(n), static_cast<int64_t>(static_cast<double>(n) * 0.9));
        for (int64_t n : {int64_t(4137850), int64_t(1) << 40, (int64_t(1) << 49) + 7})
            QCOMPARE(train_token_count(n), static_cast<int64_t>(static_cast<double>(n) * 0.9));

        const TextCorpus thousand = corpus_from_text(std::string(1000, 'a'), "a");
        QCOMPARE(thousand.train.size(), size_t(900));
        QCOMPARE(thousand.validation.size(), size_t(100));
        const TextCorpus seven = corpus_from_text("abcdefg", "abc");
        QCOMPARE(seven.train.size(), size_t(6));
        QCOMPARE(seven.validation, std::vector<uint8_t>{6});
    }

    void window_counts() {
        QCOMPARE(window_count(37, 4), int64_t(9));
        QCOMPARE(window_count(5, 4), int64_t(1));
        QCOMPARE(window_count(4, 4), int64_t(0));
        QCOMPARE(window_count(9, 4), int64_t(2));
        QCOMPARE(window_count(8, 4), int64_t(1));
        QCOMPARE(window_count(0, 4), int64_t(0));
        QCOMPARE(window_count(2, 1), int64_t(1));
        QCOMPARE(window_count(1, 1), int64_t(0));
    }

    void windows_hold_inputs_and_next_token_targets() {
        const TextCorpus corpus = load_text_corpus("text:" + hamlet_path, 4);
        constexpr int64_t T = 4;
        const int64_t windows = window_count(static_cast<int64_t>(corpus.train.size()), T);
        QCOMPARE(windows, int64_t(9));
        std::vector<int64_t> order(static_cast<size_t>(windows));
        window_order(order, false, 0, 1);
        // Sentinels past the end show nothing beyond count * T is written.
        std::vector<int32_t> inputs(windows * T + 3, -7), targets(windows * T + 3, -7);
        gather_windows(corpus.train, T, order.data(), windows, inputs.data(), targets.data());
        for (int64_t w = 0; w < windows; ++w) {
            for (int64_t t = 0; t < T; ++t) {
                QCOMPARE(inputs[w * T + t], int32_t(corpus.train[w * T + t]));
                QCOMPARE(targets[w * T + t], int32_t(corpus.train[w * T + t + 1]));
                if (t + 1 < T) QCOMPARE(targets[w * T + t], inputs[w * T + t + 1]);
            }
        }
        for (int64_t i = windows * T; i < windows * T + 3; ++i) {
            QCOMPARE(inputs[i], -7);
            QCOMPARE(targets[i], -7);
        }
        // The last window ends on the last training token (37 = 9 * 4 + 1).
        QCOMPARE(targets[windows * T - 1], int32_t(corpus.train.back()));
        const std::string last_input = decode_tokens(corpus, std::span(inputs).subspan(8 * T, T));
        const std::string last_target = decode_tokens(corpus, std::span(targets).subspan(8 * T, T));
        QCOMPARE(last_input, std::string(" que"));   // bytes 32..35
        QCOMPARE(last_target, std::string("ques"));  // bytes 33..36

        // Windows in any order, here 8, 0 and 3.
        const int64_t picked[3] = {8, 0, 3};
        int32_t x[3 * T], y[3 * T];
        gather_windows(corpus.train, T, picked, 3, x, y);
        QCOMPARE(decode_tokens(corpus, std::span<const int32_t>(x, T)), std::string(" que"));
        QCOMPARE(decode_tokens(corpus, std::span<const int32_t>(x + T, T)), std::string("to b"));
        QCOMPARE(decode_tokens(corpus, std::span<const int32_t>(y + T, T)), std::string("o be"));
        QCOMPARE(decode_tokens(corpus, std::span<const int32_t>(x + 2 * T, T)), std::string("t to"));  // bytes 12..15

        // The validation split: "tion\n", one window.
        QCOMPARE(window_count(static_cast<int64_t>(corpus.validation.size()), T), int64_t(1));
        const int64_t first = 0;
        gather_windows(corpus.validation, T, &first, 1, x, y);
        QCOMPARE(decode_tokens(corpus, std::span<const int32_t>(x, T)), std::string("tion"));
        QCOMPARE(decode_tokens(corpus, std::span<const int32_t>(y, T)), std::string("ion\n"));
    }

    void window_order_without_and_with_shuffle() {
        std::vector<int64_t> order(50);
        window_order(order, false, 123, 3);
        std::vector<int64_t> identity(50);
        std::iota(identity.begin(), identity.end(), int64_t{0});
        QCOMPARE(order, identity);

        std::vector<int64_t> a(50), again(50), epoch2(50), seed2(50), stream(50);
        window_order(a, true, 7, 1);
        window_order(again, true, 7, 1);
        window_order(epoch2, true, 7, 2);
        window_order(seed2, true, 8, 1);
        QCOMPARE(a, again);
        QVERIFY(a != identity);
        QVERIFY(a != epoch2);
        QVERIFY(a != seed2);
        std::vector<int64_t> sorted = epoch2;
        std::sort(sorted.begin(), sorted.end());
        QCOMPARE(sorted, identity);
        // The same order the training stream gives the samples of an epoch.
        seeded_permutation(stream, epoch_shuffle_seed(7, 1));
        QCOMPARE(a, stream);
    }

    void missing_folder_and_empty_files_are_refused() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string missing = dir.filePath("no-such.txt").toStdString();
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + missing, 8), "does not exist");
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + missing, 8), QString::fromStdString(missing));
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + dir.path().toStdString(), 8), "is a folder");
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:", 8), "names no file");
        EXPECT_ERROR_CONTAINS(load_text_corpus("words", 8), "unknown text corpus");

        write_file(dir.filePath("empty.txt"), {});
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + dir.filePath("empty.txt").toStdString(), 8), "is empty");
        QVERIFY(is_text_corpus_spec("kjv") && is_text_corpus_spec("text:/x") && !is_text_corpus_spec("spirals"));
    }

    void too_short_texts_are_refused_with_the_largest_block_size() {
        const std::string spec = "text:" + hamlet_path;  // 42 tokens: 37 train, 5 validation
        QCOMPARE(load_text_corpus(spec, 4).train.size(), size_t(37));
        // 5 validation tokens fit a block size of 4 at most.
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 5), "validation split");
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 5), "too short");
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 5), "lower --block-size to at most 4");
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 5), "at least 51 characters");
        // Too short for a training window as well.
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 64), "too short: its 42 tokens give 37 for training");
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 64), "lower --block-size to at most 4");
        EXPECT_ERROR_CONTAINS(load_text_corpus(spec, 0), "at least 1");

        // 10 * T + 1 characters is the shortest text that fits block size T.
        QTemporaryDir dir;
        write_file(dir.filePath("41.txt"), QByteArray(41, 'z'));
        write_file(dir.filePath("40.txt"), QByteArray(40, 'z'));
        QCOMPARE(load_text_corpus("text:" + dir.filePath("41.txt").toStdString(), 4).validation.size(), size_t(5));
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + dir.filePath("40.txt").toStdString(), 4), "too short");
        write_file(dir.filePath("one.txt"), "x");
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + dir.filePath("one.txt").toStdString(), 1),
                              "too short: its 1 tokens give 0 for training");
        EXPECT_ERROR_CONTAINS(load_text_corpus("text:" + dir.filePath("one.txt").toStdString(), 1),
                              "use a text of at least 11 characters");
    }

    void binary_files_are_refused_and_any_text_accepted() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const auto load = [&](const char* name) {
            return read_text_corpus(dir.filePath(name).toStdString(), name);
        };

        const QByteArray text = read_file(QString::fromStdString(hamlet_path)).repeated(20);
        gzFile gz = gzopen(dir.filePath("text.gz").toLocal8Bit().constData(), "wb");
        QVERIFY(gz != nullptr);
        QCOMPARE(gzwrite(gz, text.constData(), unsigned(text.size())), int(text.size()));
        QCOMPARE(gzclose(gz), Z_OK);
        EXPECT_ERROR_CONTAINS(load("text.gz"), "gzip-compressed");

        write_file(dir.filePath("program"), read_file("/proc/self/exe").left(4096));
        EXPECT_ERROR_CONTAINS(load("program"), "ELF");

        static const char with_nul[] = "hello\0world, a text with one NUL\n";
        write_file(dir.filePath("nul.txt"), QByteArray(with_nul, sizeof with_nul - 1));
        EXPECT_ERROR_CONTAINS(load("nul.txt"), "NUL byte at offset 5");
        EXPECT_ERROR_CONTAINS(load("nul.txt"), "looks binary");

        // Control characters: one in 100 bytes passes, two are more than 1%.
        QByteArray controls = QByteArray(98, 'a') + "\x01\n";
        write_file(dir.filePath("one_control.txt"), controls);
        QCOMPARE(load("one_control.txt").characters, int64_t(100));
        controls[0] = '\x02';
        write_file(dir.filePath("two_controls.txt"), controls);
        EXPECT_ERROR_CONTAINS(load("two_controls.txt"), "2 of its 100 bytes are control characters");

        // UTF-8, Latin-1, tabs, CRLF and form feeds are all text; the vocabulary is bytes.
        const QByteArray utf8 = QStringLiteral("naïve café — “quoted” 日本\r\n\tdone\f\n").toUtf8();
        write_file(dir.filePath("utf8.txt"), utf8.repeated(3));
        const TextCorpus corpus = load("utf8.txt");
        QCOMPARE(corpus.characters, int64_t(utf8.size() * 3));
        QVERIFY(corpus.vocabulary.back() >= 0x80);
        std::vector<int32_t> ids;
        for (uint8_t id : concatenated(corpus)) ids.push_back(id);
        QCOMPARE(QByteArray::fromStdString(decode_tokens(corpus, ids)), utf8.repeated(3));
        write_file(dir.filePath("latin1.txt"), QByteArray("na\xEFve caf\xE9\n").repeated(5));
        QCOMPARE(load("latin1.txt").characters, int64_t(55));
    }

    void bible_output_becomes_one_verse_per_line() {
        const std::string plain = read_file(fixtures + "bible_plain.txt").toStdString();
        const QByteArray wrapped = read_file(fixtures + "bible_wrapped.txt");  // bible -f -l50
        QVERIFY(!plain.empty() && !wrapped.isEmpty());
        const BibleText from_wrapped = kjv_text_from_bible_output(wrapped.toStdString());
        QCOMPARE(from_wrapped.text, plain);
        QCOMPARE(from_wrapped.verses, int64_t(5));
        QCOMPARE(from_wrapped.last_reference, std::string("Psa117:2"));

        const BibleText one_line = kjv_text_from_bible_output(
            "Ge1:1 In the beginning God created the heaven and the earth.\n"
            "1Chr1:1 Adam, Sheth, Enosh,\n\nRev22:21 The grace of our Lord Jesus Christ be with you all. Amen.");
        QCOMPARE(one_line.text, std::string("In the beginning God created the heaven and the earth.\n"
                                            "Adam, Sheth, Enosh,\n"
                                            "The grace of our Lord Jesus Christ be with you all. Amen.\n"));
        QCOMPARE(one_line.last_reference, std::string("Rev22:21"));
        // bible's pretty-printed layout is not what we parse.
        EXPECT_ERROR_CONTAINS(kjv_text_from_bible_output("\nGenesis 1\n\n  1 In the beginning\n"),
                              "not a verse");
    }

    void kjv_extraction_failures_name_the_packages() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string cache = dir.filePath("cache/kjv.txt").toStdString();
        for (const std::string& program : {dir.filePath("no-bible").toStdString(),
                                          std::string("trainbench-no-such-bible-program")}) {
            EXPECT_ERROR_CONTAINS(ensure_kjv_text(cache, program), "apt-get install bible-kjv bible-kjv-text");
            EXPECT_ERROR_CONTAINS(ensure_kjv_text(cache, program), "not installed");
        }
        // Installed but without its data: bible prints to stderr and exits non-zero.
        write_script(dir.filePath("no-data"), "echo 'Cannot open data file bible.data' >&2\nexit 255\n");
        EXPECT_ERROR_CONTAINS(ensure_kjv_text(cache, dir.filePath("no-data").toStdString()),
                              "failed (exit status 255: Cannot open data file bible.data)");
        EXPECT_ERROR_CONTAINS(ensure_kjv_text(cache, dir.filePath("no-data").toStdString()),
                              "apt-get install bible-kjv bible-kjv-text");
        // Output that stops early is not cached.
        write_script(dir.filePath("genesis-only"), "echo 'Ge1:1 In the beginning God created'\n");
        EXPECT_ERROR_CONTAINS(ensure_kjv_text(cache, dir.filePath("genesis-only").toStdString()),
                              "stopped after 1 verses at 'Ge1:1'");
        QVERIFY(!QFile::exists(QString::fromStdString(cache)));
        QVERIFY(QDir(dir.filePath("cache")).entryList(QDir::Files).isEmpty());

        // An existing cache is used without running anything.
        write_script(dir.filePath("tiny-bible"),
                     "echo 'Ge1:1 In the beginning'\necho 'Rev22:21 Amen.'\n");
        QCOMPARE(ensure_kjv_text(cache, dir.filePath("tiny-bible").toStdString()), cache);
        QCOMPARE(read_file(QString::fromStdString(cache)), QByteArray("In the beginning\nAmen.\n"));
        QCOMPARE(ensure_kjv_text(cache, dir.filePath("no-bible").toStdString()), cache);
        QCOMPARE(QDir(dir.filePath("cache")).entryList(QDir::Files), QStringList{"kjv.txt"});
    }

    void cache_folder_follows_xdg() {
        {
            EnvironmentGuard xdg("XDG_CACHE_HOME", "/somewhere/cache");
            QCOMPARE(default_kjv_cache_path(), std::string("/somewhere/cache/trainbench/kjv.txt"));
        }
        EnvironmentGuard home("HOME", "/home/reader");
        {
            EnvironmentGuard relative("XDG_CACHE_HOME", "relative/cache");  // ignored, as XDG says
            QCOMPARE(default_kjv_cache_path(), std::string("/home/reader/.cache/trainbench/kjv.txt"));
        }
        EnvironmentGuard unset("XDG_CACHE_HOME", "");
        QCOMPARE(default_kjv_cache_path(), std::string("/home/reader/.cache/trainbench/kjv.txt"));
    }

    void kjv_is_extracted_once_into_the_cache() {
        if (QStandardPaths::findExecutable("bible").isEmpty())
            QSKIP("the KJV is not tested: no 'bible' program (apt-get install bible-kjv bible-kjv-text)");
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        EnvironmentGuard xdg("XDG_CACHE_HOME", dir.path().toLocal8Bit());
        const QString cache = dir.filePath("trainbench/kjv.txt");
        QCOMPARE(QString::fromStdString(default_kjv_cache_path()), cache);
        QVERIFY(!QFile::exists(cache));

        QElapsedTimer timer;
        timer.start();
        const TextCorpus corpus = load_text_corpus("kjv", 256);
        const qint64 first_ms = timer.elapsed();
        QCOMPARE(corpus.name, std::string("kjv"));
        QCOMPARE(QString::fromStdString(corpus.path), cache);
        QVERIFY(QFile::exists(cache));
        QCOMPARE(QDir(dir.filePath("trainbench")).entryList(QDir::Files | QDir::Hidden),
                 QStringList{"kjv.txt"});  // no temporary left behind

        const QByteArray text = read_file(cache);
        QCOMPARE(int64_t(text.size()), corpus.characters);
        QVERIFY2(corpus.characters > 4000000 && corpus.characters < 4400000,
                 qPrintable(QString::number(corpus.characters)));
        QVERIFY(text.startsWith("In the beginning God created the heaven and the earth.\n"
                                "And the earth was without form, and void;"));
        QVERIFY(text.endsWith("The grace of our Lord Jesus Christ be with you all. Amen.\n"));
        QCOMPARE(text.count('\n'), qsizetype(31102));  // one line per verse
        const QRegularExpression reference(QStringLiteral("(^|\\n)[1-3]?[A-Za-z]+[0-9]+:[0-9]+"));
        QVERIFY(!reference.match(QString::fromLatin1(text)).hasMatch());
        QVERIFY(corpus.vocab_size() >= 60 && corpus.vocab_size() <= 70);
        QCOMPARE(decode_tokens(corpus, std::vector<int32_t>(corpus.train.begin(), corpus.train.begin() + 16)),
                 std::string("In the beginning"));
        qInfo("KJV: %lld characters, %lld symbols \"%s\", extracted and loaded in %lld ms",
              static_cast<long long>(corpus.characters), static_cast<long long>(corpus.vocab_size()),
              printable_vocabulary(corpus).c_str(), static_cast<long long>(first_ms));
        qInfo("KJV begins: %s", qPrintable(QString::fromLatin1(text.left(200)).replace('\n', "\\n")));

        struct stat before{}, after{};
        QCOMPARE(stat(cache.toLocal8Bit().constData(), &before), 0);
        timer.restart();
        const TextCorpus again = load_text_corpus("kjv", 256);
        const qint64 second_ms = timer.elapsed();
        QCOMPARE(stat(cache.toLocal8Bit().constData(), &after), 0);
        // Not rewritten: a new extraction would rename a new file (new inode) into place.
        QCOMPARE(after.st_ino, before.st_ino);
        QCOMPARE(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
        QCOMPARE(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
        QCOMPARE(again.train, corpus.train);
        QCOMPARE(again.validation, corpus.validation);
        qInfo("KJV from the cache: %lld ms", static_cast<long long>(second_ms));
    }
};

QTEST_APPLESS_MAIN(TestTextCorpus)
#include "test_text_corpus.moc"
