#include "exec/zero_sharding.hpp"

#include <algorithm>

#include "optim/gradient_norm.hpp"
#include "parallel/collective_timer.hpp"
#include "parallel/process_group.hpp"
#include "parallel/shard_range.hpp"

namespace trainbench {

void reduce_gradient_bucket(const GraphPlan& plan, const GraphPlan::GradientBucket& bucket, float* bucket_block,
                            float* shard_gradients, GradientWrite write, ProcessGroup& group, double& collective_ms) {
    float* values = bucket_block + bucket.offset;
    {
        const CollectiveTimer timer(collective_ms);
        group.reduce_scatter(values, bucket.counts);
    }
    // The part arrives at the start of the bucket: each parameter's overlap with the shard, in
    // flat-store order.
    const ShardRange shard = plan.optimizer_shard;
    const float* next = values;
    for (int p : bucket.params) {
        const ShardRange part = overlap(plan.param_range(p), shard);
        const int64_t count = part.size();
        if (count == 0) continue;
        float* into = shard_gradients + (part.begin - shard.begin);
        if (write == GradientWrite::overwrite) {
            std::copy(next, next + count, into);
        } else {
#pragma omp simd
            for (int64_t i = 0; i < count; ++i) into[i] += next[i];
        }
        next += count;
    }
}

void reduce_empty_buckets(const GraphPlan& plan, float* bucket_block, float* shard_gradients, GradientWrite write,
                          ProcessGroup& group, double& collective_ms) {
    for (const GraphPlan::GradientBucket& bucket : plan.gradient_buckets) {
        std::fill(bucket_block + bucket.offset, bucket_block + bucket.offset + bucket.floats, 0.0f);
        reduce_gradient_bucket(plan, bucket, bucket_block, shard_gradients, write, group, collective_ms);
    }
}

void gather_shards(const float* slice, ShardRange shard, float* whole, int64_t n, ProcessGroup& group) {
    std::copy(slice, slice + shard.size(), whole + shard.begin);
    group.all_gather(whole, n);
}

void sum_sharded_gradient(const GraphPlan& plan, ShardRange tensor, float* bucket_block, float* shard_gradients,
                          ProcessGroup& holders) {
    const ShardRange shard = plan.optimizer_shard;
    for (int64_t begin = tensor.begin; begin < tensor.end; begin += plan.bucket_floats) {
        const ShardRange chunk{begin, std::min(tensor.end, begin + plan.bucket_floats)};
        const ShardRange part = overlap(chunk, shard);
        std::fill(bucket_block, bucket_block + chunk.size(), 0.0f);
        if (part.size() > 0)
            std::copy_n(shard_gradients + (part.begin - shard.begin), part.size(), bucket_block + (part.begin - chunk.begin));
        holders.sum(bucket_block, chunk.size());
        if (part.size() > 0)
            std::copy_n(bucket_block + (part.begin - chunk.begin), part.size(), shard_gradients + (part.begin - shard.begin));
    }
}

double sharded_gradient_norm_squared(const GraphPlan& plan, ShardRange tensor, const float* shard_gradients,
                                     ProcessGroup& group) {
    const ShardRange part = overlap(tensor, plan.optimizer_shard);
    double norm_squared =
        part.size() > 0 ? gradient_norm_squared(shard_gradients + (part.begin - plan.optimizer_shard.begin), part.size()) : 0.0;
    group.sum(&norm_squared, 1);
    return norm_squared;
}

}  // namespace trainbench
