//! Our declarations of the part of Qualcomm's QNN C API (core API 2.x) the HTP backend
//! uses, written from the public QNN API reference: the handle and error types, the
//! tensor, quantization, parameter and op-config structs, the device config the HTP
//! backend takes for a SoC, and the interface table a backend library hands out. Only the
//! members used are named; every struct keeps the documented size and member offsets
//! (checked by the tests below), because the library reads them by layout.

use std::ffi::{c_char, c_void};

/// `Qnn_ErrorHandle_t`: 0 on success; the low 16 bits are the error code.
pub type ErrorHandle = u64;
/// An opaque handle (`Qnn_Handle_t` and its aliases).
pub type Handle = *mut c_void;

/// `Qnn_Version_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

/// `Qnn_ApiVersion_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ApiVersion {
    /// The core API's version (the layout of everything here).
    pub core: Version,
    /// The backend-specific API's version.
    pub backend: Version,
}

/// `Qnn_ScaleOffset_t`: `real = scale * (q + offset)`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleOffset {
    /// The step.
    pub scale: f32,
    /// Added to the integer before scaling.
    pub offset: i32,
}

/// `Qnn_AxisScaleOffset_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AxisScaleOffset {
    /// The axis.
    pub axis: i32,
    /// How many encodings `scale_offset` points at.
    pub num_scale_offsets: u32,
    /// One encoding per index of `axis`.
    pub scale_offset: *const ScaleOffset,
}

/// `Qnn_BlockwiseExpansion_t` (LPBQ): per index of `axis` a scale, per block of the
/// other (reduction) axis an integer block scale of `block_scale_bitwidth` bits.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BlockwiseExpansion {
    /// The output-channel axis.
    pub axis: i32,
    /// One scale (offset 0) per index of `axis`.
    pub scale_offsets: *const ScaleOffset,
    /// Blocks along the reduction axis.
    pub num_blocks_per_axis: u32,
    /// Bits of a block scale.
    pub block_scale_bitwidth: u32,
    /// How block scales are stored ([`BLOCK_SCALE_STORAGE_8`] or 16).
    pub block_scale_storage: u32,
    /// The block scales, channel-major (8- or 16-bit by `block_scale_storage`).
    pub block_scales: *const c_void,
}

/// `QNN_BLOCKWISE_EXPANSION_BITWIDTH_SCALE_STORAGE_8`.
pub const BLOCK_SCALE_STORAGE_8: u32 = 0;
/// `QNN_BLOCKWISE_EXPANSION_BITWIDTH_SCALE_STORAGE_16`.
pub const BLOCK_SCALE_STORAGE_16: u32 = 1;

/// The encoding-specific part of [`QuantizeParams`] (a C union of 32 bytes, 8-aligned).
#[repr(C)]
#[derive(Clone, Copy)]
pub union Encoding {
    /// For `SCALE_OFFSET`.
    pub scale_offset: ScaleOffset,
    /// For `AXIS_SCALE_OFFSET`.
    pub axis_scale_offset: AxisScaleOffset,
    /// For `BLOCKWISE_EXPANSION`.
    pub blockwise_expansion: *const BlockwiseExpansion,
    /// The union's full extent (its largest member has 32 bytes).
    pub extent: [u64; 4],
}

/// `Qnn_QuantizeParams_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct QuantizeParams {
    /// A `Qnn_Definition_t` code.
    pub definition: u32,
    /// A `Qnn_QuantizationEncoding_t` code.
    pub encoding_kind: u32,
    /// The encoding.
    pub encoding: Encoding,
}

/// `Qnn_ClientBuffer_t`: memory the app owns.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ClientBuffer {
    /// Start of the bytes.
    pub data: *mut c_void,
    /// Their length.
    pub size: u32,
}

/// `QNN_TENSOR_VERSION_1`.
pub const TENSOR_VERSION_1: u32 = 1;
/// `QNN_TENSORMEMTYPE_RAW`: data in a [`ClientBuffer`].
pub const TENSOR_MEM_RAW: u32 = 0;

/// `Qnn_TensorV1_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TensorV1 {
    /// Assigned by the backend when the tensor is created.
    pub id: u32,
    /// The name (unique in its graph).
    pub name: *const c_char,
    /// A `Qnn_TensorType_t` code.
    pub kind: u32,
    /// `QNN_TENSOR_DATA_FORMAT_FLAT_BUFFER` (0).
    pub data_format: u32,
    /// A `Qnn_DataType_t` code.
    pub data_type: u32,
    /// The quantization encoding.
    pub quantize: QuantizeParams,
    /// Number of dimensions.
    pub rank: u32,
    /// The dimensions.
    pub dimensions: *mut u32,
    /// [`TENSOR_MEM_RAW`].
    pub mem_type: u32,
    /// The data (static tensors, and execution's inputs and outputs).
    pub client_buf: ClientBuffer,
}

