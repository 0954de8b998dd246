#!/usr/bin/env bash
# The GPU check: on a fresh machine with an NVIDIA GPU and a CUDA build of torch already installed (no network
# needed), install this checkout without its dependencies, build the native core, run the GPU-relevant tests
# on the CUDA vendor, train compiled and autocompared, and benchmark against native CUDA; in under 8 minutes.
#
#   bash benchmarks/gpu_check.sh            # results in $OUT if set, else ./gpu_check_results
#   bash benchmarks/gpu_check.sh --help
#
# Writes to that directory: summary.txt (one line per step: status, seconds), install.log, build.log, pytest.txt,
# native.txt, eager.txt, compile.txt, autocompare.txt, bench.txt, bench.json, profile.txt, profile_train.txt.
# Each step has its own time limit and the steps share one budget (TOTAL_SECONDS, default 450), so the script
# ends in time whatever hangs. Without a GPU it writes "skipped" to summary.txt and exits 0.
set -uo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi

cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu_check_results}"
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
python="${PYTHON:-python}"
total="${TOTAL_SECONDS:-450}"
started=$SECONDS
failed=0

note() { echo "$*" | tee -a "$summary"; }

# step NAME LIMIT LOG COMMAND...: run COMMAND with at most LIMIT seconds (less if the budget is nearly spent).
step() {
    local name="$1" limit="$2" log="$3"
    shift 3
    local left=$((total - (SECONDS - started)))
    if [ "$left" -lt 15 ]; then
        note "$name: not run (the ${total}s budget is spent)"
        failed=1
        return
    fi
    [ "$limit" -gt "$left" ] && limit="$left"
    local begin=$SECONDS status
    timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
    status=$?
    local took=$((SECONDS - begin))
    if [ "$status" -eq 0 ]; then
        note "$name: ok (${took}s)"
    elif [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        note "$name: TIMED OUT after ${took}s (limit ${limit}s); see $(basename "$log")"
        failed=1
    else
        note "$name: FAILED with status $status (${took}s); see $(basename "$log")"
        failed=1
    fi
}

if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' > /dev/null 2>&1; then
    note "gpu_check: skipped: torch sees no GPU ($("$python" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1))"
    exit 0
fi
note "gpu_check: $("$python" -c 'import torch; print(torch.cuda.get_device_name(), "torch", torch.__version__)')"

# 1. install: the checkout, editable, none of its dependencies (torch is the machine's; the rest are there).
step install 120 "$out/install.log" "$python" -m pip install --no-deps --no-build-isolation --no-index -e .
# 2. build the native core for this torch (and generate the kernels where it is not the reference torch).
step build 180 "$out/build.log" env DIPU_VENDOR=cuda "$python" -c \
    'import torch, dipu; x = torch.ones(3, device="dipu"); print(dipu.vendor().name, (x + x).cpu().tolist())'
# 3. the GPU-relevant tests on the CUDA vendor (tests that cannot hold on one GPU skip with their reason).
#    One line per test as it ends (-v), so a run cut at its limit still says what passed and what failed.
#    $PYTEST_WORKERS test processes share the GPU (default 12) for at most $PYTEST_SECONDS (180); $PYTEST_TESTS
#    overrides the files.
tests="${PYTEST_TESTS:-tests/test_cuda_vendor.py tests/test_coexistence.py tests/test_errors.py tests/test_ops.py
    tests/test_device.py tests/test_memory.py tests/test_streams.py tests/test_autograd.py tests/test_training.py
    tests/test_nn_ops.py tests/test_rng.py tests/test_autocompare.py tests/test_amp.py}"
# shellcheck disable=SC2086  # $tests is a list of paths
step pytest "${PYTEST_SECONDS:-180}" "$out/pytest.txt" env DIPU_VENDOR=cuda "$python" -m pytest -o addopts= -v -rfEs \
    -p no:cacheprovider -n "${PYTEST_WORKERS:-12}" --dist loadfile $tests
# 4. a process where dipu is installed but not asked for is native CUDA's own: its training runs backward.
step native 60 "$out/native.txt" "$python" -c '
import sys, torch
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(torch.randn(32, 64, device="cuda")), torch.arange(32, device="cuda") % 10)
    loss.backward()
    optimizer.step()
print("accelerator", torch.accelerator.current_accelerator(), "dipu loaded:", "dipu" in sys.modules, "loss", loss.item())
sys.exit(1 if "dipu" in sys.modules else 0)'
# 5. torch.compile with Triton on dipu(cuda): the compiled CNN trains with the eager losses. Eager runs on the
#    Python reference runtime first (DIPU_CUDA_RUNTIME=python), then on the core's C++ one, whose loss is compared.
step eager 90 "$out/eager.txt" env DIPU_VENDOR=cuda PYTHON="$python" bash -c \
    'DIPU_CUDA_RUNTIME=python "$PYTHON" examples/train.py --model cnn --epochs 1 && "$PYTHON" examples/train.py --model cnn --epochs 1'
step compile 120 "$out/compile.txt" env DIPU_VENDOR=cuda "$python" examples/train.py --model cnn --epochs 1 --compile
final_loss() { tr '\r' '\n' < "$1" 2>/dev/null | grep -o 'epoch 1/1  loss [0-9.]*' | tail -1 | awk '{print $4}'; }
eager_loss="$(final_loss "$out/eager.txt")" compiled_loss="$(final_loss "$out/compile.txt")"
if [ -n "$eager_loss" ] && [ -n "$compiled_loss" ] &&
    awk -v a="$eager_loss" -v b="$compiled_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * a) }'; then
    note "compile: final loss $compiled_loss, eager $eager_loss (within 1%)"
else
    note "compile: final loss '$compiled_loss' is not within 1% of eager's '$eager_loss'"
    failed=1
fi
# 6. autocompare every op dipu registers during one epoch of the CNN.
step autocompare 90 "$out/autocompare.txt" env DIPU_VENDOR=cuda DIPU_AUTOCOMPARE_OPS_LIST='.*' \
    "$python" examples/train.py --model cnn --epochs 1
# 7. native CUDA against dipu(cuda), each in its own processes.
step bench 150 "$out/bench.txt" "$python" benchmarks/bench_gpu.py --quick --json "$out/bench.json"
# 8. where a step of many short kernels spends its host time, op by op, native against dipu: inference, then
#    training (what the budget leaves).
step profile 60 "$out/profile.txt" "$python" benchmarks/profile_step.py --case resnet18-infer-b1
step profile-train 60 "$out/profile_train.txt" "$python" benchmarks/profile_step.py --case resnet50-train-b64

note "gpu_check: $([ "$failed" -eq 0 ] && echo ok || echo 'FAILED (see above)') in $((SECONDS - started))s; results in $out"
exit "$failed"
