#pragma once
#include <memory>
#include <stdexcept>
#include <string>

namespace trainbench {

// Every user-facing failure of the engine is an Error whose what() is one line that names
// what is wrong and how to fix it; front ends print it as is.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message, const std::string& key = {})
        : std::runtime_error(message), key_(std::make_shared<const std::string>(key)) {}
    explicit Error(const char* message) : Error(std::string(message)) {}

    // The config key of the field the error is about ("batch_size", "optimizer.lr"; see
    // config_fields()), so a form can show the message beside that control; empty when the
    // error is about no single field.
    const std::string& key() const noexcept { return *key_; }

private:
    // Shared, so that copying an exception cannot throw (as std::runtime_error's message).
    std::shared_ptr<const std::string> key_;
};

}  // namespace trainbench
