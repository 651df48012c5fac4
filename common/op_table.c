/* The built-in op table: the signature and properties of every op zflow
 * knows, one op per string, parsed once by op_registry.c.
 *
 * Syntax (a compact form of TensorFlow's REGISTER_OP):
 *
 *     Name(arg: TYPE, ...) -> (arg: TYPE, ...) {attr: KIND [= default], ...} flag ...
 *
 * TYPE is a fixed type (float, int32, resource, ... as in TensorFlow's op
 * definitions), a type attr (T), a list(type) attr (Tin), N*T or N*float
 * (an int attr times a type), or Ref(...) around any of these.
 * The {...} block declares what the arguments cannot say: list(type)
 * attrs, and every attr TensorFlow gives a default, with that default (a
 * node that leaves such an attr out gets it when its graph is built).
 * KIND is type, list(type), int, bool, float, string, shape, list(int),
 * list(float), list(string) or list(shape). A default is a type name, an
 * integer, true or false, a decimal number, 'text' (taken as it is between
 * the single quotes), a shape (unknown for an unknown rank, or [d, ...]
 * with -1 for a dimension of unknown size), or a list [x, ...] of those.
 * An attr declared without a default must be used by an argument (and a
 * list(type) attr an argument uses takes none). Any other name in an
 * argument is a type attr without a default (or an int attr before a '*').
 * Flags: stateful metadata control_flow functional send_recv unsupported.
 * An op with no inputs is a source.
 *
 * "stateful" follows TensorFlow's is_stateful, and is also set on ops that
 * read or write variables through Ref or resource inputs (Assign*, Apply*,
 * ReadVariableOp, ...): TensorFlow protects those by other means, and here
 * the flag is what keeps such nodes from being merged or folded. */
#include "common/op_registry.h"

/* Default blocks several ops share. */
#define S_CONV2D_DEFAULTS                                                                          \
    "{use_cudnn_on_gpu: bool = true, explicit_paddings: list(int) = [],"                           \
    " data_format: string = 'NHWC', dilations: list(int) = [1, 1, 1, 1]}"
#define S_FUSED_BATCH_NORM_DEFAULTS                                                                \
    "{epsilon: float = 0.0001, exponential_avg_factor: float = 1, data_format: string = 'NHWC',"   \
    " is_training: bool = true}"
#define S_RESIZE_DEFAULTS "{align_corners: bool = false, half_pixel_centers: bool = false}"
#define S_STRIDED_SLICE_DEFAULTS                                                                   \
    "{begin_mask: int = 0, end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,"     \
    " shrink_axis_mask: int = 0}"
#define S_REDUCTION_DEFAULTS "{keep_dims: bool = false, Tidx: type = int32}"
#define S_SEED_DEFAULTS      "{seed: int = 0, seed2: int = 0}"
#define S_SHARED_DEFAULTS    "{container: string = '', shared_name: string = ''}"
#define S_LOCKING_OFF        "{use_locking: bool = false}"
#define S_NESTEROV_DEFAULTS  "{use_locking: bool = false, use_nesterov: bool = false}"
#define S_ENTER_DEFAULTS     "{is_constant: bool = false, parallel_iterations: int = 10}"
#define S_WHILE_DEFAULTS     "output_shapes: list(shape) = [], parallel_iterations: int = 10"
#define S_CALL_DEFAULTS                                                                            \
    "config: string = '', config_proto: string = '',"                                              \
    " executor_type: string = ''"
#define S_SENDRECV_DEFAULTS "{client_terminated: bool = false}"

