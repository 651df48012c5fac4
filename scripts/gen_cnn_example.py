#!/usr/bin/env python3
"""Writes examples/cnn_train.pbtxt: a small convolutional network that
trains itself, forward pass, backward pass and Adam updates written out as
TensorFlow's AdamOptimizer would build them, on a fixed dataset held in the
graph (no feeds).

    conv 3x3x1x4 (SAME) -> FusedBatchNormV3 (is_training) -> Relu
      -> MaxPool 2x2 -> Reshape [-1, 64] -> MatMul 64x4 -> BiasAdd
      -> SparseSoftmaxCrossEntropyWithLogits -> Mean = "loss"

The dataset: 32 images of 8x8x1, each a line of three bright pixels on
faint noise; the label is the line's direction (0 horizontal, 1 vertical,
2 diagonal, 3 anti-diagonal). Weights start from fixed values drawn here.

The conv layer (filter, batch-norm scale and offset, their gradients and
updates) is pinned to CPU:0, the dense layer and the loss to CPU:1, so a
run on two devices, in one process or on two executors, splits it.

    init    runs every variable's initializer (once)
    train   one Adam step on every variable, then beta1_power and
            beta2_power are multiplied by beta1 and beta2
    loss    the mean cross-entropy before the step's update

Needs only Python 3 and NumPy:

    python3 scripts/gen_cnn_example.py > examples/cnn_train.pbtxt
"""
import sys

import numpy as np

N, H, W, C_IN = 32, 8, 8, 1
FILTERS, CLASSES = 4, 4
POOLED = (H // 2) * (W // 2) * FILTERS
LEARNING_RATE, BETA1, BETA2, EPSILON = 0.01, 0.9, 0.999, 1e-8
BN_EPSILON = 0.001

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"

# ---- the data and the initial weights ----------------------------------------


def dataset(rng):
    """32 images of a 3-pixel line on noise, and its direction as label."""
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}
    images = np.round(rng.uniform(0.0, 0.2, size=(N, H, W, C_IN)), 2)
    labels = np.arange(N, dtype=np.int32) % CLASSES
    for i, label in enumerate(labels):
        dr, dc = steps[int(label)]
        r = rng.integers(0, H - 2 * dr)
        c = rng.integers(2 if dc < 0 else 0, W - 2 * max(dc, 0))
        for k in range(3):
            images[i, r + k * dr, c + k * dc, 0] = 1.0
    return images.astype(np.float32), labels


def uniform(rng, shape, limit):
    return np.round(rng.uniform(-limit, limit, size=shape), 4).astype(np.float32)


# ---- text format -------------------------------------------------------------

DTYPES = {np.float32: "DT_FLOAT", np.int32: "DT_INT32"}


def fmt_float(v):
    s = str(np.float32(v))
    return s[:-2] if s.endswith(".0") else s


def a_type(t):
    return "type: %s" % t


def a_bool(b):
    return "b: %s" % ("true" if b else "false")


def a_float(f):
    return "f: %s" % fmt_float(f)


def a_str(s):
    return 's: "%s"' % s


def a_ints(vals):
    return "list { %s}" % "".join("i: %d " % v for v in vals)


def a_shape(dims):
    return "shape { %s}" % "".join("dim { size: %d } " % d for d in dims)


def a_tensor(arr, per_line=8):
    """A tensor value: dtype, shape and every element, per_line a line."""
    arr = np.asarray(arr)
    dtype = DTYPES[arr.dtype.type]
    key = "float_val" if dtype == "DT_FLOAT" else "int_val"
    fmt = fmt_float if dtype == "DT_FLOAT" else str
    dims = "".join("dim { size: %d } " % d for d in arr.shape)
    flat = arr.reshape(-1)
    lines = [
        " ".join("%s: %s" % (key, fmt(v)) for v in flat[i:i + per_line])
        for i in range(0, flat.size, per_line)
    ]
    body = "".join("\n        " + line for line in lines)
    return ("tensor {\n        dtype: %s\n        tensor_shape { %s}%s\n      }" %
            (dtype, dims, body))


