//! The Snapdragon SoCs the NPU path compiles for: their HTP (Hexagon tensor processor)
//! architecture and VTCM size, which the backend configs name.

/// A Snapdragon SoC with an HTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Soc {
    /// The part name (`SM8650`).
    pub name: &'static str,
    /// The marketing name.
    pub product: &'static str,
    /// The HTP architecture version (`75` for v75).
    pub htp_arch: u32,
    /// Vector tightly coupled memory, in MiB.
    pub vtcm_mib: u32,
    /// QNN's id of the SoC (the HTP backend config's `soc_model`).
    pub soc_model: u32,
}

/// The SoCs, newest first. The HTP architectures are the parts' published ones; the
/// `soc_model` ids those of the QNN SDK documentation's supported-SoC table (as its HTP
/// backend configs take them); the VTCM sizes the usual 8 MiB, not checked against the
/// SDK's per-SoC tables (no SDK here).
pub const SOCS: &[Soc] = &[
    Soc {
        name: "SM8750",
        soc_model: 69,
        product: "Snapdragon 8 Elite",
        htp_arch: 79,
        vtcm_mib: 8,
    },
    Soc {
        name: "SM8650",
        soc_model: 57,
        product: "Snapdragon 8 Gen 3",
        htp_arch: 75,
        vtcm_mib: 8,
    },
    Soc {
        name: "SM8550",
        soc_model: 43,
        product: "Snapdragon 8 Gen 2",
        htp_arch: 73,
        vtcm_mib: 8,
    },
    Soc {
        name: "SM8475",
        soc_model: 42,
        product: "Snapdragon 8+ Gen 1",
        htp_arch: 69,
        vtcm_mib: 8,
    },
];

impl Soc {
    /// The SoC named `name` (case-insensitive); the error lists the known ones.
    pub fn named(name: &str) -> Result<Soc, String> {
        SOCS.iter()
            .find(|soc| soc.name.eq_ignore_ascii_case(name))
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = SOCS.iter().map(|soc| soc.name).collect();
                format!("unknown SoC `{name}` (known: {})", known.join(", "))
            })
    }
}