/// `Qnn_Tensor_t`: a version tag and the versioned tensor. Sized as the newest version
/// (`Qnn_TensorV2_t`, 136 bytes) so a backend reading either finds the struct whole.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Tensor {
    /// [`TENSOR_VERSION_1`].
    pub version: u32,
    /// The tensor.
    pub v1: TensorV1,
    /// Zeros: the members `Qnn_TensorV2_t` adds after the first version's.
    pub v2_tail: [u64; 3],
}

/// `Qnn_Scalar_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Scalar {
    /// A `Qnn_DataType_t` code.
    pub data_type: u32,
    /// The value's bytes, little-endian, in the low bytes.
    pub value: u64,
}

/// `QNN_PARAMTYPE_SCALAR`.
pub const PARAM_SCALAR: u32 = 0;
/// `QNN_PARAMTYPE_TENSOR`.
pub const PARAM_TENSOR: u32 = 1;

/// The value of a [`Param`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union ParamValue {
    /// For [`PARAM_SCALAR`].
    pub scalar: Scalar,
    /// For [`PARAM_TENSOR`] (created in the graph first).
    pub tensor: Tensor,
}

/// `Qnn_Param_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Param {
    /// [`PARAM_SCALAR`] or [`PARAM_TENSOR`].
    pub kind: u32,
    /// The parameter's name.
    pub name: *const c_char,
    /// Its value.
    pub value: ParamValue,
}

/// `QNN_OPCONFIG_VERSION_1`.
pub const OP_CONFIG_VERSION_1: u32 = 1;

/// `Qnn_OpConfig_t` (version 1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OpConfig {
    /// [`OP_CONFIG_VERSION_1`].
    pub version: u32,
    /// The node's name.
    pub name: *const c_char,
    /// The op package (`qti.aisw`).
    pub package: *const c_char,
    /// The op type.
    pub type_name: *const c_char,
    /// Number of parameters.
    pub num_params: u32,
    /// The parameters.
    pub params: *mut Param,
    /// Number of inputs.
    pub num_inputs: u32,
    /// The inputs (as created in the graph).
    pub inputs: *mut Tensor,
    /// Number of outputs.
    pub num_outputs: u32,
    /// The outputs.
    pub outputs: *mut Tensor,
}

/// `QNN_DEVICE_CONFIG_OPTION_CUSTOM`.
pub const DEVICE_CONFIG_CUSTOM: u32 = 0;

/// `QnnDevice_Config_t`.
#[repr(C)]
pub struct DeviceConfig {
    /// [`DEVICE_CONFIG_CUSTOM`].
    pub option: u32,
    /// The backend's custom config.
    pub custom: *const c_void,
}

/// `QNN_HTP_DEVICE_CONFIG_OPTION_SOC`.
pub const HTP_DEVICE_CONFIG_SOC: u32 = 0;

/// `QnnHtpDevice_CustomConfig_t` with the SoC option. The HTP library reads the union's
/// payload at offset 8 (the union holds 8-byte members), whatever the option.
#[repr(C)]
pub struct HtpDeviceSocConfig {
    /// [`HTP_DEVICE_CONFIG_SOC`].
    pub option: u32,
    /// The SoC's `Qnn_SocModel_t` code, 8-aligned as the union places it.
    pub soc_model: u64,
}

/// `QnnLog_Callback_t`: a printf-style format and its `va_list` (passed as a pointer on
/// the ABIs we build for).
pub type LogCallback =
    unsafe extern "C" fn(fmt: *const c_char, level: u32, timestamp: u64, args: *mut c_void);

/// `QNN_LOG_LEVEL_WARN`.
pub const LOG_LEVEL_WARN: u32 = 2;

type Fn = Option<unsafe extern "C" fn()>;

