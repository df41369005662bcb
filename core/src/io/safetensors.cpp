#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "trainbench/error.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

using Json = nlohmann::ordered_json;

namespace {

// The reference implementation refuses headers above 100 MB; a bigger claim means a corrupt
// length field, and reading it would only waste memory.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

static_assert(sizeof(float) == 4, "safetensors F32 is IEEE-754 binary32");
constexpr bool kHostIsLittleEndian = std::endian::native == std::endian::little;

uint32_t byteswap32(uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

void append_u64_le(std::string& out, uint64_t value) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
}

uint64_t read_u64_le(const unsigned char* bytes) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
    return value;
}

// An empty tensor (a zero in its shape) has no bytes; its vector's data() may then be null,
// and memcpy from null is undefined even for 0 bytes.
void append_floats_le(std::string& out, const std::vector<float>& values) {
    if (values.empty()) return;
    const size_t start = out.size();
    out.resize(start + values.size() * sizeof(float));
    std::memcpy(out.data() + start, values.data(), values.size() * sizeof(float));
    if constexpr (!kHostIsLittleEndian) {
        for (size_t i = 0; i < values.size(); ++i) {
            uint32_t word;
            std::memcpy(&word, out.data() + start + 4 * i, 4);
            word = byteswap32(word);
            std::memcpy(out.data() + start + 4 * i, &word, 4);
        }
    }
}

std::vector<float> floats_from_le(const char* bytes, size_t count) {
    std::vector<float> values(count);
    if (count == 0) return values;  // data() may be null: see append_floats_le
    std::memcpy(values.data(), bytes, count * sizeof(float));
    if constexpr (!kHostIsLittleEndian) {
        for (auto& v : values) v = std::bit_cast<float>(byteswap32(std::bit_cast<uint32_t>(v)));
    }
    return values;
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

// Element count, or -1 when a dimension is negative or the product overflows.
int64_t element_count(const std::vector<int64_t>& shape) {
    int64_t count = 1;
    for (int64_t dim : shape) {
        if (dim < 0) return -1;
        if (dim != 0 && count > INT64_MAX / 4 / dim) return -1;
        count *= dim;
    }
    return count;
}

void write_all_or_throw(int fd, const std::string& bytes, const std::string& tmp_path) {
    size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
        if (n < 0) {
            if (errno == EINTR) continue;
            const std::string reason = std::strerror(errno);
            ::close(fd);
            std::remove(tmp_path.c_str());
            throw Error("cannot write '" + tmp_path + "': " + reason);
        }
        written += static_cast<size_t>(n);
    }
}

// Checks the 8-byte header length at the start of `bytes` against the file's size and returns
// it; `bytes` holds at least the first min(file_size, 8) bytes of the file.
uint64_t check_header_length(std::string_view bytes, uint64_t file_size, const std::string& path) {
    const std::string bad = "'" + path + "' is not a valid safetensors file: ";
    if (file_size < 8)
        throw Error(bad + "it is " + std::to_string(file_size) +
                    " bytes long, shorter than the 8-byte header length");
    const uint64_t header_size = read_u64_le(reinterpret_cast<const unsigned char*>(bytes.data()));
    if (header_size > kMaxHeaderBytes || header_size > file_size - 8)
        throw Error(bad + "the header claims " + std::to_string(header_size) +
                    " bytes but only " + std::to_string(file_size - 8) +
                    " follow (truncated or not safetensors)");
    return header_size;
}

}  // namespace

