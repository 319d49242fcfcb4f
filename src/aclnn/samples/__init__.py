"""The seed pages' C++ samples, translated line for line (`aclnn demo` runs them).

Each module runs as a script: `python -m aclnn.samples.smooth_l1_loss_backward`.
"""

SAMPLES = ("smooth_l1_loss_backward", "l1_loss_backward", "gelu_backward_v2",
           "avg_pool2d_backward")