class Graph:
    def __init__(self):
        self.out = []

    def node(self, name, op, inputs=(), device=None, attrs=(), deps=()):
        lines = ["node {", '  name: "%s"' % name, '  op: "%s"' % op]
        lines += ['  input: "%s"' % i for i in inputs]
        lines += ['  input: "^%s"' % d for d in deps]
        if device:
            lines.append('  device: "%s"' % device)
        for key, value in attrs:
            if value.startswith("tensor"):
                lines.append('  attr {\n    key: "%s"\n    value {\n      %s\n    }\n  }' %
                             (key, value))
            else:
                lines.append('  attr { key: "%s" value { %s } }' % (key, value))
        lines.append("}")
        self.out.append("\n".join(lines))
        return name

    def const(self, name, arr, device):
        arr = np.asarray(arr)
        return self.node(name, "Const", device=device,
                         attrs=[("dtype", a_type(DTYPES[arr.dtype.type])),
                                ("value", a_tensor(arr))])

    def text(self):
        return "\n".join(self.out) + "\n"


F = a_type("DT_FLOAT")
I32 = a_type("DT_INT32")


def conv_attrs():
    return [("T", F), ("strides", a_ints([1, 1, 1, 1])), ("padding", a_str("SAME")),
            ("data_format", a_str("NHWC")), ("dilations", a_ints([1, 1, 1, 1])),
            ("use_cudnn_on_gpu", a_bool(True)), ("explicit_paddings", a_ints([]))]


def pool_attrs():
    return [("T", F), ("ksize", a_ints([1, 2, 2, 1])), ("strides", a_ints([1, 2, 2, 1])),
            ("padding", a_str("VALID")), ("data_format", a_str("NHWC")),
            ("explicit_paddings", a_ints([]))]


def bn_attrs(grad):
    attrs = [("T", F), ("U", F), ("epsilon", a_float(BN_EPSILON))]
    if not grad:
        attrs.append(("exponential_avg_factor", a_float(1.0)))
    return attrs + [("data_format", a_str("NHWC")), ("is_training", a_bool(True))]


def matmul_attrs(ta, tb):
    return [("T", F), ("transpose_a", a_bool(ta)), ("transpose_b", a_bool(tb)),
            ("grad_a", a_bool(False)), ("grad_b", a_bool(False))]


def variable(g, name, initial, device, inits):
    """A VariableV2 with its initializer (collected in inits) and its read
    (Identity) on its device, as tf.Variable builds them. Returns the read's
    name."""
    initial = np.asarray(initial)
    g.node(name, "VariableV2", device=device,
           attrs=[("dtype", F), ("shape", a_shape(initial.shape)), ("container", a_str("")),
                  ("shared_name", a_str(""))])
    g.const(name + "/initial_value", initial, device)
    inits.append(g.node(name + "/Assign", "Assign", [name, name + "/initial_value"], device,
                        [("T", F), ("validate_shape", a_bool(True)),
                         ("use_locking", a_bool(True))]))
    return g.node(name + "/read", "Identity", [name], device, [("T", F)])