namespace {
// The rename is durable only once the folder's entry is on disk: without this a power cut
// could bring back the previous checkpoint, or none, under the name. A file system that cannot
// sync a folder (EINVAL) keeps the rename as it is.
void sync_folder_of(const std::string& path) {
    std::string folder = std::filesystem::path(path).parent_path().string();
    if (folder.empty()) folder = ".";
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot write '" + path + "': cannot open its folder: " + std::strerror(errno));
    const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
    const int error_number = errno;
    ::close(fd);
    if (!synced) throw Error("cannot write '" + path + "': " + std::strerror(error_number));
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    Json header = Json::object();
    if (!metadata.empty()) {
        Json meta = Json::object();
        for (const auto& [key, value] : metadata) meta[key] = value;
        header[kMetadataKey] = meta;
    }
    std::set<std::string> names;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name.empty() || t.name == kMetadataKey)
            throw Error("cannot write '" + path + "': invalid tensor name '" + t.name + "'");
        if (!names.insert(t.name).second)
            throw Error("cannot write '" + path + "': tensor name '" + t.name +
                        "' appears twice");
        const int64_t count = element_count(t.shape);
        if (count < 0 || static_cast<uint64_t>(count) != t.data.size())
            throw Error("cannot write '" + path + "': tensor '" + t.name + "' has shape " +
                        shape_text(t.shape) + " but " + std::to_string(t.data.size()) +
                        " values");
        const uint64_t end = offset + t.data.size() * sizeof(float);
        header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
        offset = end;
    }

    std::string header_text = header.dump();
    // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
    header_text.append((8 - header_text.size() % 8) % 8, ' ');

    std::string bytes;
    bytes.reserve(8 + header_text.size() + offset);
    append_u64_le(bytes, header_text.size());
    bytes += header_text;
    for (const auto& t : tensors) append_floats_le(bytes, t.data);

    const std::string tmp_path = path + ".tmp";
    const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        throw Error("cannot write '" + path + "': " + std::strerror(errno) +
                    " (check that the folder exists and is writable)");
    write_all_or_throw(fd, bytes, tmp_path);
    // fsync before rename: otherwise a power cut can leave the new name pointing at no data.
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const std::string reason = std::strerror(errno);
        std::remove(tmp_path.c_str());
        throw Error("cannot write '" + path + "': " + reason);
    }
    if (std::rename(tmp_path.c_str(), path.c_str()) != 0) {
        const std::string reason = std::strerror(errno);
        std::remove(tmp_path.c_str());
        throw Error("cannot write '" + path + "': " + reason);
    }
    sync_folder_of(path);
}

namespace {

// A safetensors file opened and its 8-byte length field read and checked against the file's
// size, so that a large file that is not safetensors is refused without reading it; the stream
// stands after the field.
struct OpenedSafetensors {
    std::ifstream in;
    uint64_t file_size = 0;
    std::string length_field;
    uint64_t header_size = 0;
};

void read_exactly(std::ifstream& in, char* into, uint64_t count, const std::string& path) {
    in.read(into, static_cast<std::streamsize>(count));
    if (!in) throw Error("cannot read safetensors file '" + path + "': read failed");
}

OpenedSafetensors open_safetensors(const std::string& path) {
    OpenedSafetensors file;
    file.in.open(path, std::ios::binary);
    if (!file.in) throw Error("cannot open safetensors file '" + path + "': " + std::strerror(errno));
    std::error_code size_error;
    file.file_size = std::filesystem::file_size(path, size_error);
    if (size_error)
        throw Error("cannot read safetensors file '" + path + "': " + size_error.message());
    file.length_field.assign(std::min<uint64_t>(file.file_size, 8), '\0');
    read_exactly(file.in, file.length_field.data(), file.length_field.size(), path);
    file.header_size = check_header_length(file.length_field, file.file_size, path);
    return file;
}

}  // namespace

