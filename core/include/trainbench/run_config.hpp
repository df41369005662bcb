#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainbench {

enum class Activation { relu, gelu, tanh, sigmoid };
enum class OptimizerKind { sgd, adam, adamw, rmsprop, adagrad };
// Decay shape after warmup; warmup_steps > 0 combines a linear warmup with any of them.
enum class ScheduleKind { constant, linear, cosine, step };
enum class Precision { fp32, fp16, bf16 };
enum class ModelFamily { mlp, gpt, cnn };
// --fused: element-wise ops folded into their neighbours' kernels (what torch.compile does), or
// each run as its own pass over memory (eager PyTorch).
enum class FusedKernels { on, off };
// --cpu-products: the library the CPU engine's matrix products run in. automatic: oneDNN where
// it is faster than Eigen on this CPU (its bf16 kernels where the CPU multiplies bf16 natively,
// AMX or AVX512_BF16; its fp32 kernels where it has AVX-512), Eigen elsewhere.
enum class CpuProducts { automatic, eigen, onednn };
// --lora-base: how a LoRA fine-tune stores the frozen base weights of its adapted layers: in the
// run's precision (full), or as QLoRA's 4-bit NormalFloat with double quantization (nf4).
enum class LoraBase { full, nf4 };
// Model parallelism (--pipeline-schedule): the order in which a pipeline stage runs the update's
// micro-batches. gpipe: all forwards, then all backwards; one_f_one_b: PipeDream-flush, a
// backward after each forward once the pipeline is full, at most P micro-batches in flight.
enum class PipelineSchedule { gpipe, one_f_one_b };

// Hyper-parameters follow torch.optim's names and defaults. Unset optionals resolve to the
// chosen optimizer's PyTorch default (see resolved_*()).
struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::adam;
    std::optional<double> lr;            // sgd 1e-3, adam/adamw 1e-3, rmsprop/adagrad 1e-2
    double momentum = 0.0;               // sgd, rmsprop
    double dampening = 0.0;              // sgd
    bool nesterov = false;               // sgd
    std::optional<double> weight_decay;  // 0, except adamw 1e-2
    double beta1 = 0.9;                  // adam, adamw
    double beta2 = 0.999;                // adam, adamw
    std::optional<double> eps;           // 1e-8, except adagrad 1e-10
    double alpha = 0.99;                 // rmsprop smoothing
    bool centered = false;               // rmsprop
    double lr_decay = 0.0;               // adagrad
    double initial_accumulator_value = 0.0;  // adagrad

    double resolved_lr() const;
    double resolved_weight_decay() const;
    double resolved_eps() const;
};

struct ScheduleConfig {
    ScheduleKind kind = ScheduleKind::constant;
    int64_t warmup_steps = 0;   // linear ramp from lr/warmup to lr over this many updates
    int64_t decay_every = 1000; // step: multiply by decay_gamma every decay_every updates
    double decay_gamma = 0.1;   // step
    double min_lr = 0.0;        // cosine and linear end here
};

// Everything a run needs; filled from the GUI's controls, a JSON file or CLI flags.
struct RunConfig {
    // Data
    std::string dataset = "spirals";  // spirals|moons|blobs|sine|fashion-mnist|csv:PATH|idx:DIR|kjv|text:PATH
    int64_t synthetic_samples = 4000;  // rows generated for the synthetic sets
    double val_fraction = 0.1;         // held out where the data has no test set
    bool shuffle = true;
    uint64_t seed = 0;

    // Model
    ModelFamily model = ModelFamily::mlp;
    std::vector<int64_t> hidden = {128, 128};  // mlp; cnn: the Linear layers after the convolutions
    Activation activation = Activation::relu;  // mlp, cnn
    std::vector<int64_t> channels = {32, 64};  // cnn: output channels of each convolution block
    int64_t n_layer = 4;                       // gpt: transformer blocks
    int64_t n_head = 4;                        // gpt: attention heads (divides n_embd)
    int64_t n_embd = 128;                      // gpt: embedding width
    int64_t block_size = 128;                  // gpt: context length in tokens
    // gpt: LoRA fine-tuning (PEFT's LoraConfig): rank 0 trains every weight; otherwise the base
    // weights are frozen and each target Linear gets adapters A [rank, in], B [out, rank] whose
    // product, scaled by alpha / rank, is added to its output.
    int64_t lora_rank = 0;
    double lora_alpha = 8.0;
    std::string lora_targets = "attn,mlp";     // c_attn, c_proj, c_fc, attn, mlp (comma-separated)
    LoraBase lora_base = LoraBase::full;       // nf4: QLoRA (precision/nf4.hpp)
    bool dora = false;                         // DoRA: a trainable magnitude per adapted row (nn/dora.hpp)

    // Batching: batch_size samples per optimizer update (the global batch), split into
    // step_size contiguous micro-batches whose gradients are accumulated.
    int64_t batch_size = 64;
    int64_t step_size = 2;

    OptimizerConfig optimizer;
    ScheduleConfig schedule;
    double clip_grad_norm = 0.0;  // 0 = off
    int64_t epochs = 5;  // the default example (spirals) reaches ~95% in five
    int64_t max_steps = 0;        // 0 = no limit besides epochs
    int64_t eval_every = 0;       // also validate every N updates within an epoch; 0 = at epoch ends only
    int64_t eval_samples = 0;     // validation samples per evaluation, evenly spaced; 0 = the whole split
    // Language models: text generated at each evaluation (characters after a newline prompt),
    // drawn at this temperature with this seed (the same seed each time, so samples compare).
    int64_t sample_chars = 0;
    double sample_temperature = 1.0;
    uint64_t sample_seed = 0;