/// `QNN_INTERFACE_VER_TYPE`: the backend's function table, in the core API's order
/// (stable from 2.14 on: later minors only append). Entries we call are typed; the others
/// are placeholders that keep the offsets.
#[repr(C)]
pub struct FunctionTable {
    /// `propertyHasCapability`.
    pub property_has_capability: Fn,
    /// `backendCreate`.
    pub backend_create: Option<
        unsafe extern "C" fn(
            log: Handle,
            config: *const *const c_void,
            out: *mut Handle,
        ) -> ErrorHandle,
    >,
    /// `backendSetConfig`.
    pub backend_set_config: Fn,
    /// `backendGetApiVersion`.
    pub backend_get_api_version: Fn,
    /// `backendGetBuildId`.
    pub backend_get_build_id: Option<unsafe extern "C" fn(id: *mut *const c_char) -> ErrorHandle>,
    /// `backendRegisterOpPackage`.
    pub backend_register_op_package: Fn,
    /// `backendGetSupportedOperations`.
    pub backend_get_supported_operations: Fn,
    /// `backendValidateOpConfig`.
    pub backend_validate_op_config:
        Option<unsafe extern "C" fn(backend: Handle, op: OpConfig) -> ErrorHandle>,
    /// `backendFree`.
    pub backend_free: Option<unsafe extern "C" fn(backend: Handle) -> ErrorHandle>,
    /// `contextCreate`.
    pub context_create: Option<
        unsafe extern "C" fn(
            backend: Handle,
            device: Handle,
            config: *const *const c_void,
            out: *mut Handle,
        ) -> ErrorHandle,
    >,
    /// `contextSetConfig`.
    pub context_set_config: Fn,
    /// `contextGetBinarySize`.
    pub context_get_binary_size:
        Option<unsafe extern "C" fn(context: Handle, size: *mut u64) -> ErrorHandle>,
    /// `contextGetBinary`.
    pub context_get_binary: Option<
        unsafe extern "C" fn(
            context: Handle,
            buffer: *mut c_void,
            size: u64,
            written: *mut u64,
        ) -> ErrorHandle,
    >,
    /// `contextCreateFromBinary`.
    pub context_create_from_binary: Option<
        unsafe extern "C" fn(
            backend: Handle,
            device: Handle,
            config: *const *const c_void,
            buffer: *const c_void,
            size: u64,
            out: *mut Handle,
            profile: Handle,
        ) -> ErrorHandle,
    >,
    /// `contextFree`.
    pub context_free: Option<unsafe extern "C" fn(context: Handle, profile: Handle) -> ErrorHandle>,
    /// `graphCreate`.
    pub graph_create: Option<
        unsafe extern "C" fn(
            context: Handle,
            name: *const c_char,
            config: *const *const c_void,
            out: *mut Handle,
        ) -> ErrorHandle,
    >,
    /// `graphCreateSubgraph`.
    pub graph_create_subgraph: Fn,
    /// `graphSetConfig`.
    pub graph_set_config: Fn,
    /// `graphAddNode`.
    pub graph_add_node: Option<unsafe extern "C" fn(graph: Handle, op: OpConfig) -> ErrorHandle>,
    /// `graphFinalize`.
    pub graph_finalize:
        Option<unsafe extern "C" fn(graph: Handle, profile: Handle, signal: Handle) -> ErrorHandle>,
    /// `graphRetrieve`.
    pub graph_retrieve: Option<
        unsafe extern "C" fn(context: Handle, name: *const c_char, out: *mut Handle) -> ErrorHandle,
    >,
    /// `graphExecute`.
    pub graph_execute: Option<
        unsafe extern "C" fn(
            graph: Handle,
            inputs: *const Tensor,
            num_inputs: u32,
            outputs: *mut Tensor,
            num_outputs: u32,
            profile: Handle,
            signal: Handle,
        ) -> ErrorHandle,
    >,
    /// `graphExecuteAsync`.
    pub graph_execute_async: Fn,
    /// `tensorCreateContextTensor`.
    pub tensor_create_context_tensor: Fn,
    /// `tensorCreateGraphTensor`.
    pub tensor_create_graph_tensor:
        Option<unsafe extern "C" fn(graph: Handle, tensor: *mut Tensor) -> ErrorHandle>,
    /// `logCreate`.
    pub log_create: Option<
        unsafe extern "C" fn(
            callback: LogCallback,
            max_level: u32,
            out: *mut Handle,
        ) -> ErrorHandle,
    >,
    /// `logSetLogLevel`.
    pub log_set_log_level: Fn,
    /// `logFree`.
    pub log_free: Option<unsafe extern "C" fn(log: Handle) -> ErrorHandle>,
    /// The seven profiling entries (`profileCreate` .. `profileFree`).
    pub profile: [Fn; 7],
    /// `memRegister`, `memDeRegister`.
    pub mem: [Fn; 2],
    /// `deviceGetPlatformInfo`, `deviceFreePlatformInfo`, `deviceGetInfrastructure`.
    pub device_info: [Fn; 3],
    /// `deviceCreate`.
    pub device_create: Option<
        unsafe extern "C" fn(
            log: Handle,
            config: *const *const DeviceConfig,
            out: *mut Handle,
        ) -> ErrorHandle,
    >,
    /// `deviceSetConfig`, `deviceGetInfo`.
    pub device_config: [Fn; 2],
    /// `deviceFree`.
    pub device_free: Option<unsafe extern "C" fn(device: Handle) -> ErrorHandle>,
    /// The four signal entries.
    pub signal: [Fn; 4],
    /// `errorGetMessage`.
    pub error_get_message: Option<
        unsafe extern "C" fn(error: ErrorHandle, message: *mut *const c_char) -> ErrorHandle,
    >,
}

