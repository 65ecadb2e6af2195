//! The macro defining a Hugging Face model class (`LlamaForCausalLM`, ...) as a
//! [`CausalLM`](crate::CausalLM) whose decoder layers use the class's
//! [`LayerOptions`](crate::decoder::LayerOptions).

/// Defines model class `$name` of architecture `$arch` whose layer options are
/// `$options(config)`.
macro_rules! causal_lm_class {
    ($(#[$doc:meta])* $name:ident, $arch:expr, $options:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $name($crate::CausalLM);

        impl $name {
            /// The architecture this class implements.
            pub const ARCHITECTURE: $crate::Architecture = $arch;

            /// The model of `config`, which must be of this class's architecture, with
            /// f32 weights.
            pub fn new(config: &$crate::ModelConfig) -> Result<Self, $crate::ModelError> {
                Self::with_weights(config, oxrelax_dsl::DType::F32)
            }

            /// The model of `config` whose projection weights (and embedding table) are
            /// stored as `weights` (f32 or f16); it computes in f32.
            pub fn with_weights(
                config: &$crate::ModelConfig,
                weights: oxrelax_dsl::DType,
            ) -> Result<Self, $crate::ModelError> {
                if config.architecture != Self::ARCHITECTURE {
                    return Err($crate::ModelError::WrongArchitecture {
                        model: Self::ARCHITECTURE,
                        got: config.architecture,
                    });
                }
                let options: fn(&$crate::ModelConfig) -> $crate::decoder::LayerOptions = $options;
                Ok($name($crate::CausalLM::new(config, options(config), weights)?))
            }

            /// The model, without its class.
            pub fn into_inner(self) -> $crate::CausalLM {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = $crate::CausalLM;

            fn deref(&self) -> &$crate::CausalLM {
                &self.0
            }
        }

        impl oxrelax_dsl::nn::Module for $name {
            fn parameters(&self) -> Vec<oxrelax_dsl::nn::Param> {
                self.0.parameters()
            }
        }
    };
}

pub(crate) use causal_lm_class;