static const char *const s_table[] = {
    /* Sources, identities and debugging */
    "Const() -> (output: dtype)",
    "Placeholder() -> (output: dtype) {shape: shape = unknown}",
    "PlaceholderWithDefault(input: dtype) -> (output: dtype)",
    "Identity(input: T) -> (output: T)",
    "IdentityN(input: T) -> (output: T) {T: list(type)}",
    "RefIdentity(input: Ref(T)) -> (output: Ref(T))",
    "Snapshot(input: T) -> (output: T)",
    "StopGradient(input: T) -> (output: T)",
    "PreventGradient(input: T) -> (output: T) {message: string = ''}",
    "EnsureShape(input: T) -> (output: T)",
    "NoOp() -> ()",
    "ControlTrigger() -> () control_flow",
    "Print(input: T, data: U) -> (output: T)"
    " {U: list(type), message: string = '', first_n: int = -1, summarize: int = 3} stateful",
    "PrintV2(input: string) -> () {output_stream: string = 'stderr', end: string = '\n'} stateful",
    "Assert(condition: bool, data: T) -> () {T: list(type), summarize: int = 3} stateful",
    "CheckNumerics(tensor: T) -> (output: T) stateful",

    /* Element-wise binary math */
    "Add(x: T, y: T) -> (z: T)",
    "AddV2(x: T, y: T) -> (z: T)",
    "AddN(inputs: N*T) -> (sum: T)",
    "Sub(x: T, y: T) -> (z: T)",
    "Mul(x: T, y: T) -> (z: T)",
    "MulNoNan(x: T, y: T) -> (z: T)",
    "Div(x: T, y: T) -> (z: T)",
    "DivNoNan(x: T, y: T) -> (z: T)",
    "RealDiv(x: T, y: T) -> (z: T)",
    "FloorDiv(x: T, y: T) -> (z: T)",
    "FloorMod(x: T, y: T) -> (z: T)",
    "TruncateDiv(x: T, y: T) -> (z: T)",
    "Mod(x: T, y: T) -> (z: T)",
    "Maximum(x: T, y: T) -> (z: T)",
    "Minimum(x: T, y: T) -> (z: T)",
    "Pow(x: T, y: T) -> (z: T)",
    "SquaredDifference(x: T, y: T) -> (z: T)",
    "BiasAdd(value: T, bias: T) -> (output: T) {data_format: string = 'NHWC'}",
    "BiasAddGrad(out_backprop: T) -> (output: T) {data_format: string = 'NHWC'}",
    "ClipByValue(t: T, clip_value_min: T, clip_value_max: T) -> (output: T)",

    /* Element-wise unary math */
    "Neg(x: T) -> (y: T)",
    "Abs(x: T) -> (y: T)",
    "Sign(x: T) -> (y: T)",
    "Square(x: T) -> (y: T)",
    "Sqrt(x: T) -> (y: T)",
    "Rsqrt(x: T) -> (y: T)",
    "Reciprocal(x: T) -> (y: T)",
    "Exp(x: T) -> (y: T)",
    "Expm1(x: T) -> (y: T)",
    "Log(x: T) -> (y: T)",
    "Log1p(x: T) -> (y: T)",
    "Floor(x: T) -> (y: T)",
    "Ceil(x: T) -> (y: T)",
    "Round(x: T) -> (y: T)",
    "Rint(x: T) -> (y: T)",
    "Sin(x: T) -> (y: T)",
    "Cos(x: T) -> (y: T)",
    "Erf(x: T) -> (y: T)",
    "Erfc(x: T) -> (y: T)",
    "Sigmoid(x: T) -> (y: T)",
    "Tanh(x: T) -> (y: T)",
    "IsNan(x: T) -> (y: bool)",
    "IsInf(x: T) -> (y: bool)",
    "IsFinite(x: T) -> (y: bool)",
    "ZerosLike(x: T) -> (y: T)",
    "OnesLike(x: T) -> (y: T)",
    "Cast(x: SrcT) -> (y: DstT) {Truncate: bool = false}",

    /* Comparison and logic */
    "Equal(x: T, y: T) -> (z: bool) {incompatible_shape_error: bool = true}",
    "NotEqual(x: T, y: T) -> (z: bool) {incompatible_shape_error: bool = true}",
    "Less(x: T, y: T) -> (z: bool)",
    "LessEqual(x: T, y: T) -> (z: bool)",
    "Greater(x: T, y: T) -> (z: bool)",
    "GreaterEqual(x: T, y: T) -> (z: bool)",
    "LogicalAnd(x: bool, y: bool) -> (z: bool)",
    "LogicalOr(x: bool, y: bool) -> (z: bool)",
    "LogicalNot(x: bool) -> (y: bool)",
    "Select(condition: bool, t: T, e: T) -> (output: T)",
    "SelectV2(condition: bool, t: T, e: T) -> (output: T)",
    "Where(input: T) -> (index: int64) {T: type = bool}",
    "ToBool(input: T) -> (output: bool)",

    /* Neural-network ops */
    "Relu(features: T) -> (activations: T)",
    "Relu6(features: T) -> (activations: T)",
    "Elu(features: T) -> (activations: T)",
    "Selu(features: T) -> (activations: T)",
    "LeakyRelu(features: T) -> (activations: T) {alpha: float = 0.2, T: type = float}",
    "Softplus(features: T) -> (activations: T)",
    "Softsign(features: T) -> (activations: T)",
    "ReluGrad(gradients: T, features: T) -> (backprops: T)",
    "Relu6Grad(gradients: T, features: T) -> (backprops: T)",
    "SigmoidGrad(y: T, dy: T) -> (z: T)",
    "TanhGrad(y: T, dy: T) -> (z: T)",
    "LeakyReluGrad(gradients: T, features: T) -> (backprops: T)"
    " {alpha: float = 0.2, T: type = float}",
    "EluGrad(gradients: T, outputs: T) -> (backprops: T)",
    "SeluGrad(gradients: T, outputs: T) -> (backprops: T)",
    "SoftplusGrad(gradients: T, features: T) -> (backprops: T)",
    "SoftsignGrad(gradients: T, features: T) -> (backprops: T)",
    "SqrtGrad(y: T, dy: T) -> (z: T)",
    "RsqrtGrad(y: T, dy: T) -> (z: T)",
    "ReciprocalGrad(y: T, dy: T) -> (z: T)",
    "Softmax(logits: T) -> (softmax: T)",
    "LogSoftmax(logits: T) -> (logsoftmax: T)",
    "SoftmaxCrossEntropyWithLogits(features: T, labels: T) -> (loss: T, "
    "backprop: T)",
    "SparseSoftmaxCrossEntropyWithLogits(features: T, labels: Tlabels) -> "
    "(loss: T, backprop: T)"
    " {Tlabels: type = int64}",
    "L2Loss(t: T) -> (output: T)",
    "MatMul(a: T, b: T) -> (product: T)"
    " {transpose_a: bool = false, transpose_b: bool = false, grad_a: bool = false,"
    " grad_b: bool = false}",
    "BatchMatMul(x: T, y: T) -> (output: T)"
    " {adj_x: bool = false, adj_y: bool = false, grad_x: bool = false, grad_y: bool = false}",
    "BatchMatMulV2(x: T, y: T) -> (output: T)"
    " {adj_x: bool = false, adj_y: bool = false, grad_x: bool = false, grad_y: bool = false}",
    "BatchMatMulV3(x: Ta, y: Tb) -> (output: Tout)"
    " {adj_x: bool = false, adj_y: bool = false, grad_x: bool = false, grad_y: bool = false}",
    "Einsum(inputs: N*T) -> (output: T)",
    "Conv2D(input: T, filter: T) -> (output: T) " S_CONV2D_DEFAULTS,
    "Conv2DBackpropInput(input_sizes: int32, filter: T, out_backprop: T) -> "
    "(output: T) " S_CONV2D_DEFAULTS,
    "Conv2DBackpropFilter(input: T, filter_sizes: int32, out_backprop: T) -> "
    "(output: T) " S_CONV2D_DEFAULTS,
    "DepthwiseConv2dNative(input: T, filter: T) -> (output: T)"
    " {explicit_paddings: list(int) = [], data_format: string = 'NHWC',"
    " dilations: list(int) = [1, 1, 1, 1]}",
    "MaxPool(input: T) -> (output: T)"
    " {T: type = float, explicit_paddings: list(int) = [], data_format: string = 'NHWC'}",
    "MaxPoolV2(input: T, ksize: int32, strides: int32) -> (output: T)"
    " {T: type = float, data_format: string = 'NHWC'}",
    "MaxPoolGrad(orig_input: T, orig_output: T, grad: T) -> (output: T)"
    " {explicit_paddings: list(int) = [], data_format: string = 'NHWC', T: type = float}",
    "AvgPool(value: T) -> (output: T) {data_format: string = 'NHWC'}",
    "AvgPoolGrad(orig_input_shape: int32, grad: T) -> (output: T)"
    " {data_format: string = 'NHWC'}",
    "FusedBatchNorm(x: T, scale: T, offset: T, mean: T, variance: T)"
    " -> (y: T, batch_mean: T, batch_variance: T, reserve_space_1: T, "
    "reserve_space_2: T) " S_FUSED_BATCH_NORM_DEFAULTS,
    "FusedBatchNormV3(x: T, scale: U, offset: U, mean: U, variance: U)"
    " -> (y: T, batch_mean: U, batch_variance: U, reserve_space_1: U, "
    "reserve_space_2: U,"
    " reserve_space_3: U) " S_FUSED_BATCH_NORM_DEFAULTS,
    "FusedBatchNormV2(x: T, scale: U, offset: U, mean: U, variance: U)"
    " -> (y: T, batch_mean: U, batch_variance: U, reserve_space_1: U,"
    " reserve_space_2: U) " S_FUSED_BATCH_NORM_DEFAULTS,
    "FusedBatchNormGrad(y_backprop: T, x: T, scale: T, reserve_space_1: T, reserve_space_2: T)"
    " -> (x_backprop: T, scale_backprop: T, offset_backprop: T, reserve_space_3: T,"
    " reserve_space_4: T)"
    " {epsilon: float = 0.0001, data_format: string = 'NHWC', is_training: bool = true}",
    "FusedBatchNormGradV2(y_backprop: T, x: T, scale: float, reserve_space_1: U,"
    " reserve_space_2: U) -> (x_backprop: T, scale_backprop: U, offset_backprop: U,"
    " reserve_space_3: U, reserve_space_4: U)"
    " {epsilon: float = 0.0001, data_format: string = 'NHWC', is_training: bool = true}",
    "FusedBatchNormGradV3(y_backprop: T, x: T, scale: float, reserve_space_1: U,"
    " reserve_space_2: U, reserve_space_3: U) -> (x_backprop: T, scale_backprop: U,"
    " offset_backprop: U, reserve_space_4: U, reserve_space_5: U)"
    " {epsilon: float = 0.0001, data_format: string = 'NHWC', is_training: bool = true}",
    "ResizeBilinear(images: T, size: int32) -> (resized_images: float) " S_RESIZE_DEFAULTS,
    "ResizeNearestNeighbor(images: T, size: int32) -> (resized_images: T) " S_RESIZE_DEFAULTS,

    /* Reductions and scans */
    "Sum(input: T, reduction_indices: Tidx) -> (output: T) " S_REDUCTION_DEFAULTS,
    "Mean(input: T, reduction_indices: Tidx) -> (output: T) " S_REDUCTION_DEFAULTS,
    "Max(input: T, reduction_indices: Tidx) -> (output: T) " S_REDUCTION_DEFAULTS,
    "Min(input: T, reduction_indices: Tidx) -> (output: T) " S_REDUCTION_DEFAULTS,
    "Prod(input: T, reduction_indices: Tidx) -> (output: T) " S_REDUCTION_DEFAULTS,
    "All(input: bool, reduction_indices: Tidx) -> (output: bool) " S_REDUCTION_DEFAULTS,
    "Any(input: bool, reduction_indices: Tidx) -> (output: bool) " S_REDUCTION_DEFAULTS,
    "ArgMax(input: T, dimension: Tidx) -> (output: output_type)"
    " {Tidx: type = int32, output_type: type = int64}",
    "ArgMin(input: T, dimension: Tidx) -> (output: output_type)"
    " {Tidx: type = int32, output_type: type = int64}",
    "Cumsum(x: T, axis: Tidx) -> (out: T)"
    " {exclusive: bool = false, reverse: bool = false, Tidx: type = int32}",
    "TopKV2(input: T, k: Tk) -> (values: T, indices: index_type)"
    " {sorted: bool = true, Tk: type = int32, index_type: type = int32}",
    "Unique(x: T) -> (y: T, idx: out_idx) {out_idx: type = int32}",

    /* Shapes and metadata */
    "Shape(input: T) -> (output: out_type) {out_type: type = int32} metadata",
    "ShapeN(input: N*T) -> (output: N*out_type) {out_type: type = int32}",
    "Size(input: T) -> (output: out_type) {out_type: type = int32} metadata",
    "Rank(input: T) -> (output: int32) metadata",
    "BroadcastGradientArgs(s0: T, s1: T) -> (r0: T, r1: T) {T: type = int32}",

    /* Array manipulation */
    "Reshape(tensor: T, shape: Tshape) -> (output: T) {Tshape: type = int32}",
    "Fill(dims: index_type, value: T) -> (output: T) {index_type: type = "
    "int32}",
    "Range(start: Tidx, limit: Tidx, delta: Tidx) -> (output: Tidx) {Tidx: "
    "type = int32}",
    "Transpose(x: T, perm: Tperm) -> (y: T) {Tperm: type = int32}",
    "Concat(concat_dim: int32, values: N*T) -> (output: T)",
    "ConcatV2(values: N*T, axis: Tidx) -> (output: T) {Tidx: type = int32}",
    "ExpandDims(input: T, dim: Tdim) -> (output: T) {Tdim: type = int32}",
    "Squeeze(input: T) -> (output: T) {squeeze_dims: list(int) = []}",
    "Pack(values: N*T) -> (output: T) {axis: int = 0}",
    "Unpack(value: T) -> (output: num*T) {axis: int = 0}",
    "Split(split_dim: int32, value: T) -> (output: num_split*T)",
    "SplitV(value: T, size_splits: Tlen, split_dim: int32) -> (output: "
    "num_split*T)"
    " {Tlen: type = int64}",
    "Slice(input: T, begin: Index, size: Index) -> (output: T)",
    "StridedSlice(input: T, begin: Index, end: Index, strides: Index) -> "
    "(output: T) " S_STRIDED_SLICE_DEFAULTS,
    "StridedSliceGrad(shape: Index, begin: Index, end: Index, strides: Index, "
    "dy: T)"
    " -> (output: T) " S_STRIDED_SLICE_DEFAULTS,
    "Tile(input: T, multiples: Tmultiples) -> (output: T) {Tmultiples: type = "
    "int32}",
    "Pad(input: T, paddings: Tpaddings) -> (output: T) {Tpaddings: type = "
    "int32}",
    "PadV2(input: T, paddings: Tpaddings, constant_values: T) -> (output: T)"
    " {Tpaddings: type = int32}",
    "MirrorPad(input: T, paddings: Tpaddings) -> (output: T) {Tpaddings: type "
    "= int32}",
    "ReverseV2(tensor: T, axis: Tidx) -> (output: T) {Tidx: type = int32}",
    "BroadcastTo(input: T, shape: Tidx) -> (output: T) {Tidx: type = int32}",
    "Gather(params: Tparams, indices: Tindices) -> (output: Tparams)"
    " {validate_indices: bool = true}",
    "GatherV2(params: Tparams, indices: Tindices, axis: Taxis) -> (output: "
    "Tparams) {batch_dims: int = 0}",
    "GatherNd(params: Tparams, indices: Tindices) -> (output: Tparams)"
    " {bad_indices_policy: string = ''}",
    "OneHot(indices: TI, depth: int32, on_value: T, off_value: T) -> (output: "
    "T)"
    " {axis: int = -1, TI: type = int64}",
    "ScatterNd(indices: Tindices, updates: T, shape: Tindices) -> (output: T)"
    " {bad_indices_policy: string = ''}",
    "UnsortedSegmentSum(data: T, segment_ids: Tindices, num_segments: Tnumsegments)"
    " -> (output: T) {Tnumsegments: type = int32}",

    /* Random numbers */
    "RandomUniform(shape: T) -> (output: dtype) " S_SEED_DEFAULTS " stateful",
    "RandomStandardNormal(shape: T) -> (output: dtype) " S_SEED_DEFAULTS " stateful",
    "TruncatedNormal(shape: T) -> (output: dtype) " S_SEED_DEFAULTS " stateful",
    "RandomUniformInt(shape: T, minval: Tout, maxval: Tout) -> (output: Tout) " S_SEED_DEFAULTS
    " stateful",
    "RandomShuffle(value: T) -> (output: T) " S_SEED_DEFAULTS " stateful",
    "Multinomial(logits: T, num_samples: int32) -> (output: output_dtype)"
    " {seed: int = 0, seed2: int = 0, output_dtype: type = int64} stateful",
    "StatelessRandomUniform(shape: T, seed: Tseed) -> (output: dtype)"
    " {dtype: type = float, T: type = int32, Tseed: type = int64}",
    "StatelessRandomNormal(shape: T, seed: Tseed) -> (output: dtype)"
    " {dtype: type = float, T: type = int32, Tseed: type = int64}",
    "StatelessTruncatedNormal(shape: T, seed: Tseed) -> (output: dtype)"
    " {dtype: type = float, T: type = int32, Tseed: type = int64}",

    /* Reference variables */
    "Variable() -> (ref: Ref(dtype)) " S_SHARED_DEFAULTS " stateful",
    "VariableV2() -> (ref: Ref(dtype)) " S_SHARED_DEFAULTS " stateful",
    "TemporaryVariable() -> (ref: Ref(dtype)) {var_name: string = ''} stateful",
    "IsVariableInitialized(ref: Ref(dtype)) -> (is_initialized: bool) stateful",
    "Assign(ref: Ref(T), value: T) -> (output_ref: Ref(T))"
    " {validate_shape: bool = true, use_locking: bool = true} stateful",
    "AssignAdd(ref: Ref(T), value: T) -> (output_ref: Ref(T)) " S_LOCKING_OFF " stateful",
    "AssignSub(ref: Ref(T), value: T) -> (output_ref: Ref(T)) " S_LOCKING_OFF " stateful",
    "ScatterUpdate(ref: Ref(T), indices: Tindices, updates: T) -> (output_ref: "
    "Ref(T)) {use_locking: bool = true} stateful",
    "ScatterAdd(ref: Ref(T), indices: Tindices, updates: T) -> (output_ref: "
    "Ref(T)) " S_LOCKING_OFF " stateful",
    "ApplyGradientDescent(var: Ref(T), alpha: T, delta: T) -> (out: Ref(T)) " S_LOCKING_OFF
    " stateful",
    "ApplyMomentum(var: Ref(T), accum: Ref(T), lr: T, grad: T, momentum: T) -> "
    "(out: Ref(T)) " S_NESTEROV_DEFAULTS " stateful",
    "ApplyAdam(var: Ref(T), m: Ref(T), v: Ref(T), beta1_power: T, beta2_power: "
    "T, lr: T,"
    " beta1: T, beta2: T, epsilon: T, grad: T) -> (out: Ref(T)) " S_NESTEROV_DEFAULTS " stateful",
    "ApplyRMSProp(var: Ref(T), ms: Ref(T), mom: Ref(T), lr: T, rho: T, momentum: T, epsilon: T,"
    " grad: T) -> (out: Ref(T)) " S_LOCKING_OFF " stateful",
    "ApplyAdagrad(var: Ref(T), accum: Ref(T), lr: T, grad: T) -> (out: Ref(T))"
    " {use_locking: bool = false, update_slots: bool = true} stateful",

    /* Resource variables */
    "VarHandleOp() -> (resource: resource)"
    " {container: string = '', shared_name: string = '', debug_name: string = '',"
    " allowed_devices: list(string) = []} stateful",
    "ReadVariableOp(resource: resource) -> (value: dtype) stateful",
    "AssignVariableOp(resource: resource, value: dtype) -> () {validate_shape: bool = false}"
    " stateful",
    "AssignAddVariableOp(resource: resource, value: dtype) -> () stateful",
    "AssignSubVariableOp(resource: resource, value: dtype) -> () stateful",
    "VarIsInitializedOp(resource: resource) -> (is_initialized: bool) stateful",
    "DestroyResourceOp(resource: resource) -> () {ignore_lookup_error: bool = true} stateful",
    "ResourceGather(resource: resource, indices: Tindices) -> (output: dtype)"
    " {batch_dims: int = 0, validate_indices: bool = true} stateful",
    "ResourceScatterAdd(resource: resource, indices: Tindices, updates: dtype) "
    "-> () stateful",
    "ResourceApplyGradientDescent(var: resource, alpha: T, delta: T) -> () " S_LOCKING_OFF
    " stateful",
    "ResourceApplyMomentum(var: resource, accum: resource, lr: T, grad: T, "
    "momentum: T) -> () " S_NESTEROV_DEFAULTS " stateful",
    "ResourceApplyAdam(var: resource, m: resource, v: resource, beta1_power: "
    "T, beta2_power: T,"
    " lr: T, beta1: T, beta2: T, epsilon: T, grad: T) -> () " S_NESTEROV_DEFAULTS " stateful",
    "ResourceApplyRMSProp(var: resource, ms: resource, mom: resource, lr: T, rho: T,"
    " momentum: T, epsilon: T, grad: T) -> () " S_LOCKING_OFF " stateful",
    "ResourceApplyAdagrad(var: resource, accum: resource, lr: T, grad: T) -> ()"
    " {use_locking: bool = false, update_slots: bool = true} stateful",
    "ResourceApplyKerasMomentum(var: resource, accum: resource, lr: T, grad: T, momentum: T)"
    " -> () " S_NESTEROV_DEFAULTS " stateful",

    /* Dataflow control flow: frames, iterations and deadness (the engine) */
    "Switch(data: T, pred: bool) -> (output_false: T, output_true: T) "
    "control_flow",
    "RefSwitch(data: Ref(T), pred: bool) -> (output_false: Ref(T), "
    "output_true: Ref(T))"
    " control_flow",
    "_SwitchN(data: T, output_index: int32) -> (outputs: num_outs*T) "
    "control_flow",
    "Merge(inputs: N*T) -> (output: T, value_index: int32) control_flow",
    "RefMerge(inputs: Ref(N*T)) -> (output: Ref(T), value_index: int32) "
    "control_flow",
    "Enter(data: T) -> (output: T) " S_ENTER_DEFAULTS " control_flow",
    "RefEnter(data: Ref(T)) -> (output: Ref(T)) " S_ENTER_DEFAULTS " control_flow",
    "Exit(data: T) -> (output: T) control_flow",
    "RefExit(data: Ref(T)) -> (output: Ref(T)) control_flow",
    "NextIteration(data: T) -> (output: T) control_flow",
    "RefNextIteration(data: Ref(T)) -> (output: Ref(T)) control_flow",
    "LoopCond(input: bool) -> (output: bool) control_flow",

    /* Function calls */
    "While(input: T) -> (output: T) {T: list(type), " S_WHILE_DEFAULTS "}"
    " stateful functional unsupported",
    "StatelessWhile(input: T) -> (output: T) {T: list(type), " S_WHILE_DEFAULTS "}"
    " functional unsupported",
    "If(cond: Tcond, input: Tin) -> (output: Tout)"
    " {Tin: list(type), Tout: list(type), output_shapes: list(shape) = []}"
    " stateful functional unsupported",
    "StatelessIf(cond: Tcond, input: Tin) -> (output: Tout)"
    " {Tin: list(type), Tout: list(type), output_shapes: list(shape) = []}"
    " functional unsupported",
    "Case(branch_index: int32, input: Tin) -> (output: Tout)"
    " {Tin: list(type), Tout: list(type), output_shapes: list(shape) = []}"
    " stateful functional unsupported",
    "StatelessCase(branch_index: int32, input: Tin) -> (output: Tout)"
    " {Tin: list(type), Tout: list(type), output_shapes: list(shape) = []}"
    " functional unsupported",
    "PartitionedCall(args: Tin) -> (output: Tout) {Tin: list(type), Tout: "
    "list(type), " S_CALL_DEFAULTS "} functional unsupported",
    "StatefulPartitionedCall(args: Tin) -> (output: Tout) {Tin: list(type), Tout: "
    "list(type), " S_CALL_DEFAULTS "} stateful functional unsupported",
    "SymbolicGradient(input: Tin) -> (output: Tout) {Tin: list(type), Tout: "
    "list(type)}"
    " functional unsupported",
    "BatchFunction(in_tensors: Tin, captured_tensors: Tcaptured) -> "
    "(out_tensors: Tout)"
    " {Tin: list(type), Tcaptured: list(type), Tout: list(type),"
    " max_enqueued_batches: int = 10, allowed_batch_sizes: list(int) = [],"
    " container: string = '', shared_name: string = '', batching_queue: string = '',"
    " low_priority_max_batch_size: int = 0, low_priority_batch_timeout_micros: int = 0,"
    " low_priority_allowed_batch_sizes: list(int) = [],"
    " low_priority_max_enqueued_batches: int = 0,"
    " mixed_priority_policy: string = 'low_priority_padding_with_max_batch_size',"
    " batch_padding_policy: string = 'PAD_UP', enable_large_batch_splitting: bool = false}"
    " functional unsupported",

    /* Partition boundaries and function frames */
    "_Send(tensor: T) -> () " S_SENDRECV_DEFAULTS " stateful send_recv",
    "_Recv() -> (tensor: tensor_type) " S_SENDRECV_DEFAULTS " stateful send_recv",
    "_HostSend(tensor: T) -> () " S_SENDRECV_DEFAULTS " stateful send_recv",
    "_HostRecv() -> (tensor: tensor_type) " S_SENDRECV_DEFAULTS " stateful send_recv",
    "_Arg() -> (output: T) stateful",
    "_Retval(input: T) -> () stateful",
    "_DeviceArg() -> (output: T) stateful",
    "_DeviceRetval(input: T) -> () stateful",

    /* Checkpoints (TensorFlow's V2 format) */
    "SaveV2(prefix: string, tensor_names: string, shape_and_slices: string, tensors: dtypes) -> ()"
    " {dtypes: list(type)} stateful",
    "RestoreV2(prefix: string, tensor_names: string, shape_and_slices: string) -> (tensors: dtypes)"
    " {dtypes: list(type)} stateful",
    "MergeV2Checkpoints(checkpoint_prefixes: string, destination_prefix: string) -> ()"
    " {delete_old_dirs: bool = true, allow_missing_files: bool = false} stateful",

    /* Known, but outside what zflow runs: input pipelines, TPU infeed,
     * lookup tables, TensorLists, example parsing */
    "IteratorGetNext(iterator: resource) -> (components: output_types)"
    " {output_types: list(type)} stateful unsupported",
    "IteratorGetNextSync(iterator: resource) -> (components: output_types)"
    " {output_types: list(type)} stateful unsupported",
    "MultiDeviceIteratorGetNextFromShard(multi_device_iterator: resource, "
    "shard_num: int32,"
    " incarnation_id: int64) -> (components: output_types) {output_types: "
    "list(type)}"
    " stateful unsupported",
    "InfeedDequeue() -> (output: dtype) stateful unsupported",
    "InfeedDequeueTuple() -> (outputs: dtypes) {dtypes: list(type)} stateful "
    "unsupported",
    "HashTableV2() -> (table_handle: resource)"
    " {container: string = '', shared_name: string = '', use_node_name_sharing: bool = false}"
    " stateful unsupported",
    "TensorListReserve(element_shape: shape_type, num_elements: int32) -> "
    "(handle: variant)"
    " unsupported",
    "TensorListFromTensor(tensor: element_dtype, element_shape: shape_type)"
    " -> (output_handle: variant) unsupported",
    "TensorListGetItem(input_handle: variant, index: int32, element_shape: "
    "int32)"
    " -> (item: element_dtype) unsupported",
    "TensorListSetItem(input_handle: variant, index: int32, item: "
    "element_dtype)"
    " -> (output_handle: variant) {resize_if_index_out_of_bounds: bool = false} unsupported",
    "TensorListStack(input_handle: variant, element_shape: int32) -> (tensor: "
    "element_dtype)"
    " {num_elements: int = -1} unsupported",
    "ParseExample(serialized: string, names: string, sparse_keys: "
    "Nsparse*string,"
    " dense_keys: Ndense*string, dense_defaults: Tdense) -> (sparse_indices: "
    "Nsparse*int64,"
    " sparse_values: sparse_types, sparse_shapes: Nsparse*int64, dense_values: "
    "Tdense)"
    " {sparse_types: list(type), Tdense: list(type)} unsupported",

    NULL,
};

const char *const *zf__op_table(void)
{
    return s_table;
}
