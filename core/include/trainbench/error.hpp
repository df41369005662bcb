#pragma once
#include <stdexcept>
#include <string>

namespace trainbench {

// Every user-facing failure of the engine is an Error whose what() is one line that names
// what is wrong and how to fix it; front ends print it as is.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace trainbench