/// `QnnInterface_t`: one provider of a backend library.
#[repr(C)]
pub struct Interface {
    /// The backend's id.
    pub backend_id: u32,
    /// The provider's name (may be null).
    pub provider_name: *const c_char,
    /// The API versions it implements.
    pub api_version: ApiVersion,
    /// Its function table.
    pub functions: FunctionTable,
}

/// `QnnInterface_getProviders`, the one symbol a backend library exports for this.
pub type GetProviders =
    unsafe extern "C" fn(providers: *mut *mut *const Interface, count: *mut u32) -> ErrorHandle;

/// The symbol's name.
pub const GET_PROVIDERS: &[u8] = b"QnnInterface_getProviders\0";

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn structs_have_the_documented_layout() {
        assert_eq!(size_of::<QuantizeParams>(), 40);
        assert_eq!(offset_of!(QuantizeParams, encoding), 8);
        assert_eq!(size_of::<AxisScaleOffset>(), 16);
        assert_eq!(size_of::<BlockwiseExpansion>(), 40);
        assert_eq!(offset_of!(BlockwiseExpansion, num_blocks_per_axis), 16);
        assert_eq!(offset_of!(BlockwiseExpansion, block_scales), 32);
        assert_eq!(size_of::<TensorV1>(), 112);
        assert_eq!(offset_of!(TensorV1, quantize), 32);
        assert_eq!(offset_of!(TensorV1, rank), 72);
        assert_eq!(offset_of!(TensorV1, dimensions), 80);
        assert_eq!(offset_of!(TensorV1, client_buf), 96);
        assert_eq!(size_of::<Tensor>(), 144);
        assert_eq!(offset_of!(Tensor, v1), 8);
        assert_eq!(size_of::<Scalar>(), 16);
        assert_eq!(size_of::<Param>(), 160);
        assert_eq!(offset_of!(Param, value), 16);
        assert_eq!(size_of::<OpConfig>(), 80);
        assert_eq!(offset_of!(OpConfig, num_params), 32);
        assert_eq!(offset_of!(OpConfig, outputs), 72);
        assert_eq!(size_of::<DeviceConfig>(), 16);
        assert_eq!(offset_of!(HtpDeviceSocConfig, soc_model), 8);
        assert_eq!(align_of::<Encoding>(), 8);
    }

    #[test]
    fn the_function_table_keeps_the_core_api_order() {
        let slot = |offset: usize| offset / size_of::<usize>();
        assert_eq!(slot(offset_of!(FunctionTable, backend_create)), 1);
        assert_eq!(
            slot(offset_of!(FunctionTable, backend_validate_op_config)),
            7
        );
        assert_eq!(slot(offset_of!(FunctionTable, context_create)), 9);
        assert_eq!(
            slot(offset_of!(FunctionTable, context_create_from_binary)),
            13
        );
        assert_eq!(slot(offset_of!(FunctionTable, graph_create)), 15);
        assert_eq!(slot(offset_of!(FunctionTable, graph_add_node)), 18);
        assert_eq!(slot(offset_of!(FunctionTable, graph_execute)), 21);
        assert_eq!(
            slot(offset_of!(FunctionTable, tensor_create_graph_tensor)),
            24
        );
        assert_eq!(slot(offset_of!(FunctionTable, log_create)), 25);
        assert_eq!(slot(offset_of!(FunctionTable, device_create)), 40);
        assert_eq!(slot(offset_of!(FunctionTable, device_free)), 43);
        assert_eq!(slot(offset_of!(FunctionTable, error_get_message)), 48);
        assert_eq!(offset_of!(Interface, functions), 40);
    }
}