std::vector<NamedTensor> read_safetensors(const std::string& path,
                                          std::map<std::string, std::string>* metadata) {
    OpenedSafetensors file = open_safetensors(path);
    std::string bytes = std::move(file.length_field);
    bytes.resize(file.file_size);
    read_exactly(file.in, bytes.data() + 8, file.file_size - 8, path);
    return parse_safetensors(bytes, path, metadata);
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
    OpenedSafetensors file = open_safetensors(path);
    std::string header_text(file.header_size, '\0');
    read_exactly(file.in, header_text.data(), file.header_size, path);
    std::map<std::string, std::string> metadata;
    const Json header = Json::parse(header_text, nullptr, false);
    if (header.is_discarded() || !header.is_object())
        throw Error("'" + path + "' is not a valid safetensors file: malformed JSON header");
    const auto found = header.find(kMetadataKey);
    if (found == header.end() || !found->is_object()) return metadata;
    for (const auto& [key, value] : found->items())
        if (value.is_string()) metadata[key] = value.get<std::string>();
    return metadata;
}

std::vector<NamedTensor> parse_safetensors(std::string_view bytes, const std::string& path,
                                           std::map<std::string, std::string>* metadata) {
    const uint64_t header_size = check_header_length(bytes, bytes.size(), path);
    const std::string bad = "'" + path + "' is not a valid safetensors file: ";
    const std::string_view header_text = bytes.substr(8, header_size);
    const std::string_view data = bytes.substr(8 + header_size);
    const uint64_t data_size = data.size();

    Json header;
    try {
        header = Json::parse(header_text);
    } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
        std::string why = e.what();
        const auto tag_end = why.find("] ");
        if (tag_end != std::string::npos) why = why.substr(tag_end + 2);
        throw Error(bad + "malformed JSON header: " + why);
    }
    if (!header.is_object()) throw Error(bad + "the JSON header is not an object");

    std::vector<NamedTensor> tensors;
    for (const auto& [name, entry] : header.items()) {
        if (name == kMetadataKey) {
            if (!entry.is_object()) throw Error(bad + "__metadata__ is not an object");
            for (const auto& [key, value] : entry.items()) {
                if (!value.is_string())
                    throw Error(bad + "__metadata__ value of '" + key + "' is not a string");
                if (metadata) (*metadata)[key] = value.get<std::string>();
            }
            continue;
        }
        const std::string where = bad + "tensor '" + name + "' ";
        if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
            !entry.contains("data_offsets"))
            throw Error(where + "needs dtype, shape and data_offsets");
        const Json& dtype = entry["dtype"];
        if (!dtype.is_string()) throw Error(where + "has a dtype that is not a string");
        if (dtype != "F32")
            throw Error(where + "has dtype " + dtype.get<std::string>() +
                        "; only F32 (float32) is supported, convert it with "
                        "tensor.float() before saving");

        const Json& shape_json = entry["shape"];
        if (!shape_json.is_array()) throw Error(where + "has a shape that is not an array");
        NamedTensor tensor;
        tensor.name = name;
        for (const auto& dim : shape_json) {
            if (!dim.is_number_unsigned() || dim.get<uint64_t>() > uint64_t(INT64_MAX))
                throw Error(where + "has a shape entry that is not a non-negative integer");
            tensor.shape.push_back(dim.get<int64_t>());
        }
        const int64_t count = element_count(tensor.shape);
        if (count < 0) throw Error(where + "has a shape too large to address");

        const Json& offsets = entry["data_offsets"];
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
            !offsets[1].is_number_unsigned())
            throw Error(where + "needs data_offsets as [begin, end]");
        const uint64_t begin = offsets[0].get<uint64_t>();
        const uint64_t end = offsets[1].get<uint64_t>();
        if (begin > end || end > data_size)
            throw Error(where + "has data_offsets [" + std::to_string(begin) + ", " +
                        std::to_string(end) + "] outside the " + std::to_string(data_size) +
                        "-byte data section (truncated file?)");
        if (end - begin != static_cast<uint64_t>(count) * sizeof(float))
            throw Error(where + "has shape " + shape_text(tensor.shape) + " (" +
                        std::to_string(count * 4) + " bytes) but data_offsets span " +
                        std::to_string(end - begin) + " bytes");
        tensor.data = floats_from_le(data.data() + begin, static_cast<size_t>(count));
        tensors.push_back(std::move(tensor));
    }
    return tensors;
}

}  // namespace trainbench
