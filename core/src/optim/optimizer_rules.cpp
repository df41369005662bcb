#include "optim/optimizer_rules.hpp"

namespace trainbench {

OptimizerScalars optimizer_scalars(const OptimizerConfig& config, double lr, int64_t step) {
    OptimizerScalars s;
    const double weight_decay = config.resolved_weight_decay();
    s.decay = weight_decay != 0.0;
    s.weight_decay = as_float(weight_decay);
    s.eps = as_float(config.resolved_eps());
    s.neg_lr = as_float(-lr);
    switch (config.kind) {
        case OptimizerKind::sgd:
            s.use_momentum = config.momentum != 0.0;
            s.first_step = step == 1;
            s.nesterov = config.nesterov;
            s.momentum = as_float(config.momentum);
            s.one_minus_dampening = as_float(1.0 - config.dampening);
            break;
        case OptimizerKind::adam:
        case OptimizerKind::adamw: {
            s.decoupled = config.kind == OptimizerKind::adamw;
            s.shrink_factor = as_float(1.0 - lr * weight_decay);
            const double steps = static_cast<double>(step);
            const double bias_correction1 = 1.0 - std::pow(config.beta1, steps);
            const double bias_correction2 = 1.0 - std::pow(config.beta2, steps);
            s.neg_step_size = as_float(-(lr / bias_correction1));
            s.bias_correction2_sqrt = as_float(std::sqrt(bias_correction2));
            s.beta1 = as_float(config.beta1);
            s.beta2 = as_float(config.beta2);
            s.one_minus_beta1 = as_float(1.0 - config.beta1);
            s.one_minus_beta2 = as_float(1.0 - config.beta2);
            break;
        }
        case OptimizerKind::rmsprop:
            s.centered = config.centered;
            s.use_momentum = config.momentum > 0.0;
            s.momentum = as_float(config.momentum);
            s.alpha = as_float(config.alpha);
            s.one_minus_alpha = as_float(1.0 - config.alpha);
            break;
        case OptimizerKind::adagrad:
            s.neg_lr = as_float(-(lr / (1.0 + static_cast<double>(step - 1) * config.lr_decay)));
            break;
    }
    return s;
}

}  // namespace trainbench
