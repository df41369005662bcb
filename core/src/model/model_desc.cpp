#include "model/model_desc.hpp"

namespace trainbench {

int64_t ParamDesc::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

int64_t ModelDesc::parameter_count() const {
    int64_t n = 0;
    for (const auto& p : params) n += p.numel();
    return n;
}

int64_t ModelDesc::trainable_parameter_count() const {
    int64_t n = 0;
    for (const auto& p : params)
        if (p.trainable) n += p.numel();
    return n;
}

int ModelDesc::find_param(const std::string& name) const {
    for (size_t i = 0; i < params.size(); ++i)
        if (params[i].name == name || (!params[i].alias.empty() && params[i].alias == name)) return static_cast<int>(i);
    return -1;
}

}  // namespace trainbench