def build():
    rng = np.random.default_rng(2024)
    images, labels = dataset(rng)
    g = Graph()
    inits = []

    # The images with the conv layer, the labels with the loss.
    g.const("data/images", images, CPU0)
    g.const("data/labels", labels, CPU1)

    # Variables, each with its layer; the filter Glorot-uniform.
    limit = np.sqrt(6.0 / (3 * 3 * C_IN + 3 * 3 * FILTERS))
    filt = variable(g, "conv/filter", uniform(rng, (3, 3, C_IN, FILTERS), limit), CPU0, inits)
    scale = variable(g, "bn/scale", np.ones(FILTERS, np.float32), CPU0, inits)
    offset = variable(g, "bn/offset", np.zeros(FILTERS, np.float32), CPU0, inits)
    weights = variable(g, "dense/weights", uniform(rng, (POOLED, CLASSES), 0.1), CPU1, inits)
    bias = variable(g, "dense/bias", np.zeros(CLASSES, np.float32), CPU1, inits)

    # ---- forward
    g.node("conv/Conv2D", "Conv2D", ["data/images", filt], CPU0, conv_attrs())
    g.const("bn/empty", np.zeros(0, np.float32), CPU0)
    g.node("bn/FusedBatchNormV3", "FusedBatchNormV3",
           ["conv/Conv2D", scale, offset, "bn/empty", "bn/empty"], CPU0, bn_attrs(False))
    g.node("relu/Relu", "Relu", ["bn/FusedBatchNormV3"], CPU0, [("T", F)])
    g.node("pool/MaxPool", "MaxPool", ["relu/Relu"], CPU0, pool_attrs())
    g.const("flatten/shape", np.array([-1, POOLED], np.int32), CPU1)
    g.node("flatten/Reshape", "Reshape", ["pool/MaxPool", "flatten/shape"], CPU1,
           [("T", F), ("Tshape", I32)])
    g.node("dense/MatMul", "MatMul", ["flatten/Reshape", weights], CPU1, matmul_attrs(False, False))
    g.node("dense/BiasAdd", "BiasAdd", ["dense/MatMul", bias], CPU1,
           [("T", F), ("data_format", a_str("NHWC"))])
    g.node("loss/xent", "SparseSoftmaxCrossEntropyWithLogits", ["dense/BiasAdd", "data/labels"],
           CPU1, [("T", F), ("Tlabels", I32)])
    g.const("loss/axis", np.array([0], np.int32), CPU1)
    g.node("loss", "Mean", ["loss/xent", "loss/axis"], CPU1,
           [("T", F), ("Tidx", I32), ("keep_dims", a_bool(False))])

    # ---- backward: d loss / d logits = xent's backprop / N
    gr = "gradients/"
    g.const(gr + "loss/scale", np.array(1.0 / N, np.float32), CPU1)
    d_logits = g.node(gr + "loss/xent_grad", "Mul", ["loss/xent:1", gr + "loss/scale"], CPU1,
                      [("T", F)])
    d_bias = g.node(gr + "dense/BiasAdd_grad", "BiasAddGrad", [d_logits], CPU1,
                    [("T", F), ("data_format", a_str("NHWC"))])
    d_flat = g.node(gr + "dense/MatMul_grad/MatMul", "MatMul", [d_logits, weights], CPU1,
                    matmul_attrs(False, True))
    d_weights = g.node(gr + "dense/MatMul_grad/MatMul_1", "MatMul", ["flatten/Reshape", d_logits],
                       CPU1, matmul_attrs(True, False))
    g.node(gr + "flatten/Reshape_grad/Shape", "Shape", ["pool/MaxPool"], CPU1,
           [("T", F), ("out_type", I32)])
    d_pool = g.node(gr + "flatten/Reshape_grad/Reshape", "Reshape",
                    [d_flat, gr + "flatten/Reshape_grad/Shape"], CPU1, [("T", F), ("Tshape", I32)])
    d_relu = g.node(gr + "pool/MaxPool_grad", "MaxPoolGrad",
                    ["relu/Relu", "pool/MaxPool", d_pool], CPU0, pool_attrs())
    d_bn = g.node(gr + "relu/Relu_grad", "ReluGrad", [d_relu, "relu/Relu"], CPU0, [("T", F)])
    bn_grad = g.node(gr + "bn/FusedBatchNormV3_grad", "FusedBatchNormGradV3",
                     [d_bn, "conv/Conv2D", scale, "bn/FusedBatchNormV3:3",
                      "bn/FusedBatchNormV3:4", "bn/FusedBatchNormV3:5"], CPU0, bn_attrs(True))
    g.const(gr + "conv/Conv2D_grad/filter_sizes", np.array([3, 3, C_IN, FILTERS], np.int32), CPU0)
    d_filter = g.node(gr + "conv/Conv2D_grad/Conv2DBackpropFilter", "Conv2DBackpropFilter",
                      ["data/images", gr + "conv/Conv2D_grad/filter_sizes", bn_grad + ":0"], CPU0,
                      conv_attrs())

    # ---- Adam: hyperparameters and the beta powers live with the first
    # variable, as AdamOptimizer colocates them
    beta1_power = variable(g, "adam/beta1_power", np.float32(BETA1), CPU0, inits)
    beta2_power = variable(g, "adam/beta2_power", np.float32(BETA2), CPU0, inits)
    for name, v in [("lr", LEARNING_RATE), ("beta1", BETA1), ("beta2", BETA2),
                    ("epsilon", EPSILON)]:
        g.const("adam/" + name, np.float32(v), CPU0)
    updates = []
    for var, grad, device, shape, deps in [
            ("conv/filter", d_filter, CPU0, (3, 3, C_IN, FILTERS), []),
            ("bn/scale", bn_grad + ":1", CPU0, (FILTERS,), []),
            ("bn/offset", bn_grad + ":2", CPU0, (FILTERS,), []),
            # ApplyAdam writes the weights in place: it waits for their one
            # reader not already upstream of it, the input gradient
            ("dense/weights", d_weights, CPU1, (POOLED, CLASSES), [d_flat]),
            ("dense/bias", d_bias, CPU1, (CLASSES,), [])]:
        zeros = np.zeros(shape, np.float32)
        variable(g, var + "/Adam", zeros, device, inits)
        variable(g, var + "/Adam_1", zeros, device, inits)
        updates.append(g.node(
            "adam/update_" + var.replace("/", "_"), "ApplyAdam",
            [var, var + "/Adam", var + "/Adam_1", beta1_power, beta2_power, "adam/lr",
             "adam/beta1", "adam/beta2", "adam/epsilon", grad], device,
            [("T", F), ("use_locking", a_bool(False)), ("use_nesterov", a_bool(False))], deps))
    finish = []
    for power, beta in [("adam/beta1_power", "adam/beta1"), ("adam/beta2_power", "adam/beta2")]:
        g.node(power + "/mul", "Mul", [power, beta], CPU0, [("T", F)], updates)
        finish.append(g.node(power + "/update", "Assign", [power, power + "/mul"], CPU0,
                             [("T", F), ("validate_shape", a_bool(True)),
                              ("use_locking", a_bool(False))]))

    g.node("train", "NoOp", device=CPU1, deps=updates + finish)
    g.node("init", "NoOp", device=CPU0, deps=inits)
    return g


HEADER = """\
# Generated by scripts/gen_cnn_example.py; edit that, not this.
#
# A small convolutional network that trains on a dataset held in the graph:
# conv 3x3x1x4 (SAME) -> FusedBatchNormV3 (is_training) -> Relu -> MaxPool 2x2
# -> Reshape [-1,64] -> MatMul 64x4 -> BiasAdd -> SparseSoftmaxCrossEntropyWithLogits
# -> Mean "loss"; the gradients written with ReluGrad, MaxPoolGrad,
# FusedBatchNormGradV3, Conv2DBackpropFilter, MatMul and BiasAddGrad; ApplyAdam
# on every variable (lr 0.01), then beta1_power and beta2_power updated.
# 32 images 8x8x1 of a 3-pixel line, labelled by its direction (4 classes).
# The conv layer runs on CPU:0, the dense layer and the loss on CPU:1.
#
#   zflow run examples/cnn_train.pbtxt --devices cpu:2 --init init \\
#       --target train --fetch loss --steps 200
"""


def main():
    sys.stdout.write(HEADER + build().text())


if __name__ == "__main__":
    main()
