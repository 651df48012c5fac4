/* The built-in kernel definitions: one line per kernel zflow implements,
 * CPU first, then GPU (the GPU lines hold whether or not this build has
 * CUDA). An implementation registers against the line with its op, device
 * type and allowed types (executor/kernels/kernel.h); a test checks that
 * every line of this build's device types has one and no implementation
 * lacks a line.
 *
 * ZF_KDEF(op, device type, type attr, allowed types);
 * ZF_KDEF_HOST(..., host-memory inputs, host-memory outputs) as bit masks. */
#include "common/kernel_def.h"

#include <stddef.h>

#define ZF_KDEF(op_, dev_, attr_, types_)                                                          \
    {                                                                                              \
        .op = (op_), .device_type = (dev_), .type_attr = (attr_), .allowed_types = (types_)        \
    }
#define ZF_KDEF_HOST(op_, dev_, attr_, types_, in_, out_)                                          \
    {                                                                                              \
        .op = (op_), .device_type = (dev_), .type_attr = (attr_), .allowed_types = (types_),       \
        .host_memory_inputs = (in_), .host_memory_outputs = (out_)                                 \
    }

static const zf_kernel_def_t s_defs[] = {
    /* CPU */
    ZF_KDEF("Const", "CPU", NULL, 0),
    ZF_KDEF("Placeholder", "CPU", NULL, 0),
    ZF_KDEF("PlaceholderWithDefault", "CPU", NULL, 0),
    ZF_KDEF("Identity", "CPU", "T", 0),
    ZF_KDEF("IdentityN", "CPU", NULL, 0),
    ZF_KDEF("StopGradient", "CPU", "T", 0),
    ZF_KDEF("PreventGradient", "CPU", "T", 0),
    ZF_KDEF("Snapshot", "CPU", "T", 0),
    ZF_KDEF("NoOp", "CPU", NULL, 0),
    ZF_KDEF("VariableV2", "CPU", NULL, 0),
    ZF_KDEF("Variable", "CPU", NULL, 0),
    ZF_KDEF("Assign", "CPU", NULL, 0),
    ZF_KDEF("AssignAdd", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("AssignSub", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("ApplyGradientDescent", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("IsVariableInitialized", "CPU", NULL, 0),
    ZF_KDEF("VarHandleOp", "CPU", NULL, 0),
    ZF_KDEF("ReadVariableOp", "CPU", NULL, 0),
    ZF_KDEF("AssignVariableOp", "CPU", NULL, 0),
    ZF_KDEF("AssignAddVariableOp", "CPU", "dtype", ZF_TYPES_REAL),
    ZF_KDEF("AssignSubVariableOp", "CPU", "dtype", ZF_TYPES_REAL),
    ZF_KDEF("ResourceApplyGradientDescent", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("VarIsInitializedOp", "CPU", NULL, 0),
    ZF_KDEF("Neg", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Abs", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Square", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Sqrt", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Rsqrt", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Exp", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Log", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Reciprocal", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Add", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("AddV2", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Sub", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Mul", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("RealDiv", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Div", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Maximum", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Minimum", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("SquaredDifference", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("MatMul", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Reshape", "CPU", "T", 0),
    ZF_KDEF("Shape", "CPU", NULL, 0),
    ZF_KDEF("Size", "CPU", NULL, 0),
    ZF_KDEF("Rank", "CPU", NULL, 0),
    ZF_KDEF("ExpandDims", "CPU", "T", 0),
    ZF_KDEF("Squeeze", "CPU", NULL, 0),
    ZF_KDEF("Transpose", "CPU", "T", ZF_TYPES_POD),
    ZF_KDEF("ConcatV2", "CPU", "T", ZF_TYPES_POD),
    ZF_KDEF("Pack", "CPU", "T", ZF_TYPES_POD),
    ZF_KDEF("Fill", "CPU", "T", ZF_TYPES_POD),
    ZF_KDEF("ZerosLike", "CPU", "T", ZF_TYPES_POD),
    ZF_KDEF("OnesLike", "CPU", "T",
            ZF_TYPE_BIT(ZF_BFLOAT16) | ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_DOUBLE) |
                ZF_TYPE_BIT(ZF_FLOAT) | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_INT32) |
                ZF_TYPE_BIT(ZF_INT64)),
    ZF_KDEF("Cast", "CPU", "SrcT",
            ZF_TYPE_BIT(ZF_BFLOAT16) | ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_DOUBLE) |
                ZF_TYPE_BIT(ZF_FLOAT) | ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_INT16) |
                ZF_TYPE_BIT(ZF_INT32) | ZF_TYPE_BIT(ZF_INT64) | ZF_TYPE_BIT(ZF_INT8) |
                ZF_TYPE_BIT(ZF_UINT16) | ZF_TYPE_BIT(ZF_UINT32) | ZF_TYPE_BIT(ZF_UINT64) |
                ZF_TYPE_BIT(ZF_UINT8)),
    ZF_KDEF("Sum", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Mean", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Max", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Min", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Prod", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("ArgMax", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("ArgMin", "CPU", "T", ZF_TYPES_REAL),
    ZF_KDEF("Relu", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Relu6", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Elu", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Sigmoid", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Tanh", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Softmax", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("LogSoftmax", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("BiasAdd", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("Conv2D", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("MaxPool", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF("AvgPool", "CPU", "T", ZF_TYPES_FLOAT),
    ZF_KDEF_HOST("_Send", "CPU", "T", 0, 1u, 0),
    ZF_KDEF_HOST("_HostSend", "CPU", "T", 0, 1u, 0),
    ZF_KDEF_HOST("_Recv", "CPU", "tensor_type", 0, 0, 1u),
    ZF_KDEF_HOST("_HostRecv", "CPU", "tensor_type", 0, 0, 1u),
    /* CPU: oneDNN (float; double on portable loops) */
    ZF_KDEF("DepthwiseConv2dNative", "CPU", "T", ZF_TYPES_FLOAT),
    /* GPU */
    ZF_KDEF("Neg", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Abs", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Square", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Sqrt", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Rsqrt", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Exp", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Log", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Reciprocal", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Relu", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Relu6", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Sigmoid", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Tanh", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Add", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("AddV2", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Sub", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Mul", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("RealDiv", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Div", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Maximum", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Minimum", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("SquaredDifference", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("BiasAdd", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Cast", "GPU", "SrcT",
            ZF_TYPE_BIT(ZF_BOOL) | ZF_TYPE_BIT(ZF_DOUBLE) | ZF_TYPE_BIT(ZF_FLOAT) |
                ZF_TYPE_BIT(ZF_HALF) | ZF_TYPE_BIT(ZF_INT64)),
    ZF_KDEF_HOST("Fill", "GPU", "T", ZF_TYPES_GPU_FLOAT, 1u, 0),
    ZF_KDEF("ZerosLike", "GPU", "T", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF("OnesLike", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("MatMul", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF_HOST("Sum", "GPU", "T", ZF_TYPES_GPU_FLOAT, 2u, 0),
    ZF_KDEF_HOST("Mean", "GPU", "T", ZF_TYPES_GPU_FLOAT, 2u, 0),
    ZF_KDEF_HOST("Max", "GPU", "T", ZF_TYPES_GPU_FLOAT, 2u, 0),
    ZF_KDEF("Softmax", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("LogSoftmax", "GPU", "T", ZF_TYPES_GPU_FLOAT),
    ZF_KDEF("Const", "GPU", "dtype", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF_HOST("Const", "GPU", "dtype", ZF_TYPES_GPU_HOST, 0, 1u),
    ZF_KDEF("Identity", "GPU", "T", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF_HOST("Identity", "GPU", "T", ZF_TYPES_GPU_HOST, ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF("StopGradient", "GPU", "T", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF_HOST("StopGradient", "GPU", "T", ZF_TYPES_GPU_HOST, ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Reshape", "GPU", "T", ZF_TYPES_GPU_DEVICE, 2u, 0),
    ZF_KDEF_HOST("Reshape", "GPU", "T", ZF_TYPES_GPU_HOST, ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("ExpandDims", "GPU", "T", ZF_TYPES_GPU_DEVICE, 2u, 0),
    ZF_KDEF_HOST("ExpandDims", "GPU", "T", ZF_TYPES_GPU_HOST, ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF("Squeeze", "GPU", "T", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF_HOST("Squeeze", "GPU", "T", ZF_TYPES_GPU_HOST, ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF("IdentityN", "GPU", NULL, 0),
    ZF_KDEF("NoOp", "GPU", NULL, 0),
    ZF_KDEF_HOST("Shape", "GPU", NULL, 0, 0, 1u),
    ZF_KDEF_HOST("Size", "GPU", NULL, 0, 0, 1u),
    ZF_KDEF_HOST("Rank", "GPU", NULL, 0, 0, 1u),
    ZF_KDEF_HOST("Add", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("AddV2", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Sub", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Mul", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Maximum", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Minimum", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Neg", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Abs", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Square", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("SquaredDifference", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Sum", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Max", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Mean", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Fill", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("ZerosLike", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("OnesLike", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("Pack", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST, ZF_KERNEL_ALL_HOST),
    ZF_KDEF_HOST("ConcatV2", "GPU", "T", ZF_TYPE_BIT(ZF_INT32), ZF_KERNEL_ALL_HOST,
                 ZF_KERNEL_ALL_HOST),
    ZF_KDEF("_Send", "GPU", "T", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF_HOST("_Send", "GPU", "T", ZF_TYPES_GPU_HOST, 1u, 0),
    ZF_KDEF_HOST("_HostSend", "GPU", "T", 0, 1u, 0),
    ZF_KDEF("_Recv", "GPU", "tensor_type", ZF_TYPES_GPU_DEVICE),
    ZF_KDEF_HOST("_Recv", "GPU", "tensor_type", ZF_TYPES_GPU_HOST, 0, 1u),
    ZF_KDEF_HOST("_HostRecv", "GPU", "tensor_type", 0, 0, 1u),
};

const zf_kernel_def_t *zf__kernel_defs_builtin(int *n)
{
    *n = (int)(sizeof s_defs / sizeof s_defs[0]);
    return s_defs;
}
