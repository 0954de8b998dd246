/* A C library exporting diopiFusedAdamW in DeepLink's form, which ends at `maximize`: dipu's grad_scale
   and found_inf are not its parameters (Note [diopiFusedAdamW under AMP] in dipu/diopi/c_library.py).
   It counts its calls and leaves the step to the CPU fallback, so a test sees whether dipu called it. */
#include <diopi/diopirt.h>
#include <stdbool.h>

long long fused_adamw_calls = 0;

diopiError_t diopiFusedAdamW(diopiContextHandle_t ctx, diopiTensorHandle_t* params, diopiConstTensorHandle_t* grads,
                             diopiTensorHandle_t* exp_avgs, diopiTensorHandle_t* exp_avg_sqs,
                             diopiTensorHandle_t* max_exp_avg_sqs, diopiConstTensorHandle_t* state_steps, int64_t count,
                             double lr, double beta1, double beta2, double eps, double weight_decay, bool amsgrad,
                             bool maximize) {
    (void)ctx, (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)max_exp_avg_sqs;
    (void)state_steps, (void)count, (void)lr, (void)beta1, (void)beta2, (void)eps, (void)weight_decay;
    (void)amsgrad, (void)maximize;
    ++fused_adamw_calls;
    return diopiForceFallbackToCPU;
}
