//! What the compiler writes into an artifact's `npu/` folder for Qualcomm's NPU (QNN
//! HTP), and the checks it passes before a device sees it ([`validate`]). The format
//! itself (`model_net.json`, `model.bin`) lives in [`oxrelax_runtime::qnn`].

pub mod validate;
