# Shared by the CPU benchmarks (run_cpu_bench.sh, gpt_throughput.sh); source it, then call:
#   require_torch NAME      exit 1 with the install command unless Debian's PyTorch imports
#   load_average            the 1, 5 and 15 minute load averages
#   wait_for_load_below L   wait (up to 10 minutes) until the 1-minute load is below L
python=/usr/bin/python3  # Debian's interpreter: the one with python3-torch

require_torch() {
    if ! "$python" -c 'import torch' 2>/dev/null; then
        echo "$1: PyTorch is missing; install it with: sudo apt-get install -y python3-torch libopenblas0-pthread" >&2
        exit 1
    fi
}

load_average() { cut -d' ' -f1-3 /proc/loadavg; }

# Other work on the machine distorts every figure.
wait_for_load_below() {
    local _
    for _ in $(seq 60); do
        awk -v limit="$1" '{ exit !($1 < limit) }' /proc/loadavg && return 0
        echo "waiting for load < $1 (now $(load_average))" >&2
        sleep 10
    done
}