    // Where and how
    std::string device = "cpu";   // cpu | cuda | cuda:N
    Precision precision = Precision::fp32;
    int threads = 0;              // 0 = all cores (shared among the processes)
    // Data parallelism: processes that each train on 1/processes of every global batch and sum
    // their gradients before the update (MPI; trainbench-cli relaunches itself under mpirun).
    int64_t processes = 1;
    // ZeRO stage over those processes: 0 every process keeps all optimizer state; 1 each keeps
    // and updates 1/processes of it and gathers the parameters after the update; 2 also reduces
    // the gradients with a reduce-scatter into each process's slice.
    int64_t zero = 0;
    // Model parallelism (model/pipeline_stages.hpp): the model cut into this many stages, each run
    // by its own process, the update's step_size micro-batches flowing through them in
    // pipeline_schedule's order. processes = pipeline_stages x data-parallel copies.
    int64_t pipeline_stages = 1;
    PipelineSchedule pipeline_schedule = PipelineSchedule::one_f_one_b;

    // Efficiency techniques
    int64_t memory_limit_bytes = 0;  // 0 = no budget
    bool auto_fit = false;           // raise step_size until the plan fits memory_limit_bytes
    bool gradient_checkpointing = false;
    FusedKernels fused = FusedKernels::on;
    CpuProducts cpu_products = CpuProducts::automatic;
    int64_t empty_cache_steps = 0;   // release cached blocks every N updates; 0 = never
    int64_t prefetch = 0;            // micro-batches prepared ahead on a loader thread; 0 = inline
    bool preload_device = false;     // cuda: keep the whole training set on the device

    // Files
    std::string init_weights;        // safetensors to start from
    std::string save_weights;        // safetensors written at the end (LoRA: merged into the base)
    std::string save_adapters;       // LoRA: the adapters alone, named as PEFT saves them
    std::string metrics_out;         // CSV, one row per update
    int64_t checkpoint_every = 0;    // updates between checkpoints; 0 = none
    std::string checkpoint_dir;
    std::string resume_dir;          // continue from the latest checkpoint in this folder
};

std::string to_string(Activation);
std::string to_string(OptimizerKind);
std::string to_string(ScheduleKind);
std::string to_string(Precision);
std::string to_string(ModelFamily);
std::string to_string(FusedKernels);
std::string to_string(CpuProducts);
// The processes that share each global batch (data parallelism): --processes over the pipeline's
// stages, which each hold a part of the model.
inline int64_t data_parallel_processes(const RunConfig& c) { return c.processes / (c.pipeline_stages > 0 ? c.pipeline_stages : 1); }
std::string to_string(LoraBase);
std::string to_string(PipelineSchedule);
// Parsers throw Error naming the field and the accepted values.
Activation parse_activation(const std::string&);
OptimizerKind parse_optimizer(const std::string&);
ScheduleKind parse_schedule(const std::string&);
Precision parse_precision(const std::string&);
ModelFamily parse_model_family(const std::string&);
FusedKernels parse_fused_kernels(const std::string&);
CpuProducts parse_cpu_products(const std::string&);
LoraBase parse_lora_base(const std::string&);
PipelineSchedule parse_pipeline_schedule(const std::string&);
// Every name the parser of Enum accepts, in declaration order: the choices of a form's list.
template <class Enum>
std::vector<std::string> names_of();
template <> std::vector<std::string> names_of<Activation>();
template <> std::vector<std::string> names_of<OptimizerKind>();
template <> std::vector<std::string> names_of<ScheduleKind>();
template <> std::vector<std::string> names_of<Precision>();
template <> std::vector<std::string> names_of<ModelFamily>();
template <> std::vector<std::string> names_of<FusedKernels>();
template <> std::vector<std::string> names_of<CpuProducts>();
template <> std::vector<std::string> names_of<LoraBase>();
template <> std::vector<std::string> names_of<PipelineSchedule>();

// The defaults of a model family: RunConfig{} for the MLP; for the GPT, nanoGPT's recipe
// (AdamW lr 1e-3, betas 0.9/0.95, weight decay 0.1, clipping at 1.0, 100 warmup updates then
// cosine to 1e-4) on the KJV corpus, batch 32, one epoch, 256 validation windows and a
// 200-character sample at temperature 0.8 every 100 updates.
RunConfig default_config(ModelFamily family);
// The example the app opens with and `trainbench --run` trains (headless through the CLI
// without a display): a small character-level GPT on the King James Bible that takes one to
// two minutes on 2 CPU cores and visibly learns (samples turn into words).
RunConfig default_example_config();
// "512MiB", "2GiB", "1.5GB", "1000000" -> bytes; throws Error on anything else.
int64_t parse_byte_size(const std::string&);
std::string format_bytes(int64_t bytes);

// Throws Error naming the field when the configuration cannot run (step_size 0, step_size >
// batch_size, NaN learning rate, empty hidden width, unknown device, ...); its key() is the
// field's config key. Ranges come from config_fields(); fields of the other model family are
// not checked. Does not touch files.
void validate(const RunConfig&);

}  // namespace trainbench
