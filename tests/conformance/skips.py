"""Functions an op library implements but the conformance suite does not run, with the reason.

``SKIPS[library][function] = reason``. Every skip states why; the suite prints
them, and a function without cases and without a skip fails the suite.
"""

SKIPS: dict[str, dict[str, str]] = {
    "torch": {
        "diopiEmbeddingBagBackward": "its offset2bag/bag_size/maximum_indices inputs must come from a matching "
                                     "forward, which random case inputs are not; tests/test_nn_ops.py checks it "
                                     "through autograd for every mode",
        "diopiScaledDotProductAttentionBackward": "its out/logsumexp inputs must come from a matching forward, which "
                                                  "random case inputs are not; tests/test_attention.py checks it "
                                                  "through autograd against the math path (masks, biases, "
                                                  "grouped-query heads, dropout)",
    },
}

# ---- fused optimizer steps and the AMP unscale: their inputs must be a consistent optimizer state
# (parameters, gradients, moments, step counts) rather than independent random tensors;
# tests/test_optim_amp_random.py checks every one of them against CPU through torch.optim and GradScaler.
from dipu.diopi.proto import FUNCTIONS as _FUNCTIONS  # noqa: E402

SKIPS["torch"].update({
    name: "needs a consistent optimizer state; checked against CPU through torch.optim/GradScaler in "
          "tests/test_optim_amp_random.py"
    for name in _FUNCTIONS
    if name.startswith("diopiFused") or name == "diopiAmpForeachNonFiniteCheckAndUnscaleInp"
})

# The C++ torch library applies the same ATen overloads as the Python one (Note [The ATen library in C++]):
# what cannot be given random inputs there cannot here either.
SKIPS["torch_cpp"] = dict(SKIPS["torch"])
